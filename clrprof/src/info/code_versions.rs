//! Code versions: a method's native code per ReJIT version and per tier
//! (`ICorProfilerInfo4`, `ICorProfilerInfo8`, `ICorProfilerInfo9`).
//!
//! A method has one IL version per ReJIT (ReJIT ID 0 is the original IL),
//! and each IL version may have several native code versions: with tiered
//! compilation (on by default since .NET Core 3.0) the runtime first jits a
//! quick tier-0 body, and replaces it with an optimized tier-1 body once
//! the method has been called often enough (30 calls, then a delay of
//! 100 ms without new tier-0 activity, by default); .NET 8 puts an
//! instrumented tier-0 body in between (dynamic PGO), so a method that tiers
//! up has two native code versions on .NET Core 3.1 and three on .NET 8
//! (seen by the `info code versions` scenario). Every body stays in memory:
//! a thread may still run an old one. The Info1–3 methods
//! (`GetCodeInfo2`, `GetILToNativeMapping`) and their ReJIT-aware forms
//! (`GetCodeInfo3`, `GetILToNativeMapping2`) describe the *first* native
//! version of an IL version only. `GetNativeCodeStartAddresses` (Info9)
//! lists every one, as [`NativeCode`] values, and `GetCodeInfo4` /
//! `GetILToNativeMapping3` describe each.
//!
//! IP lookups name the function and the ReJIT version of any native code
//! version: `GetFunctionFromIP2` (Info4) for methods with metadata,
//! `GetFunctionFromIP3` (Info8) for dynamic methods too.
//!
//! ReJIT IDs are taken and returned raw ([`RawReJitId`]): the runtime only
//! looks them up among the method's IL versions (an ID the method does not
//! have means its original IL), it never follows them as pointers.

use crate::buffer::fill;
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::enums::{function_enum, FunctionEnum};
use crate::info::functions::{CodeChunk, IlOffset, IlToNativeMapEntry};
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;
use core::marker::PhantomData;

/// One native code version of a function: the start address
/// `GetNativeCodeStartAddresses` reported, tied to the function's lifetime.
///
/// The runtime keeps every native code version of a method until the
/// method's code is freed, which happens only with the method itself (its
/// collectible assembly unloading, or a dynamic method being collected):
/// so the address stays a code version's start for as long as the
/// [`FunctionId<'a>`] it came from is valid, and only then may it be handed
/// to [`code_info4`](ProfilerInfo::code_info4) or
/// [`il_to_native_mapping3`](ProfilerInfo::il_to_native_mapping3). Made only
/// by [`ProfilerInfo::native_code_versions`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NativeCode<'a> {
    start: usize,
    _function: PhantomData<&'a ()>,
}

impl NativeCode<'_> {
    /// The first byte of this version's code.
    pub fn start(&self) -> usize {
        self.start
    }
}

impl core::fmt::Debug for NativeCode<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "NativeCode({:#x})", self.start)
    }
}

fn code_chunks(raw: Vec<sys::COR_PRF_CODE_INFO>) -> Vec<CodeChunk> {
    raw.into_iter()
        .map(|c| CodeChunk {
            start: c.startAddress,
            size: c.size,
        })
        .collect()
}

fn map_entries(raw: Vec<sys::COR_DEBUG_IL_TO_NATIVE_MAP>) -> Vec<IlToNativeMapEntry> {
    raw.into_iter()
        .map(|m| IlToNativeMapEntry {
            il: IlOffset::from_sys(m.ilOffset),
            native_start: m.nativeStartOffset,
            native_end: m.nativeEndOffset,
        })
        .collect()
}

