//! Functions: lookup by IP and token, native code, IL bodies and IL rewriting
//! (`ICorProfilerInfo` / `ICorProfilerInfo2`).

use crate::buffer::fill;
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// One contiguous range of a function's native code (`COR_PRF_CODE_INFO`).
///
/// A jitted method has one chunk, or two when the JIT split it into a hot and
/// a cold part; the first chunk is where the code starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CodeChunk {
    /// First byte of the chunk.
    pub start: usize,
    /// Size in bytes.
    pub size: usize,
}

impl CodeChunk {
    /// `true` if `ip` lies in this chunk.
    pub fn contains(&self, ip: usize) -> bool {
        ip.wrapping_sub(self.start) < self.size
    }
}

/// The IL side of one IL-to-native map entry (`ilOffset` of
/// `COR_DEBUG_IL_TO_NATIVE_MAP`, with `CorDebugIlToNativeMappingTypes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IlOffset {
    /// An offset in the method's IL.
    Offset(u32),
    /// Native code with no IL (`NO_MAPPING`).
    NoMapping,
    /// The prolog (`PROLOG`).
    Prolog,
    /// An epilog (`EPILOG`).
    Epilog,
}

impl IlOffset {
    pub(crate) fn from_sys(v: u32) -> Self {
        match v as i32 {
            sys::NO_MAPPING => IlOffset::NoMapping,
            sys::PROLOG => IlOffset::Prolog,
            sys::EPILOG => IlOffset::Epilog,
            _ => IlOffset::Offset(v),
        }
    }
}

/// One entry of `GetILToNativeMapping`: the native range `native_start ..
/// native_end` (offsets from the code start) that came from `il`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IlToNativeMapEntry {
    /// The IL offset, or a special region.
    pub il: IlOffset,
    /// Native start offset.
    pub native_start: u32,
    /// Native end offset (exclusive).
    pub native_end: u32,
}

/// One entry of the map given to `SetILInstrumentedCodeMap` (`COR_IL_MAP`):
/// IL offset `old_offset` of the original body now lives at `new_offset` of
/// the rewritten body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct IlMapEntry {
    /// Offset in the original IL.
    pub old_offset: u32,
    /// Offset in the instrumented IL.
    pub new_offset: u32,
    /// `true` if the mapping is exact (`fAccurate`).
    pub accurate: bool,
}

impl IlMapEntry {
    pub(crate) fn to_sys(self) -> sys::COR_IL_MAP {
        sys::COR_IL_MAP {
            oldOffset: self.old_offset,
            newOffset: self.new_offset,
            fAccurate: self.accurate as sys::BOOL,
        }
    }
}

/// The runtime's IL body allocator for one module (`IMethodMalloc`, from
/// `GetILFunctionBodyAllocator`).
///
/// A body passed to [`ProfilerInfo::set_il_function_body`] must stay valid
/// for as long as the runtime may compile the method, so it must come from
/// here: the runtime never frees what this allocator hands out while the
/// module is loaded (CoreCLR allocates it from the process heap and never
/// frees it). The allocations are therefore tied to the module's lifetime
/// `'a`, not to this value.
pub struct MethodMalloc<'a> {
    raw: sys::IMethodMalloc,
    module: ModuleId<'a>,
}

impl<'a> MethodMalloc<'a> {
    /// `IMethodMalloc::Alloc`: `len` zeroed bytes for an IL body.
    ///
    /// Fails with [`Error::InvalidArgument`] for a zero or over-`u32` length
    /// and with `E_OUTOFMEMORY` when the runtime's `Alloc` returns null.
    pub fn alloc(&self, len: usize) -> Result<IlBuffer<'a>> {
        let cb =
            u32::try_from(len).map_err(|_| Error::InvalidArgument("IL body larger than 4 GiB"))?;
        if cb == 0 {
            return Err(Error::InvalidArgument("IL body of zero bytes"));
        }
        // SAFETY: [plain-call, com-ownership] plain value argument; the allocator is alive (we hold a reference).
        let p = unsafe { self.raw.Alloc(cb) } as *mut u8;
        let ptr = NonNull::new(p).ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_OUTOFMEMORY as i32),
            "IMethodMalloc::Alloc",
        ))?;
        // SAFETY: [local-memory] `Alloc` returned `len` writable bytes owned by the runtime
        // for the module's lifetime; they may be uninitialised, so zero them
        // before any slice is formed over them.
        unsafe { core::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(IlBuffer {
            ptr,
            len,
            module: self.module.to_raw(),
            _module: PhantomData,
        })
    }

    /// Allocates a copy of `body`.
    pub fn alloc_copy(&self, body: &[u8]) -> Result<IlBuffer<'a>> {
        let mut buf = self.alloc(body.len())?;
        buf.copy_from_slice(body);
        Ok(buf)
    }

    /// The raw `IMethodMalloc`.
    pub fn raw(&self) -> &sys::IMethodMalloc {
        &self.raw
    }
}

