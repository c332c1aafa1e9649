//! Interfaces the runtime lends to a callback for the duration of the call:
//! `ICorProfilerFunctionControl` (ReJIT parameters) and
//! `ICorProfilerAssemblyReferenceProvider` (extra assembly references).

use crate::error::Error;
use crate::error::{check, Result};
use crate::ids::{MdMethodDef, RawModuleId};
use crate::info::{il_method_size, IlMapEntry};
use clrprof_sys as sys;
use core::ffi::c_void;
use windows_core::{IUnknown, Interface};

bitflags::bitflags! {
    /// How the JIT compiles a ReJIT version (`COR_PRF_CODEGEN_FLAGS`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct CodegenFlags: u32 {
        /// `COR_PRF_CODEGEN_DISABLE_INLINING`: inline nothing into this version.
        const DISABLE_INLINING = sys::COR_PRF_CODEGEN_DISABLE_INLINING;
        /// `COR_PRF_CODEGEN_DISABLE_ALL_OPTIMIZATIONS`: compile it unoptimized.
        /// (`COR_PRF_CODEGEN_DEBUG_INFO` is both flags together in corprof.idl.)
        const DISABLE_ALL_OPTIMIZATIONS = sys::COR_PRF_CODEGEN_DISABLE_ALL_OPTIMIZATIONS;
    }
}

/// An assembly reference for
/// [`AssemblyReferenceProvider::add_assembly_reference`]: the identity the
/// runtime should consider while it binds (`COR_PRF_ASSEMBLY_REFERENCE_INFO`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssemblyReference<'a> {
    /// Simple name, e.g. `Probes`.
    pub name: &'a str,
    /// Version `major.minor.build.revision`.
    pub version: [u16; 4],
    /// Culture (empty for neutral).
    pub culture: &'a str,
    /// Public key or its token (empty for none).
    pub public_key_or_token: &'a [u8],
    /// `CorAssemblyFlags` of the reference (e.g. `afPublicKey` when
    /// `public_key_or_token` is a full key).
    pub flags: u32,
}

/// `ICorProfilerFunctionControl`, lent by the runtime to
/// [`Profiler::get_rejit_parameters`](crate::callback::Profiler::get_rejit_parameters)
/// for one ReJIT request: the runtime asks for the new IL of one method,
/// named by its module and `mdMethodDef` (corprof.idl: `GetReJITParameters`
/// is called once per method of a `RequestReJIT`, with the control for that
/// method's new version). The control knows that method
/// ([`module`](Self::module), [`method`](Self::method)), so what is
/// installed through it can be checked against it:
/// `WrappedBody::install_in_rejit` (crate `clrprof-instrumentation`)
/// refuses a body of another method ([`Error::WrongPartner`]).
pub struct FunctionControl {
    raw: sys::ICorProfilerFunctionControl,
    module: RawModuleId,
    method: MdMethodDef,
}

impl FunctionControl {
    /// Wraps the borrowed pointer the runtime passes (taking a reference of
    /// our own, released on drop), with the method the runtime passed it
    /// for.
    ///
    /// # Safety
    /// `ptr` is null or an `ICorProfilerFunctionControl*` valid for the
    /// call, and `module` and `method` are the module and method the
    /// runtime passed with it to the same `GetReJITParameters` call (the
    /// method whose new version the control sets).
    pub unsafe fn from_raw_borrowed(
        ptr: *mut c_void,
        module: RawModuleId,
        method: MdMethodDef,
    ) -> Option<Self> {
        // SAFETY: [caller-contract, com-ownership] guaranteed by the caller; `cloned` AddRefs.
        let unknown = unsafe { IUnknown::from_raw_borrowed(&ptr) }?;
        unknown.cast().ok().map(|raw| FunctionControl {
            raw,
            module,
            method,
        })
    }

    /// The module of the method this control sets the new version of (the
    /// ReJIT request's module), as a raw ID.
    pub fn module(&self) -> RawModuleId {
        self.module
    }

    // provenance: control-request
    /// The method this control sets the new version of (the ReJIT
    /// request's `mdMethodDef`).
    pub fn method(&self) -> MdMethodDef {
        self.method
    }

    /// The raw interface.
    pub fn raw(&self) -> &sys::ICorProfilerFunctionControl {
        &self.raw
    }