impl RuntimeHandle {
    /// `GetFunctionFromIP2` (Info4): the function whose native code contains
    /// `ip`, and the ReJIT version that code belongs to (0: the original IL).
    ///
    /// Like `GetFunctionFromIP`, this fails (`E_FAIL`) for addresses outside
    /// managed code and for dynamic methods (LCG, IL stubs); use
    /// [`function_from_ip3`](Self::function_from_ip3) for those. Every
    /// native code version resolves, whichever tier it is. Callable from
    /// callbacks and from the profiler's own threads (the runtime refuses it
    /// with `CORPROF_E_UNSUPPORTED_CALL_SEQUENCE` from a callback in which
    /// it may not trigger a garbage collection). The IDs are raw: nothing
    /// about an instruction pointer proves how long its code stays loaded.
    pub fn function_from_ip2(&self, ip: usize) -> Result<(RawFunctionId, RawReJitId)> {
        self.call_live("ICorProfilerInfo4::GetFunctionFromIP2", || {
            const CALL: &str = "ICorProfilerInfo4::GetFunctionFromIP2";
            let i4 = self.raw_info4(CALL)?;
            let (mut f, mut r) = (0usize, 0usize);
            check(
                // SAFETY: [info-alive, plain-call] the runtime only looks `ip` up in its code maps, never
                // dereferences it (GetFunctionFromIPInternal); valid out pointers.
                unsafe { i4.GetFunctionFromIP2(ip as sys::LPCBYTE, &mut f, &mut r) },
                CALL,
            )?;
            Ok((RawFunctionId(f), RawReJitId(r)))
        })
    }

    /// `GetFunctionFromIP3` (Info8): like
    /// [`function_from_ip2`](Self::function_from_ip2), and it also finds
    /// dynamic methods (`DynamicMethod`, compiled expression trees, IL
    /// stubs), whose names come from
    /// [`dynamic_function_info`](ProfilerInfo::dynamic_function_info).
    pub fn function_from_ip3(&self, ip: usize) -> Result<(RawFunctionId, RawReJitId)> {
        self.call_live("ICorProfilerInfo8::GetFunctionFromIP3", || {
            const CALL: &str = "ICorProfilerInfo8::GetFunctionFromIP3";
            let i8 = self.raw_info8(CALL)?;
            let (mut f, mut r) = (0usize, 0usize);
            check(
                // SAFETY: [info-alive, plain-call] as for GetFunctionFromIP2: a look-up in the runtime's
                // code maps; valid out pointers.
                unsafe { i8.GetFunctionFromIP3(ip as sys::LPCBYTE, &mut f, &mut r) },
                CALL,
            )?;
            Ok((RawFunctionId(f), RawReJitId(r)))
        })
    }

    /// `EnumJITedFunctions2` (Info4): the functions jitted so far with the
    /// ReJIT version of each (a snapshot taken by this call). A function is
    /// listed once per native code body: a method that tiered up appears
    /// once per tier (twice on .NET Core 3.1, three times on .NET 8 with its
    /// instrumented tier). The IDs are raw, as for
    /// [`enum_jited_functions`](Self::enum_jited_functions).
    ///
    /// # Safety
    /// No collectible assembly may unload while the call runs. To find each
    /// function's ReJIT ID the runtime takes a lock that may switch the
    /// calling thread to preemptive mode in the middle of its walk of the
    /// code heaps, and a collectible context's code heap can be freed
    /// meanwhile: the torture profiler (tests/fixtures/torture) crashed
    /// .NET 8.0.4 inside this call, made from a plain thread while the
    /// collectible-code app unloaded contexts (SIGSEGV in libcoreclr, about
    /// one run in two). A program without collectible assemblies, or a
    /// caller that blocks unloads (e.g. from inside a callback of a GC the
    /// unloads wait for), meets this. On .NET 10 and later even the walk
    /// without ReJIT IDs is unsafe beside unloads (see
    /// [`enum_jited_functions`](Self::enum_jited_functions), which refuses
    /// there unless the scope keeps the runtime from suspending).
    pub unsafe fn enum_jited_functions2(&self) -> Result<FunctionEnum> {
        self.call_live("ICorProfilerInfo4::EnumJITedFunctions2", || {
            const CALL: &str = "ICorProfilerInfo4::EnumJITedFunctions2";
            let i4 = self.raw_info4(CALL)?;
            let mut e: Option<sys::ICorProfilerFunctionEnum> = None;
            check(
                // SAFETY: [info-alive, com-ownership] `e` receives an owned reference.
                unsafe { i4.EnumJITedFunctions2(&mut e) },
                CALL,
            )?;
            let e = e.ok_or(Error::runtime(
                sys::HRESULT(KnownHresult::E_POINTER as i32),
                CALL,
            ))?;
            Ok(function_enum(e))
        })
    }
}