/// Memory from [`MethodMalloc`], valid while the module `'a` is loaded.
/// Dereferences to `[u8]`.
pub struct IlBuffer<'a> {
    ptr: NonNull<u8>,
    len: usize,
    /// The module whose allocator made it.
    module: RawModuleId,
    _module: PhantomData<&'a mut [u8]>,
}

impl IlBuffer<'_> {
    /// The module whose allocator made this buffer; only that module's
    /// methods can take it ([`ProfilerInfo::set_il_function_body`]).
    pub fn module(&self) -> RawModuleId {
        self.module
    }
}

impl core::ops::Deref for IlBuffer<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: [module-lifetime, local-memory] `ptr` points to `len` initialised (zeroed or written) bytes
        // owned by the runtime for the module's lifetime, which outlives `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl core::ops::DerefMut for IlBuffer<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: [module-lifetime, local-memory] as in `deref`; `IlBuffer` is the only handle to this
        // allocation (each `Alloc` returns fresh memory), so access is unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl core::fmt::Debug for IlBuffer<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "IlBuffer({:p}, {} bytes)", self.ptr, self.len)
    }
}

/// The size of the IL method (header, code and extra sections) at the start
/// of `body`, checking every part lies inside `body`.
///
/// The runtime reads a body given to `SetILFunctionBody` by its header
/// without any bound, so a header that claims more than the buffer holds
/// would make it read past the allocation. Every path of the SDK that hands
/// IL to the runtime ([`ProfilerInfo::set_il_function_body`],
/// [`FunctionControl::set_il_function_body`](crate::rejit::FunctionControl::set_il_function_body))
/// runs this check before the call.
pub fn il_method_size(body: &[u8]) -> Result<usize> {
    let bad = |what: &str| Error::Malformed(format!("IL method body: {what}"));
    let first = *body.first().ok_or_else(|| bad("empty"))?;
    let end = match u32::from(first) & 0x3 {
        // Tiny header: one byte, code size in the upper six bits.
        0x2 => 1 + (first as usize >> 2),
        // Fat header: 12 bytes (size in dwords in the upper nibble of the
        // second byte), code size at offset 4.
        0x3 => {
            if body.len() < 12 {
                return Err(bad("fat header truncated"));
            }
            let flags = u16::from_le_bytes([body[0], body[1]]);
            let header = 4 * (flags >> 12) as usize;
            if header < 12 {
                return Err(bad("fat header size below 12 bytes"));
            }
            let code = u32::from_le_bytes([body[4], body[5], body[6], body[7]]) as usize;
            let mut end = header
                .checked_add(code)
                .ok_or_else(|| bad("size overflow"))?;
            let mut more = u32::from(flags) & sys::CorILMethod_MoreSects != 0;
            // Extra sections (exception tables), each 4-byte aligned.
            let mut sections = 0;
            while more {
                sections += 1;
                if sections > 64 {
                    return Err(bad("too many extra sections"));
                }
                end = end.checked_add(3).ok_or_else(|| bad("size overflow"))? & !3;
                let kind = u32::from(
                    *body
                        .get(end)
                        .ok_or_else(|| bad("section header truncated"))?,
                );
                let size = if kind & sys::CorILMethod_Sect_FatFormat != 0 {
                    let b = body
                        .get(end + 1..end + 4)
                        .ok_or_else(|| bad("section header truncated"))?;
                    u32::from_le_bytes([b[0], b[1], b[2], 0]) as usize
                } else {
                    *body
                        .get(end + 1)
                        .ok_or_else(|| bad("section header truncated"))?
                        as usize
                };
                if size < 4 {
                    return Err(bad("section smaller than its header"));
                }
                more = kind & sys::CorILMethod_Sect_MoreSects != 0;
                end = end.checked_add(size).ok_or_else(|| bad("size overflow"))?;
            }
            end
        }
        _ => return Err(bad("first byte is neither a tiny nor a fat header")),
    };
    if end > body.len() {
        return Err(bad("header claims more bytes than the buffer holds"));
    }
    Ok(end)
}