    /// `SetCodegenFlags`.
    pub fn set_codegen_flags(&self, flags: CodegenFlags) -> Result<()> {
        // SAFETY: [plain-call] plain value argument.
        check(
            unsafe { self.raw.SetCodegenFlags(flags.bits()) },
            "ICorProfilerFunctionControl::SetCodegenFlags",
        )
        .map(|_| ())
    }

    /// `ICorProfilerFunctionControl::SetILFunctionBody`: the new method
    /// header and IL of the method being re-JITted. The runtime copies
    /// `body.len()` bytes, so no special allocator is needed, but the JIT
    /// then reads the copy by its header without any bound: a header that
    /// announces more code or sections than `body` holds would make it read
    /// past the copy. So the header is checked against the buffer first
    /// ([`il_method_size`], the same check as
    /// [`ProfilerInfo::set_il_function_body`](crate::ProfilerInfo::set_il_function_body)),
    /// and a body that fails it is refused with [`Error::Malformed`]
    /// before the runtime sees it.
    ///
    /// # Safety
    /// The body is compiled and run as the method's code, and the JIT trusts
    /// it: IL can read and write any address (`ldc.i8 <address>; conv.i;
    /// ldind.i4`), call any native address (`calli`) or break the type
    /// system, and neither the runtime nor [`il::verify`](crate::il::verify())
    /// (which checks structure and stack depth, not types) stops it. The
    /// caller promises that `body` is IL the method may run: type-safe for
    /// the method's signature and locals, every token resolving in the
    /// method's module to a member of the kind its opcode expects, touching
    /// only memory and native code that managed code of the method may
    /// touch (an unmanaged call's target is a live function of the
    /// signature given, for as long as the code can run).
    ///
    /// Safe code changes methods through the method-wrapping layer (DESIGN.md
    /// decision 15: bodies of known shapes built and verified by the SDK);
    /// until it exists, installing IL is `unsafe`.
    pub unsafe fn set_il_function_body(&self, body: &[u8]) -> Result<()> {
        il_method_size(body)?;
        let len = u32::try_from(body.len())
            .map_err(|_| Error::InvalidArgument("IL body larger than 4 GiB"))?;
        // SAFETY: [caller-contract, il-header] `body` is `len` readable bytes for the call, which the
        // runtime copies (ProfilerFunctionControl::SetILFunctionBody); its
        // header was checked above to describe no more than those bytes, so
        // the JIT reads the copy within bounds; what the IL does when run is
        // the caller's promise (this function's `# Safety`).
        check(
            unsafe { self.raw.SetILFunctionBody(len, body.as_ptr()) },
            "ICorProfilerFunctionControl::SetILFunctionBody",
        )
        .map(|_| ())
    }

    /// `ICorProfilerFunctionControl::SetILInstrumentedCodeMap`: old-to-new IL
    /// offset map (the runtime copies it).
    pub fn set_il_instrumented_code_map(&self, map: &[IlMapEntry]) -> Result<()> {
        let raw: Vec<sys::COR_IL_MAP> = map.iter().copied().map(IlMapEntry::to_sys).collect();
        let len =
            u32::try_from(raw.len()).map_err(|_| Error::InvalidArgument("IL map too long"))?;
        // SAFETY: [local-memory] `raw` is `len` readable entries for the call.
        check(
            unsafe { self.raw.SetILInstrumentedCodeMap(len, raw.as_ptr()) },
            "ICorProfilerFunctionControl::SetILInstrumentedCodeMap",
        )
        .map(|_| ())
    }
}

/// `ICorProfilerAssemblyReferenceProvider`, lent by the runtime to
/// [`Profiler::get_assembly_references`](crate::callback::Profiler::get_assembly_references).
pub struct AssemblyReferenceProvider {
    raw: sys::ICorProfilerAssemblyReferenceProvider,
}

impl AssemblyReferenceProvider {
    /// Wraps the borrowed pointer the runtime passes.
    ///
    /// # Safety
    /// `ptr` is null or an `ICorProfilerAssemblyReferenceProvider*` valid for the call.
    pub unsafe fn from_raw_borrowed(ptr: *mut c_void) -> Option<Self> {
        // SAFETY: [caller-contract, com-ownership] guaranteed by the caller; `cast` AddRefs.
        let unknown = unsafe { IUnknown::from_raw_borrowed(&ptr) }?;
        unknown
            .cast()
            .ok()
            .map(|raw| AssemblyReferenceProvider { raw })
    }

