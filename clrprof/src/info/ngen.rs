//! Inlining recorded in precompiled images (`ICorProfilerInfo6`).
//!
//! A ReJIT of a method does not reach the copies of it that the JIT or the
//! image compiler inlined into other methods. For code compiled at run time
//! a profiler learns about inlining from `JITInlining`; for precompiled
//! code it asks `EnumNgenModuleMethodsInliningThisMethod`, which reads the
//! inline tracking map an NGEN image (.NET Framework) or a ReadyToRun image
//! (CoreCLR, e.g. the framework's own assemblies) carries: asked about every
//! method of its own `System.Private.CoreLib`, .NET Core 3.1.23 answered
//! 37,616 inlinee–inliner pairs for 5,133 methods and .NET 8.0.4 45,071 for
//! 5,993. A module compiled by the JIT alone has no such map, and CoreCLR
//! answers `CORPROF_E_DATAINCOMPLETE` for it.

use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::enums::{method_enum, MethodEnum};
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// What `EnumNgenModuleMethodsInliningThisMethod` found.
pub struct NgenInliners {
    /// The methods of the inliners' module that inlined the method (raw
    /// IDs, as every enumeration).
    pub methods: MethodEnum,
    /// `true` when some inliners may be missing because a dependency of
    /// the image is not loaded yet; ask again after more modules load.
    pub incomplete: bool,
}

impl<'s> ProfilerInfo<'s> {
    // provenance: token-module
    /// `EnumNgenModuleMethodsInliningThisMethod` (Info6): the methods of
    /// the precompiled module `inliners` that inlined `inlinee` (a method
    /// of `inlinee_module`). Fails with `CORPROF_E_DATAINCOMPLETE` for a
    /// module without an inline tracking map (every module the JIT compiles)
    /// or while either module unloads. A method marked `[NonVersionable]`
    /// may be inlined without being recorded.
    pub fn enum_ngen_module_methods_inlining_this_method(
        &self,
        inliners: ModuleId<'_>,
        inlinee_module: ModuleId<'_>,
        inlinee: MdMethodDef,
    ) -> Result<NgenInliners> {
        const CALL: &str = "ICorProfilerInfo6::EnumNgenModuleMethodsInliningThisMethod";
        let i6 = self.raw_info6(CALL)?;
        let mut incomplete: sys::BOOL = 0;
        let mut e: Option<sys::ICorProfilerMethodEnum> = None;
        check(
            // SAFETY: [id-scope, com-ownership, plain-call] both modules are valid (typed IDs); the token is only
            // looked up; out pointers are locals (`e` receives an owned
            // reference).
            unsafe {
                i6.EnumNgenModuleMethodsInliningThisMethod(
                    inliners.as_sys(),
                    inlinee_module.as_sys(),
                    inlinee.0,
                    &mut incomplete,
                    &mut e,
                )
            },
            CALL,
        )?;
        let e = e.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            CALL,
        ))?;
        Ok(NgenInliners {
            methods: method_enum(e),
            incomplete: incomplete != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeModule, FakeRuntime};

    #[test]
    fn inliners_of_a_precompiled_module_and_the_jit_only_error() {
        let fake = FakeRuntime::with_info_version(6);
        {
            let mut st = fake.state();
            st.modules.insert(0x2000, FakeModule::default());
            st.modules.insert(
                0x3000,
                FakeModule {
                    inliners: Some(vec![(
                        (0x2000, 0x0600_0007),
                        vec![(0x3000, 0x0600_0010), (0x3000, 0x0600_0011)],
                        true,
                    )]),
                    ..Default::default()
                },
            );
        }
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; jit = module_id(0x2000), r2r = module_id(0x3000));
        let found = info
            .enum_ngen_module_methods_inlining_this_method(r2r, jit, MdMethodDef(0x0600_0007))
            .unwrap();
        assert!(found.incomplete);
        let methods: Vec<_> = found.methods.map(|m| m.unwrap().method).collect();
        assert_eq!(
            methods,
            vec![MdMethodDef(0x0600_0010), MdMethodDef(0x0600_0011)]
        );
        let none = info
            .enum_ngen_module_methods_inlining_this_method(r2r, jit, MdMethodDef(0x0600_0008))
            .unwrap();
        assert_eq!(none.methods.count(), 0);
        let e = info
            .enum_ngen_module_methods_inlining_this_method(jit, r2r, MdMethodDef(0x0600_0010))
            .err()
            .unwrap();
        assert!(e.is_data_incomplete(), "{e}");
        assert_eq!(fake.live_enumerators(), 0);
    }
}