impl RuntimeHandle {
    /// `GetFunctionFromIP`: the managed function whose native code contains
    /// `ip`. Fails (`E_FAIL`) for addresses outside jitted/precompiled code and
    /// for IL stubs and other methods without metadata.
    ///
    /// Callable asynchronously (e.g. from a sampling thread). The ID is raw:
    /// nothing about an instruction pointer proves how long its code (and
    /// function) stay loaded.
    pub fn function_from_ip(&self, ip: usize) -> Result<RawFunctionId> {
        let mut f = 0usize;
        check(
            // SAFETY: [plain-call] the runtime only looks `ip` up in its code maps, never
            // dereferences it; `f` is a valid out pointer.
            unsafe {
                self.raw_info1()?
                    .GetFunctionFromIP(ip as sys::LPCBYTE, &mut f)
            },
            "ICorProfilerInfo::GetFunctionFromIP",
        )?;
        Ok(RawFunctionId(f))
    }
}

impl<'s> ProfilerInfo<'s> {
    // provenance: token-module
    /// `GetFunctionFromToken`: the function of a non-generic method, by its
    /// `MethodDef` or `MemberRef` token in `module`.
    ///
    /// Generic methods (or methods of generic types) fail with
    /// `CORPROF_E_FUNCTION_IS_PARAMETERIZED`; use
    /// [`function_from_token_and_type_args`](Self::function_from_token_and_type_args).
    /// A method the runtime has not loaded yet fails with `E_INVALIDARG`.
    pub fn function_from_token<'a>(
        &self,
        module: ModuleId<'a>,
        token: MdToken,
    ) -> Result<FunctionId<'a>> {
        let mut f = 0usize;
        check(
            // SAFETY: [id-scope] `module` is valid for 'a (typed ID); the runtime checks the token.
            unsafe {
                self.raw_info1()?
                    .GetFunctionFromToken(module.as_sys(), token.0, &mut f)
            },
            "ICorProfilerInfo::GetFunctionFromToken",
        )?;
        // SAFETY: [id-derived] a non-generic method of a loaded module lives as long as the module.
        Ok(unsafe { FunctionId::from_sys(f) })
    }

    // provenance: token-module
    /// `GetFunctionFromTokenAndTypeArgs` (Info2): the instantiation of the
    /// method `token` of `module` on `class`, with the method's own type
    /// arguments `type_args` (empty for a non-generic method). May load
    /// types, so it is refused with [`Error::Usage`] where collections are
    /// blocked ([`gc_blocked`](Self::gc_blocked)): a type load can start a
    /// GC that moves the scope's objects. On .NET 9 it is refused with
    /// [`Error::RuntimeVersion`] inside an assembly's load (its load
    /// callbacks), where a type load crashes that runtime.
    pub fn function_from_token_and_type_args<'a>(
        &self,
        module: ModuleId<'a>,
        token: MdToken,
        class: ClassId<'a>,
        type_args: &[ClassId<'a>],
    ) -> Result<FunctionId<'a>> {
        self.require_no_type_load("ICorProfilerInfo2::GetFunctionFromTokenAndTypeArgs")?;
        let i2 = self.raw_info2("ICorProfilerInfo2::GetFunctionFromTokenAndTypeArgs")?;
        let n = u32::try_from(type_args.len())
            .map_err(|_| Error::InvalidArgument("too many type arguments"))?;
        let mut f = 0usize;
        check(
            // SAFETY: [id-scope, no-type-load-in-assembly-load] all IDs are valid for 'a (typed IDs);
            // `ClassId` is `repr(transparent)` over `ClassID`, so the slice is a `ClassID[n]`; no
            // assembly's load is under way on .NET 9 (require_no_type_load).
            unsafe {
                i2.GetFunctionFromTokenAndTypeArgs(
                    module.as_sys(),
                    token.0,
                    class.as_sys(),
                    n,
                    type_args.as_ptr() as *const sys::ClassID,
                    &mut f,
                )
            },
            "ICorProfilerInfo2::GetFunctionFromTokenAndTypeArgs",
        )?;
        // SAFETY: [id-derived] the instantiation lives as long as its module and type arguments ('a).
        Ok(unsafe { FunctionId::from_sys(f) })
    }

    /// `GetCodeInfo`: the first chunk of a function's native code. Fails with
    /// `CORPROF_E_FUNCTION_NOT_COMPILED` before the function is jitted.
    /// Prefer [`code_info2`](Self::code_info2), which reports every chunk.
    pub fn code_info(&self, function: FunctionId<'_>) -> Result<CodeChunk> {
        let (mut start, mut size) = (core::ptr::null::<u8>(), 0u32);
        check(
            // SAFETY: [id-scope, plain-call] `function` is valid (typed ID); out pointers are locals.
            unsafe {
                self.raw_info1()?
                    .GetCodeInfo(function.as_sys(), &mut start, &mut size)
            },
            "ICorProfilerInfo::GetCodeInfo",
        )?;
        Ok(CodeChunk {
            start: start as usize,
            size: size as usize,
        })
    }

    /// `GetCodeInfo2` (Info2): every chunk of a function's native code, the
    /// chunk where the code starts first.
    pub fn code_info2(&self, function: FunctionId<'_>) -> Result<Vec<CodeChunk>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetCodeInfo2")?;
        let mut chunks: Vec<sys::COR_PRF_CODE_INFO> = Vec::new();
        fill::<sys::COR_PRF_CODE_INFO, 2>(
            "ICorProfilerInfo2::GetCodeInfo2",
            &mut chunks,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol] `function` is valid; `buf` has `cap` slots.
                unsafe { i2.GetCodeInfo2(function.as_sys(), cap, needed, buf) }
            },
        )?;
        Ok(chunks
            .into_iter()
            .map(|c| CodeChunk {
                start: c.startAddress,
                size: c.size,
            })
            .collect())
    }

    /// `GetILToNativeMapping`: how the function's native code maps back to its
    /// IL (for the first native code version when tiering made several).
    /// Fails with `CORPROF_E_DEBUGGING_DISABLED` when the runtime has no
    /// debugger support.
    pub fn il_to_native_mapping(
        &self,
        function: FunctionId<'_>,
    ) -> Result<Vec<IlToNativeMapEntry>> {
        let mut map: Vec<sys::COR_DEBUG_IL_TO_NATIVE_MAP> = Vec::new();
        let i1 = self.raw_info1()?;
        fill::<sys::COR_DEBUG_IL_TO_NATIVE_MAP, 32>(
            "ICorProfilerInfo::GetILToNativeMapping",
            &mut map,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol] `function` is valid; `buf` has `cap` slots.
                unsafe { i1.GetILToNativeMapping(function.as_sys(), cap, needed, buf) }
            },
        )?;
        Ok(map
            .into_iter()
            .map(|m| IlToNativeMapEntry {
                il: IlOffset::from_sys(m.ilOffset),
                native_start: m.nativeStartOffset,
                native_end: m.nativeEndOffset,
            })
            .collect())
    }

    // provenance: token-module
    /// `GetILFunctionBody`: the IL method (header, code, extra sections) of
    /// `method` in `module`: the body set with `SetILFunctionBody` if there is
    /// one, else the one in the module's image (bodies from ReJIT are not
    /// reported). Borrowed from runtime memory that lives as long as the
    /// module (`'a`).
    ///
    /// Fails with `CORPROF_E_FUNCTION_NOT_IL` for methods without IL
    /// (abstract, P/Invoke, runtime-implemented).
    pub fn il_function_body<'a>(
        &self,
        module: ModuleId<'a>,
        method: MdMethodDef,
    ) -> Result<&'a [u8]> {
        let (mut header, mut size) = (core::ptr::null::<u8>(), 0u32);
        check(
            // SAFETY: [id-scope, plain-call] `module` is valid for 'a; out pointers are locals.
            unsafe {
                self.raw_info1()?.GetILFunctionBody(
                    module.as_sys(),
                    method.0,
                    &mut header,
                    &mut size,
                )
            },
            "ICorProfilerInfo::GetILFunctionBody",
        )?;
        if header.is_null() {
            return Ok(&[]);
        }
        // SAFETY: [module-lifetime] the runtime returns a pointer to `size` bytes of the method
        // in the module's image (or its dynamic IL), valid while the module is
        // loaded, which 'a (the module ID's lifetime) guarantees.
        Ok(unsafe { core::slice::from_raw_parts(header, size as usize) })
    }

    /// `GetILFunctionBodyAllocator`: the allocator for new IL bodies of
    /// `module` (see [`MethodMalloc`]).
    pub fn il_function_body_allocator<'a>(&self, module: ModuleId<'a>) -> Result<MethodMalloc<'a>> {
        let mut malloc: Option<sys::IMethodMalloc> = None;
        check(
            // SAFETY: [id-scope, com-ownership] `module` is valid; `malloc` receives an owned reference.
            unsafe {
                self.raw_info1()?
                    .GetILFunctionBodyAllocator(module.as_sys(), &mut malloc)
            },
            "ICorProfilerInfo::GetILFunctionBodyAllocator",
        )?;
        let raw = malloc.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo::GetILFunctionBodyAllocator",
        ))?;
        Ok(MethodMalloc { raw, module })
    }

    /// `SetILFunctionBody`: replaces the IL of `method` in `module` for its
    /// next (first) compilation; already-jitted code is not affected. The
    /// body must start with a valid IL method header whose sizes lie inside
    /// `body` (checked by [`il_method_size`] before the call).
    ///
    /// The runtime keeps the pointer (it does not copy the body), so the body
    /// must come from the module's [`MethodMalloc`], and it is taken by value:
    /// once the runtime may read it (from any thread, when it compiles the
    /// method), no handle that could write to it remains. Calling this marks
    /// the profiler as having made irreversible changes: it can no longer
    /// detach (`CORPROF_E_IRREVERSIBLE_INSTRUMENTATION_PRESENT`). The runtime
    /// also refuses it for a second, non-main profiler (`E_INVALIDARG`).
    ///
    /// The body must come from the allocator of the same `module`: .NET
    /// Framework frees each module's IL heap with the module (CoreCLR never
    /// frees it), so a body of another module could be freed while this
    /// method still uses it. A buffer of another module is refused with
    /// [`Error::Mismatch`].
    ///
    /// # Safety
    /// The body is compiled and run as the method's code, and the JIT trusts
    /// it: IL can read and write any address (`ldc.i8 <address>; conv.i;
    /// ldind.i4`), call any native address (`calli`) or break the type
    /// system, and neither the runtime nor [`il::verify`](crate::il::verify())
    /// (which checks structure and stack depth, not types) stops it. The
    /// caller promises that `body` is IL `method` may run: type-safe for its
    /// signature and locals, every token resolving in `module` to a member
    /// of the kind its opcode expects, touching only memory and native code
    /// that managed code of the method may touch (an unmanaged call's target
    /// is a live function of the signature given, for as long as the code
    /// can run).
    ///
    /// Safe code changes methods through the method-wrapping layer (DESIGN.md
    /// decision 15: bodies of known shapes built and verified by the SDK);
    /// until it exists, installing IL is `unsafe`.
    pub unsafe fn set_il_function_body<'a>(
        &self,
        module: ModuleId<'a>,
        method: MdMethodDef,
        body: IlBuffer<'a>,
    ) -> Result<()> {
        if body.module != module.to_raw() {
            return Err(Error::Mismatch {
                call: "ICorProfilerInfo::SetILFunctionBody",
                made_for: body.module.0,
                used_with: module.as_sys(),
            });
        }
        il_method_size(&body)?;
        check(
            // SAFETY: [id-scope, il-header, caller-contract] `module` is valid; `body` is runtime-owned memory that stays
            // valid while the module is loaded (the runtime keeps the pointer),
            // and its header was checked to describe no more than its length,
            // so the JIT reads it within bounds; what the IL does when run is
            // the caller's promise (this function's `# Safety`).
            unsafe {
                self.raw_info1()?
                    .SetILFunctionBody(module.as_sys(), method.0, body.as_ptr())
            },
            "ICorProfilerInfo::SetILFunctionBody",
        )
    }

    /// `SetILInstrumentedCodeMap`: tells the runtime (and debuggers) how the
    /// IL offsets of the original body map to the rewritten one. Call it from
    /// `JITCompilationStarted` (`start_jit = true`) for a body changed with
    /// [`set_il_function_body`](Self::set_il_function_body). The runtime copies
    /// the map.
    pub fn set_il_instrumented_code_map(
        &self,
        function: FunctionId<'_>,
        start_jit: bool,
        map: &[IlMapEntry],
    ) -> Result<()> {
        let raw: Vec<sys::COR_IL_MAP> = map.iter().copied().map(IlMapEntry::to_sys).collect();
        let n = u32::try_from(raw.len()).map_err(|_| Error::InvalidArgument("IL map too long"))?;
        check(
            // SAFETY: [id-scope, local-memory] `function` is valid; `raw` holds `n` entries the runtime copies.
            unsafe {
                self.raw_info1()?.SetILInstrumentedCodeMap(
                    function.as_sys(),
                    start_jit as sys::BOOL,
                    n,
                    raw.as_ptr(),
                )
            },
            "ICorProfilerInfo::SetILInstrumentedCodeMap",
        )
    }

    /// `SetFunctionReJIT`: obsolete. CoreCLR always returns `E_NOTIMPL`; use
    /// the ReJIT API of `ICorProfilerInfo4` (`RequestReJIT`) instead.
    pub fn set_function_rejit(&self, function: FunctionId<'_>) -> Result<()> {
        check(
            // SAFETY: [id-scope] `function` is valid (typed ID).
            unsafe { self.raw_info1()?.SetFunctionReJIT(function.as_sys()) },
            "ICorProfilerInfo::SetFunctionReJIT",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeFunction, FakeModule, FakeRuntime};
    use std::sync::Arc;

    const F: usize = 0x1000;
    const M: usize = 0x2000;
    const C: usize = 0x3000;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            st.functions.insert(
                F,
                FakeFunction {
                    class: C,
                    module: M,
                    token: 0x0600_0001,
                    code: vec![(0x7000, 0x40), (0x9000, 0x10)],
                    il_map: vec![(u32::MAX - 1, 0, 4), (0, 4, 12), (5, 12, 0x40)],
                    ..Default::default()
                },
            );
            let mut m = FakeModule::default();
            m.functions_by_token.insert(0x0600_0001, F);
            m.function_instantiations
                .push(((0x0600_0002, C, vec![0x3100, 0x3200]), 0x1100));
            // Tiny header: code size 3 (ldc.i4.1; pop; ret).
            m.il_bodies
                .insert(0x0600_0001, Arc::from(&[0x0E, 0x17, 0x26, 0x2A][..]));
            st.modules.insert(M, m);
        }
        fake
    }

    #[test]
    fn function_from_ip_finds_hot_and_cold_chunks() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(info.function_from_ip(0x7010).unwrap().0, F);
        assert_eq!(info.function_from_ip(0x900f).unwrap().0, F);
        let e = info.function_from_ip(0x9010).unwrap_err();
        assert_eq!(e.hresult().0, KnownHresult::E_FAIL as i32);
        assert_eq!(fake.calls_of("GetFunctionFromIP")[0].args, vec![0x7010]);
    }

    #[test]
    fn function_from_token_passes_module_and_token() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let f = info.function_from_token(m, MdToken(0x0600_0001)).unwrap();
        assert_eq!(f.as_sys(), F);
        assert_eq!(
            fake.calls_of("GetFunctionFromToken")[0].args,
            vec![M, 0x0600_0001]
        );
        let e = info
            .function_from_token(m, MdToken(0x0600_0099))
            .unwrap_err();
        assert_eq!(e.hresult().0, KnownHresult::E_INVALIDARG as i32);
    }

    #[test]
    fn function_from_token_and_type_args_passes_every_type_arg() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M), c = class_id(C), a = class_id(0x3100), b = class_id(0x3200));
        let f = info
            .function_from_token_and_type_args(m, MdToken(0x0600_0002), c, &[a, b])
            .unwrap();
        assert_eq!(f.as_sys(), 0x1100);
        assert_eq!(
            fake.calls_of("GetFunctionFromTokenAndTypeArgs")[0].args,
            vec![M, 0x0600_0002, C, 0x3100, 0x3200]
        );
        // Different type arguments: no such instantiation.
        assert!(info
            .function_from_token_and_type_args(m, MdToken(0x0600_0002), c, &[b, a])
            .is_err());
    }

    #[test]
    fn code_info_reports_first_chunk_and_not_compiled() {
        let fake = world();
        fake.state()
            .functions
            .insert(0x1200, FakeFunction::default());
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F), g = function_id(0x1200));
        assert_eq!(
            info.code_info(f).unwrap(),
            CodeChunk {
                start: 0x7000,
                size: 0x40
            }
        );
        let e = info.code_info(g).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_FUNCTION_NOT_COMPILED"));
    }

    #[test]
    fn code_info2_reads_all_chunks_and_follows_growth() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        let chunks = info.code_info2(f).unwrap();
        assert_eq!(
            chunks,
            vec![
                CodeChunk {
                    start: 0x7000,
                    size: 0x40
                },
                CodeChunk {
                    start: 0x9000,
                    size: 0x10
                }
            ]
        );
        assert!(chunks[0].contains(0x703f) && !chunks[0].contains(0x7040));
        assert_eq!(fake.call_count("GetCodeInfo2"), 1);

        // Three chunks do not fit the stack buffer of two; a fourth appears
        // between the second and third call.
        fake.state()
            .functions
            .get_mut(&F)
            .unwrap()
            .code
            .push((0xA000, 8));
        let mut n = 0;
        fake.on_call(move |st, m| {
            if m == "GetCodeInfo2" {
                n += 1;
                if n == 2 {
                    st.functions.get_mut(&F).unwrap().code.push((0xB000, 4));
                }
            }
        });
        let before = fake.call_count("GetCodeInfo2");
        let chunks = info.code_info2(f).unwrap();
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            chunks[3],
            CodeChunk {
                start: 0xB000,
                size: 4
            }
        );
        assert_eq!(fake.call_count("GetCodeInfo2") - before, 3);
    }

    #[test]
    fn il_to_native_mapping_decodes_special_offsets_and_grows() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        let map = info.il_to_native_mapping(f).unwrap();
        assert_eq!(
            map[0],
            IlToNativeMapEntry {
                il: IlOffset::Prolog,
                native_start: 0,
                native_end: 4
            }
        );
        assert_eq!(map[2].il, IlOffset::Offset(5));

        let long: Vec<(u32, u32, u32)> = (0..40).map(|i| (i, i * 2, i * 2 + 2)).collect();
        fake.state().functions.get_mut(&F).unwrap().il_map = long;
        let mut n = 0;
        fake.on_call(move |st, m| {
            if m == "GetILToNativeMapping" {
                n += 1;
                if n == 2 {
                    st.functions
                        .get_mut(&F)
                        .unwrap()
                        .il_map
                        .push((u32::MAX - 2, 80, 90));
                }
            }
        });
        let map = info.il_to_native_mapping(f).unwrap();
        assert_eq!(map.len(), 41);
        assert_eq!(map[40].il, IlOffset::Epilog);
        assert_eq!(map[39].il, IlOffset::Offset(39));
        assert_eq!(fake.call_count("GetILToNativeMapping"), 1 + 3);
    }

    #[test]
    fn il_function_body_borrows_module_memory() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let body = info.il_function_body(m, MdMethodDef(0x0600_0001)).unwrap();
        assert_eq!(body, &[0x0E, 0x17, 0x26, 0x2A]);
        assert_eq!(il_method_size(body).unwrap(), 4);
        let e = info
            .il_function_body(m, MdMethodDef(0x0600_0009))
            .unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_FUNCTION_NOT_IL"));
    }

    #[test]
    fn allocator_zeroes_memory_and_set_body_passes_the_allocation() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let malloc = info.il_function_body_allocator(m).unwrap();
        let zeroed = malloc.alloc(16).unwrap();
        assert!(
            zeroed.iter().all(|&b| b == 0),
            "the fake fills with 0xCD; alloc must zero"
        );
        let body = malloc.alloc_copy(&[0x0A, 0x00, 0x2A]).unwrap();
        // SAFETY: [test-fake] the fake never runs the body (`nop; ret` anyway).
        unsafe { info.set_il_function_body(m, MdMethodDef(0x0600_0001), body) }.unwrap();
        let st = fake.state();
        // Tiny header 0x0A: two bytes of code after it, so three bytes in all.
        assert_eq!(
            st.il_bodies_set,
            vec![(M, 0x0600_0001, vec![0x0A, 0x00, 0x2A])]
        );
        assert_eq!(
            st.calls
                .iter()
                .filter(|c| c.method == "Alloc")
                .map(|c| c.args[0])
                .collect::<Vec<_>>(),
            vec![16, 3]
        );
    }

    #[test]
    fn set_body_refuses_a_buffer_of_another_module() {
        let fake = world();
        fake.state().modules.insert(0x2800, FakeModule::default());
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M), other = module_id(0x2800));
        let body = info
            .il_function_body_allocator(other)
            .unwrap()
            .alloc_copy(&[0x0A, 0x00, 0x2A])
            .unwrap();
        assert_eq!(body.module().0, 0x2800);
        // SAFETY: [test-fake] refused before the runtime sees it (and `nop; ret`).
        let e =
            unsafe { info.set_il_function_body(m, MdMethodDef(0x0600_0001), body) }.unwrap_err();
        assert_eq!(
            e,
            Error::Mismatch {
                call: "ICorProfilerInfo::SetILFunctionBody",
                made_for: 0x2800,
                used_with: M
            }
        );
        assert_eq!(fake.call_count("SetILFunctionBody"), 0);
    }

    #[test]
    fn set_body_refuses_a_header_that_overruns_the_buffer() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let malloc = info.il_function_body_allocator(m).unwrap();
        // Tiny header claiming 10 bytes of code in a 3-byte buffer.
        let body = malloc.alloc_copy(&[(10 << 2) | 2, 0, 0]).unwrap();
        // SAFETY: [test-fake] refused before the runtime sees it.
        let e =
            unsafe { info.set_il_function_body(m, MdMethodDef(0x0600_0001), body) }.unwrap_err();
        assert!(matches!(e, Error::Malformed(_)), "{e}");
        assert_eq!(fake.call_count("SetILFunctionBody"), 0);
    }

    #[test]
    fn allocator_failure_and_zero_length() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let malloc = info.il_function_body_allocator(m).unwrap();
        assert_eq!(
            malloc.alloc(0).unwrap_err(),
            Error::InvalidArgument("IL body of zero bytes")
        );
        fake.fail("Alloc", sys::HRESULT(1));
        let e = malloc.alloc(8).unwrap_err();
        assert_eq!(e.name(), Some("E_OUTOFMEMORY"));
    }

    #[test]
    fn il_method_size_reads_fat_headers_and_sections() {
        // Fat header (flags 0x3013: fat, init locals, size 3 dwords), code size 2, no sections.
        let mut fat = vec![
            0x13, 0x30, 0x08, 0x00, 0x02, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0x00, 0x2A,
        ];
        assert_eq!(il_method_size(&fat).unwrap(), 14);
        // With MoreSects: one small EH section of 16 bytes at the next 4-byte boundary (16).
        fat[0] |= 0x08;
        fat.extend_from_slice(&[0, 0]);
        fat.extend_from_slice(&[0x01, 16, 0, 0]);
        fat.extend_from_slice(&[0; 12]);
        assert_eq!(il_method_size(&fat).unwrap(), 32);
        assert!(il_method_size(&fat[..31]).is_err());
        assert!(il_method_size(&[]).is_err());
        assert!(il_method_size(&[0x00]).is_err());
    }

    #[test]
    fn instrumented_code_map_is_copied_with_flags() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        let map = [
            IlMapEntry {
                old_offset: 0,
                new_offset: 4,
                accurate: true,
            },
            IlMapEntry {
                old_offset: 2,
                new_offset: 9,
                accurate: false,
            },
        ];
        info.set_il_instrumented_code_map(f, true, &map).unwrap();
        let st = fake.state();
        let (func, start, raw) = &st.il_maps_set[0];
        assert_eq!((*func, *start), (F, true));
        assert_eq!(
            raw.iter()
                .map(|m| (m.oldOffset, m.newOffset, m.fAccurate))
                .collect::<Vec<_>>(),
            vec![(0, 4, 1), (2, 9, 0)]
        );
    }

    #[test]
    fn set_function_rejit_reports_not_implemented() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        let e = info.set_function_rejit(f).unwrap_err();
        assert_eq!(e.name(), Some("E_NOTIMPL"));
        assert_eq!(fake.calls_of("SetFunctionReJIT")[0].args, vec![F]);
    }
}