impl<'s> ProfilerInfo<'s> {
    // provenance: rejit-version-function
    /// `GetCodeInfo3` (Info4): the code chunks of the first native code
    /// version of `function`'s IL version `rejit` (0: the original IL).
    /// With tiered compilation that is usually the tier-0 body; see
    /// [`native_code_versions`](Self::native_code_versions) for every one.
    pub fn code_info3(
        &self,
        function: FunctionId<'_>,
        rejit: RawReJitId,
    ) -> Result<Vec<CodeChunk>> {
        const CALL: &str = "ICorProfilerInfo4::GetCodeInfo3";
        let i4 = self.raw_info4(CALL)?;
        let mut raw: Vec<sys::COR_PRF_CODE_INFO> = Vec::new();
        fill::<sys::COR_PRF_CODE_INFO, 2>(CALL, &mut raw, |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol] `function` is valid (typed ID); the ReJIT ID is only
            // looked up; `buf` has `cap` slots.
            unsafe { i4.GetCodeInfo3(function.as_sys(), rejit.0, cap, needed, buf) }
        })?;
        Ok(code_chunks(raw))
    }

    // provenance: rejit-version-function
    /// `GetILToNativeMapping2` (Info4): the IL-to-native map of the first
    /// native code version of `function`'s IL version `rejit`.
    ///
    /// On .NET Core 3.1 the runtime ignores `rejit` and answers for the
    /// original IL: its implementation never stores the IL version it looks
    /// up (`proftoeeinterfaceimpl.cpp` of tag v3.1.23).
    pub fn il_to_native_mapping2(
        &self,
        function: FunctionId<'_>,
        rejit: RawReJitId,
    ) -> Result<Vec<IlToNativeMapEntry>> {
        const CALL: &str = "ICorProfilerInfo4::GetILToNativeMapping2";
        let i4 = self.raw_info4(CALL)?;
        let mut raw: Vec<sys::COR_DEBUG_IL_TO_NATIVE_MAP> = Vec::new();
        fill::<sys::COR_DEBUG_IL_TO_NATIVE_MAP, 32>(CALL, &mut raw, |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol] `function` is valid; `buf` has `cap` slots.
            unsafe { i4.GetILToNativeMapping2(function.as_sys(), rejit.0, cap, needed, buf) }
        })?;
        Ok(map_entries(raw))
    }

    // provenance: rejit-version-function
    /// `GetNativeCodeStartAddresses` (Info9): every native code version of
    /// `function`'s IL version `rejit` that has code, in the order the
    /// runtime keeps them (the first one first; a method that tiered up
    /// has its tier-0 and its tier-1 body). A version the runtime has
    /// created but not compiled yet (a tier-1 body being jitted) has no
    /// start address and is left out.
    pub fn native_code_versions<'a>(
        &self,
        function: FunctionId<'a>,
        rejit: RawReJitId,
    ) -> Result<Vec<NativeCode<'a>>> {
        const CALL: &str = "ICorProfilerInfo9::GetNativeCodeStartAddresses";
        let i9 = self.raw_info9(CALL)?;
        let mut starts: Vec<usize> = Vec::new();
        fill::<usize, 8>(CALL, &mut starts, |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol] `function` is valid; `buf` has `cap` slots.
            unsafe { i9.GetNativeCodeStartAddresses(function.as_sys(), rejit.0, cap, needed, buf) }
        })?;
        Ok(starts
            .into_iter()
            .filter(|&s| s != 0)
            .map(|start| NativeCode {
                start,
                _function: PhantomData,
            })
            .collect())
    }

    /// `GetCodeInfo4` (Info9): the code chunks of one native code version.
    pub fn code_info4(&self, code: NativeCode<'_>) -> Result<Vec<CodeChunk>> {
        const CALL: &str = "ICorProfilerInfo9::GetCodeInfo4";
        let i9 = self.raw_info9(CALL)?;
        let mut raw: Vec<sys::COR_PRF_CODE_INFO> = Vec::new();
        fill::<sys::COR_PRF_CODE_INFO, 2>(CALL, &mut raw, |cap, needed, buf| {
            // SAFETY: [module-lifetime, buffer-protocol] `code` is the start of a native code version of a
            // function that is still valid (NativeCode's lifetime); the
            // runtime looks it up in its code maps; `buf` has `cap` slots.
            unsafe { i9.GetCodeInfo4(code.start, cap, needed, buf) }
        })?;
        Ok(code_chunks(raw))
    }

    /// `GetILToNativeMapping3` (Info9): the IL-to-native map of one native
    /// code version. Fails with `CORPROF_E_DEBUGGING_DISABLED` when the
    /// runtime has no debugger support.
    pub fn il_to_native_mapping3(&self, code: NativeCode<'_>) -> Result<Vec<IlToNativeMapEntry>> {
        const CALL: &str = "ICorProfilerInfo9::GetILToNativeMapping3";
        let i9 = self.raw_info9(CALL)?;
        let mut raw: Vec<sys::COR_DEBUG_IL_TO_NATIVE_MAP> = Vec::new();
        fill::<sys::COR_DEBUG_IL_TO_NATIVE_MAP, 32>(CALL, &mut raw, |cap, needed, buf| {
            // SAFETY: [module-lifetime, buffer-protocol] `code` is a live native code version's start (as for
            // GetCodeInfo4); `buf` has `cap` slots.
            unsafe { i9.GetILToNativeMapping3(code.start, cap, needed, buf) }
        })?;
        Ok(map_entries(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeCodeVersion, FakeDynamic, FakeFunction, FakeRuntime};

    const F: usize = 0x1000;
    const D: usize = 0x1800;

    /// A function with a tier-0 body (0x7000, hot and cold), a tier-1 body
    /// (0xA000) and a ReJIT version 5 (0xC000); a dynamic method at 0xE000.
    fn world(version: u8) -> FakeRuntime {
        let fake = FakeRuntime::with_info_version(version);
        {
            let mut st = fake.state();
            st.functions.insert(
                F,
                FakeFunction {
                    module: 0x2000,
                    token: 0x0600_0001,
                    code: vec![(0x7000, 0x40), (0x9000, 0x10)],
                    il_map: vec![(0, 0, 0x10), (4, 0x10, 0x40)],
                    versions: vec![
                        FakeCodeVersion {
                            rejit_id: 0,
                            code: vec![(0xA000, 0x20)],
                            il_map: vec![(0, 0, 0x8), (4, 0x8, 0x20)],
                        },
                        FakeCodeVersion {
                            rejit_id: 5,
                            code: vec![(0xC000, 0x30)],
                            il_map: vec![(0, 0, 0x30)],
                        },
                    ],
                    ..Default::default()
                },
            );
            st.functions.insert(
                D,
                FakeFunction {
                    module: 0x2000,
                    code: vec![(0xE000, 0x10)],
                    dynamic: Some(FakeDynamic {
                        name: "Lcg".into(),
                        signature: std::sync::Arc::from(&[0u8, 0, 1][..]),
                    }),
                    ..Default::default()
                },
            );
        }
        fake
    }

    #[test]
    fn every_native_version_with_its_own_chunks_and_map() {
        let fake = world(9);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        let versions = info.native_code_versions(f, RawReJitId(0)).unwrap();
        assert_eq!(
            versions.iter().map(|v| v.start()).collect::<Vec<_>>(),
            vec![0x7000, 0xA000]
        );
        assert_eq!(
            info.code_info4(versions[0]).unwrap(),
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
        assert_eq!(
            info.code_info4(versions[1]).unwrap(),
            vec![CodeChunk {
                start: 0xA000,
                size: 0x20
            }]
        );
        let tier0 = info.il_to_native_mapping3(versions[0]).unwrap();
        let tier1 = info.il_to_native_mapping3(versions[1]).unwrap();
        assert_eq!(tier0[1].native_start, 0x10);
        assert_eq!(tier1[1].native_start, 0x8);
        assert_eq!(tier1[1].il, IlOffset::Offset(4));
        let rejit = info.native_code_versions(f, RawReJitId(5)).unwrap();
        assert_eq!(rejit.len(), 1);
        assert_eq!(rejit[0].start(), 0xC000);
        assert_eq!(
            fake.calls_of("GetNativeCodeStartAddresses")[0].args,
            vec![F, 0, 8]
        );
    }

    #[test]
    fn many_versions_take_a_second_call() {
        let fake = world(9);
        fake.state().functions.get_mut(&F).unwrap().versions = (1..12)
            .map(|i| FakeCodeVersion {
                rejit_id: 0,
                code: vec![(0x10_0000 + i * 0x100, 0x10)],
                il_map: Vec::new(),
            })
            .collect();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        assert_eq!(
            info.native_code_versions(f, RawReJitId(0)).unwrap().len(),
            12
        );
        assert_eq!(fake.call_count("GetNativeCodeStartAddresses"), 2);
    }

    #[test]
    fn rejit_aware_first_version_answers() {
        let fake = world(9);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        assert_eq!(info.code_info3(f, RawReJitId(0)).unwrap()[0].start, 0x7000);
        assert_eq!(info.code_info3(f, RawReJitId(5)).unwrap()[0].start, 0xC000);
        assert_eq!(
            info.il_to_native_mapping2(f, RawReJitId(5)).unwrap(),
            vec![IlToNativeMapEntry {
                il: IlOffset::Offset(0),
                native_start: 0,
                native_end: 0x30
            }]
        );
        let e = info.code_info3(f, RawReJitId(9)).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_FUNCTION_NOT_COMPILED"));
    }

    #[test]
    fn ip_lookups_resolve_every_version_and_dynamic_methods_only_with_ip3() {
        let fake = world(9);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert_eq!(
            info.function_from_ip2(0x7008).unwrap(),
            (RawFunctionId(F), RawReJitId(0))
        );
        assert_eq!(
            info.function_from_ip2(0xA01F).unwrap(),
            (RawFunctionId(F), RawReJitId(0))
        );
        assert_eq!(
            info.function_from_ip2(0xC000).unwrap(),
            (RawFunctionId(F), RawReJitId(5))
        );
        assert!(info.function_from_ip2(0xE004).is_err());
        assert!(info.function_from_ip(0xE004).is_err());
        assert_eq!(
            info.function_from_ip3(0xE004).unwrap(),
            (RawFunctionId(D), RawReJitId(0))
        );
        assert_eq!(info.function_from_ip(0xA004).unwrap(), RawFunctionId(F));
    }

    #[test]
    fn jited_functions_with_their_rejit_ids() {
        let fake = world(9);
        fake.state().jitted = vec![
            sys::COR_PRF_FUNCTION {
                functionId: F,
                reJitId: 0,
            },
            sys::COR_PRF_FUNCTION {
                functionId: F,
                reJitId: 5,
            },
        ];
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        // SAFETY: [test-fake] the fake unloads nothing.
        let all: Vec<_> = unsafe { info.enum_jited_functions2() }
            .unwrap()
            .collect::<Result<Vec<_>>>()
            .unwrap();
        assert_eq!(all[1].rejit_id, RawReJitId(5));
        assert_eq!(fake.live_enumerators(), 0);
    }

    #[test]
    fn older_runtimes_answer_unsupported_with_the_interface_named() {
        let fake = world(8);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        assert_eq!(
            info.native_code_versions(f, RawReJitId(0)).unwrap_err(),
            Error::Unsupported {
                needs: 9,
                has: 8,
                call: "ICorProfilerInfo9::GetNativeCodeStartAddresses"
            }
        );
        assert!(info.function_from_ip3(0xE004).is_ok());
        let fake = world(3);
        // SAFETY: [test-fake] as above.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(F));
        assert!(matches!(
            info.code_info3(f, RawReJitId(0)),
            Err(Error::Unsupported {
                needs: 4,
                has: 3,
                ..
            })
        ));
        assert!(matches!(
            info.function_from_ip3(0),
            Err(Error::Unsupported { needs: 8, .. })
        ));
        assert!(matches!(
            // SAFETY: [test-fake] the fake unloads nothing.
            unsafe { info.enum_jited_functions2() },
            Err(Error::Unsupported { needs: 4, .. })
        ));
    }
}