    /// `AddAssemblyReference`: the runtime copies what it needs during the
    /// call.
    pub fn add_assembly_reference(&self, reference: &AssemblyReference<'_>) -> Result<()> {
        let name = crate::buffer::to_wide(reference.name);
        let mut culture = crate::buffer::to_wide(reference.culture);
        let too_long = |_| Error::InvalidArgument("assembly reference field too long");
        let mut metadata = sys::ASSEMBLYMETADATA {
            usMajorVersion: reference.version[0],
            usMinorVersion: reference.version[1],
            usBuildNumber: reference.version[2],
            usRevisionNumber: reference.version[3],
            szLocale: culture.as_mut_ptr(),
            cbLocale: u32::try_from(culture.len()).map_err(too_long)?,
            rProcessor: core::ptr::null_mut(),
            ulProcessor: 0,
            rOS: core::ptr::null_mut(),
            ulOS: 0,
        };
        let info = sys::COR_PRF_ASSEMBLY_REFERENCE_INFO {
            pbPublicKeyOrToken: reference.public_key_or_token.as_ptr() as *mut c_void,
            cbPublicKeyOrToken: u32::try_from(reference.public_key_or_token.len())
                .map_err(too_long)?,
            szName: name.as_ptr(),
            pMetaData: &mut metadata,
            pbHashValue: core::ptr::null_mut(),
            cbHashValue: 0,
            dwAssemblyRefFlags: reference.flags,
        };
        // SAFETY: [nul-terminated, local-memory] every pointer in `info` (the NUL-terminated name and
        // culture, the key bytes, `metadata`) points to memory that outlives
        // the call; corprof.idl: the runtime copies the reference during
        // AddAssemblyReference.
        check(
            unsafe { self.raw.AddAssemblyReference(&info) },
            "ICorProfilerAssemblyReferenceProvider::AddAssemblyReference",
        )
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use windows_core::implement;

    /// An `ICorProfilerFunctionControl` that records the bodies it is given.
    #[implement(sys::ICorProfilerFunctionControl)]
    struct Recorder {
        bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl sys::ICorProfilerFunctionControl_Impl for Recorder_Impl {
        unsafe fn SetCodegenFlags(&self, _flags: sys::DWORD) -> sys::HRESULT {
            sys::HRESULT(0)
        }
        unsafe fn SetILFunctionBody(&self, cb: sys::ULONG, body: sys::LPCBYTE) -> sys::HRESULT {
            // SAFETY: [test-fake] the SDK passes `cb` readable bytes.
            let bytes = unsafe { core::slice::from_raw_parts(body, cb as usize) }.to_vec();
            if let Ok(mut b) = self.bodies.lock() {
                b.push(bytes);
            }
            sys::HRESULT(0)
        }
        unsafe fn SetILInstrumentedCodeMap(
            &self,
            _n: sys::ULONG,
            _map: *const sys::COR_IL_MAP,
        ) -> sys::HRESULT {
            sys::HRESULT(0)
        }
    }

    fn control() -> (FunctionControl, Arc<Mutex<Vec<Vec<u8>>>>) {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let raw: sys::ICorProfilerFunctionControl = Recorder {
            bodies: bodies.clone(),
        }
        .into();
        (
            FunctionControl {
                raw,
                module: RawModuleId(0x1000),
                method: MdMethodDef(0x0600_0001),
            },
            bodies,
        )
    }

    #[test]
    fn a_body_whose_header_overruns_it_never_reaches_the_runtime() {
        let (control, bodies) = control();
        // A one-byte tiny header announcing 63 bytes of code.
        // SAFETY: [test-fake] refused before the runtime (here the recorder) sees it.
        let e = unsafe { control.set_il_function_body(&[(63 << 2) | 2]) }.unwrap_err();
        assert!(matches!(e, Error::Malformed(_)), "{e}");
        // A fat header whose code size runs past the buffer.
        let fat = [
            0x13, 0x30, 0x08, 0x00, 0x40, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0x2A,
        ];
        // SAFETY: [test-fake] as above.
        assert!(unsafe { control.set_il_function_body(&fat) }.is_err());
        assert!(bodies.lock().unwrap().is_empty());
        // `ldc.i4.2; ret`: passed on as is.
        // SAFETY: [test-fake] a type-safe body for a method returning int32.
        unsafe { control.set_il_function_body(&[0x0A, 0x18, 0x2A]) }.unwrap();
        assert_eq!(*bodies.lock().unwrap(), vec![vec![0x0A, 0x18, 0x2A]]);
    }
}
