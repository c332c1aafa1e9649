//! App domains, assemblies and modules (`ICorProfilerInfo`,
//! `ICorProfilerInfo3`).

use crate::buffer::{fill, fill_string};
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::enums::{module_enum, ModuleEnum};
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;

/// `GetAppDomainInfo`: an app domain's name and process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AppDomainInfo {
    /// Its friendly name (on CoreCLR, the app's name; the system domain
    /// reports the base library's name).
    pub name: String,
    /// ID of the process it runs in.
    pub process_id: usize,
}

/// `GetAssemblyInfo`: an assembly's name, app domain and manifest module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssemblyInfo<'a> {
    /// Its simple name (e.g. `System.Private.CoreLib`).
    pub name: String,
    /// The app domain it is loaded in.
    pub app_domain: AppDomainId<'a>,
    /// The module holding its manifest.
    pub module: ModuleId<'a>,
}

bitflags::bitflags! {
    /// `COR_PRF_MODULE_FLAGS` of `GetModuleInfo2`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct ModuleFlags: u32 {
        /// `COR_PRF_MODULE_DISK`: loaded from a file.
        const DISK = sys::COR_PRF_MODULE_DISK;
        /// `COR_PRF_MODULE_NGEN`: has precompiled code (NGen or ReadyToRun).
        const NGEN = sys::COR_PRF_MODULE_NGEN;
        /// `COR_PRF_MODULE_DYNAMIC`: created with Reflection.Emit.
        const DYNAMIC = sys::COR_PRF_MODULE_DYNAMIC;
        /// `COR_PRF_MODULE_COLLECTIBLE`: in a collectible assembly.
        const COLLECTIBLE = sys::COR_PRF_MODULE_COLLECTIBLE;
        /// `COR_PRF_MODULE_RESOURCE`: a resource-only module.
        const RESOURCE = sys::COR_PRF_MODULE_RESOURCE;
        /// `COR_PRF_MODULE_FLAT_LAYOUT`: mapped flat, not as an image.
        const FLAT_LAYOUT = sys::COR_PRF_MODULE_FLAT_LAYOUT;
        /// `COR_PRF_MODULE_WINDOWS_RUNTIME`: a Windows Runtime module.
        const WINDOWS_RUNTIME = sys::COR_PRF_MODULE_WINDOWS_RUNTIME;
    }
}

/// `GetModuleInfo2`: a module's file, load address, assembly and flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo2<'a> {
    /// Base load address (0 for dynamic modules).
    pub base_load_address: usize,
    /// File name (path) of the module; for modules without a file, the
    /// module's metadata name.
    pub name: String,
    /// The assembly it belongs to.
    pub assembly: AssemblyId<'a>,
    /// What kind of module it is.
    pub flags: ModuleFlags,
}

impl<'s> ProfilerInfo<'s> {
    /// `GetAppDomainInfo`: name and process of an app domain.
    pub fn app_domain_info(&self, app_domain: AppDomainId<'_>) -> Result<AppDomainInfo> {
        let mut pid = 0usize;
        let i1 = self.raw_info1()?;
        let name = fill_string("ICorProfilerInfo::GetAppDomainInfo", |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol] `app_domain` is valid (typed ID); `buf` has `cap` WCHARs.
            unsafe { i1.GetAppDomainInfo(app_domain.as_sys(), cap, needed, buf, &mut pid) }
        })?;
        Ok(AppDomainInfo {
            name,
            process_id: pid,
        })
    }

    /// `GetAssemblyInfo`: name, app domain and manifest module of an
    /// assembly. Before the assembly is fully loaded the runtime answers
    /// `CORPROF_E_DATAINCOMPLETE`.
    pub fn assembly_info<'a>(&self, assembly: AssemblyId<'a>) -> Result<AssemblyInfo<'a>> {
        let (mut ad, mut module) = (0usize, 0usize);
        let i1 = self.raw_info1()?;
        let name = fill_string("ICorProfilerInfo::GetAssemblyInfo", |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol] `assembly` is valid (typed ID); `buf` has `cap` WCHARs.
            unsafe { i1.GetAssemblyInfo(assembly.as_sys(), cap, needed, buf, &mut ad, &mut module) }
        })?;
        // SAFETY: [id-derived] an assembly's app domain and manifest module live as long as it does.
        Ok(unsafe {
            AssemblyInfo {
                name,
                app_domain: AppDomainId::from_sys(ad),
                module: ModuleId::from_sys(module),
            }
        })
    }

    /// `GetModuleInfo2` (Info3): like [`module_info`](Self::module_info),
    /// plus the module's [`ModuleFlags`]. Before `ModuleLoadFinished` the
    /// runtime answers `CORPROF_E_DATAINCOMPLETE`.
    pub fn module_info2<'a>(&self, module: ModuleId<'a>) -> Result<ModuleInfo2<'a>> {
        let i3 = self.raw_info3("ICorProfilerInfo3::GetModuleInfo2")?;
        let (mut base, mut assembly, mut flags) = (core::ptr::null::<u8>(), 0usize, 0u32);
        let name = fill_string("ICorProfilerInfo3::GetModuleInfo2", |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol, plain-call] `module` is valid; `buf` has `cap` WCHARs; other out pointers are locals.
            unsafe {
                i3.GetModuleInfo2(
                    module.as_sys(),
                    &mut base,
                    cap,
                    needed,
                    buf,
                    &mut assembly,
                    &mut flags,
                )
            }
        })?;
        Ok(ModuleInfo2 {
            base_load_address: base as usize,
            name,
            // SAFETY: [id-derived] the assembly of a loaded module lives as long as the module.
            assembly: unsafe { AssemblyId::from_sys(assembly) },
            flags: ModuleFlags::from_bits_retain(flags),
        })
    }

    /// `GetModuleInfo` asking for the file name alone: the path of the
    /// module's file (for a module without one, its metadata name), without
    /// the load address and assembly, which the runtime answers with
    /// `CORPROF_E_DATAINCOMPLETE` until a load has finished. (The SDK hands
    /// out a typed `ModuleId` only from `ModuleLoadFinished` on, where the
    /// runtime documents the ID valid for information requests.)
    pub fn module_file_name(&self, module: ModuleId<'_>) -> Result<String> {
        let i1 = self.raw_info1()?;
        fill_string("ICorProfilerInfo::GetModuleInfo", |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol, plain-call] `module` is valid (typed ID); `buf` has `cap` WCHARs;
            // the load address and assembly are not asked for (null out
            // pointers, which the runtime skips).
            unsafe {
                i1.GetModuleInfo(
                    module.as_sys(),
                    core::ptr::null_mut(),
                    cap,
                    needed,
                    buf,
                    core::ptr::null_mut(),
                )
            }
        })
    }

    /// `GetAppDomainsContainingModule` (Info3): the app domains the module is
    /// loaded in (one on CoreCLR).
    pub fn app_domains_containing_module<'a>(
        &self,
        module: ModuleId<'a>,
    ) -> Result<Vec<AppDomainId<'a>>> {
        let i3 = self.raw_info3("ICorProfilerInfo3::GetAppDomainsContainingModule")?;
        let mut ids: Vec<usize> = Vec::new();
        fill::<usize, 4>(
            "ICorProfilerInfo3::GetAppDomainsContainingModule",
            &mut ids,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol] `module` is valid; `buf` has `cap` slots.
                unsafe { i3.GetAppDomainsContainingModule(module.as_sys(), cap, needed, buf) }
            },
        )?;
        Ok(ids
            .into_iter()
            // SAFETY: [id-derived] an app domain containing a loaded module outlives it.
            .map(|a| unsafe { AppDomainId::from_sys(a) })
            .collect())
    }
}

impl RuntimeHandle {
    /// `EnumModules` (Info3): every module loaded now (a snapshot taken by
    /// this call), e.g. for a profiler loaded by attach to catch up.
    ///
    /// The IDs are raw: another thread may unload a module (a collectible
    /// assembly) while the caller iterates. [`crate::attach::CatchUp`]
    /// delivers them as typed IDs where that cannot happen.
    pub fn enum_modules(&self) -> Result<ModuleEnum> {
        self.call_live("ICorProfilerInfo3::EnumModules", || {
            let i3 = self.raw_info3("ICorProfilerInfo3::EnumModules")?;
            let mut e: Option<sys::ICorProfilerModuleEnum> = None;
            check(
                // SAFETY: [info-alive, com-ownership] `e` receives an owned reference.
                unsafe { i3.EnumModules(&mut e) },
                "ICorProfilerInfo3::EnumModules",
            )?;
            let e = e.ok_or(Error::runtime(
                sys::HRESULT(KnownHresult::E_POINTER as i32),
                "ICorProfilerInfo3::EnumModules",
            ))?;
            Ok(module_enum(e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{
        fake_ids, FakeAppDomain, FakeAssembly, FakeModule, FakeRuntime, FakeState,
    };

    const M: usize = 0x2000;
    const M2: usize = 0x2100;
    const A: usize = 0x5000;
    const AD: usize = 0x4000;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            st.modules.insert(
                M,
                FakeModule {
                    name: "/app/app.dll".into(),
                    base: 0x7f00_0000,
                    assembly: A,
                    flags: sys::COR_PRF_MODULE_DISK | sys::COR_PRF_MODULE_NGEN,
                    app_domains: vec![AD],
                    ..Default::default()
                },
            );
            st.modules.insert(
                M2,
                FakeModule {
                    name: "dyn".into(),
                    assembly: A,
                    flags: sys::COR_PRF_MODULE_DYNAMIC,
                    ..Default::default()
                },
            );
            st.assemblies.insert(
                A,
                FakeAssembly {
                    name: "app".into(),
                    app_domain: AD,
                    module: M,
                },
            );
            st.app_domains.insert(
                AD,
                FakeAppDomain {
                    name: "clrhost".into(),
                    process_id: 1234,
                },
            );
        }
        fake
    }

    /// Makes the answer of `method` longer on its `grow_on`-th call.
    fn grow_on(
        fake: &FakeRuntime,
        method: &'static str,
        grow_on: usize,
        grow: impl Fn(&mut FakeState) + Send + 'static,
    ) {
        let mut n = 0;
        fake.on_call(move |st, m| {
            if m == method {
                n += 1;
                if n == grow_on {
                    grow(st);
                }
            }
        });
    }

    #[test]
    fn app_domain_info_reads_name_and_process() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; ad = app_domain_id(AD));
        assert_eq!(
            info.app_domain_info(ad).unwrap(),
            AppDomainInfo {
                name: "clrhost".into(),
                process_id: 1234
            }
        );
        assert_eq!(fake.call_count("GetAppDomainInfo"), 1);
    }

    #[test]
    fn app_domain_name_that_grows_between_calls_is_read_whole() {
        let fake = world();
        let long = "d".repeat(300);
        fake.state().app_domains.get_mut(&AD).unwrap().name = long.clone();
        grow_on(&fake, "GetAppDomainInfo", 2, |st| {
            st.app_domains.get_mut(&AD).unwrap().name.push_str("-grown")
        });
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; ad = app_domain_id(AD));
        assert_eq!(
            info.app_domain_info(ad).unwrap().name,
            format!("{long}-grown")
        );
        assert_eq!(fake.call_count("GetAppDomainInfo"), 3);
    }

    #[test]
    fn assembly_info_and_growth() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; a = assembly_id(A));
        let ai = info.assembly_info(a).unwrap();
        assert_eq!(
            (ai.name.as_str(), ai.app_domain.as_sys(), ai.module.as_sys()),
            ("app", AD, M)
        );

        let long = "N".repeat(257);
        fake.state().assemblies.get_mut(&A).unwrap().name = long.clone();
        grow_on(&fake, "GetAssemblyInfo", 2, |st| {
            st.assemblies.get_mut(&A).unwrap().name.push('x')
        });
        assert_eq!(info.assembly_info(a).unwrap().name, format!("{long}x"));
        // 1 (first test) + 3: stack buffer, exact size, grown size.
        assert_eq!(fake.call_count("GetAssemblyInfo"), 4);
        fake.fail(
            "GetAssemblyInfo",
            sys::HRESULT(KnownHresult::CORPROF_E_DATAINCOMPLETE as i32),
        );
        assert!(info.assembly_info(a).unwrap_err().is_data_incomplete());
    }

    #[test]
    fn module_file_name_asks_for_the_name_alone() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        assert_eq!(info.module_file_name(m).unwrap(), "/app/app.dll");
        let long = format!("/{}/app.dll", "q".repeat(300));
        fake.state().modules.get_mut(&M).unwrap().name = long.clone();
        assert_eq!(info.module_file_name(m).unwrap(), long);
        assert!(fake.call_count("GetModuleInfo") >= 3);
    }

    #[test]
    fn module_info2_reads_flags_and_long_names() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M), m2 = module_id(M2));
        let mi = info.module_info2(m).unwrap();
        assert_eq!(mi.name, "/app/app.dll");
        assert_eq!(mi.base_load_address, 0x7f00_0000);
        assert_eq!(mi.assembly.as_sys(), A);
        assert_eq!(mi.flags, ModuleFlags::DISK | ModuleFlags::NGEN);
        assert_eq!(info.module_info2(m2).unwrap().flags, ModuleFlags::DYNAMIC);

        // A path longer than the stack buffer, growing once more in between:
        // the fake answers ERROR_INSUFFICIENT_BUFFER like the runtime.
        let long = format!("/{}/app.dll", "p".repeat(400));
        fake.state().modules.get_mut(&M).unwrap().name = long.clone();
        grow_on(&fake, "GetModuleInfo2", 2, |st| {
            st.modules.get_mut(&M).unwrap().name.insert_str(0, "/mnt")
        });
        let before = fake.call_count("GetModuleInfo2");
        assert_eq!(info.module_info2(m).unwrap().name, format!("/mnt{long}"));
        assert_eq!(fake.call_count("GetModuleInfo2") - before, 3);
    }

    #[test]
    fn app_domains_containing_module_and_growth() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(M));
        let ads = info.app_domains_containing_module(m).unwrap();
        assert_eq!(ads.iter().map(|a| a.as_sys()).collect::<Vec<_>>(), vec![AD]);

        fake.state().modules.get_mut(&M).unwrap().app_domains = (0..6).map(|i| AD + i).collect();
        grow_on(&fake, "GetAppDomainsContainingModule", 2, |st| {
            st.modules.get_mut(&M).unwrap().app_domains.push(AD + 100)
        });
        let ads = info.app_domains_containing_module(m).unwrap();
        assert_eq!(ads.len(), 7);
        assert_eq!(ads[6].as_sys(), AD + 100);
        assert_eq!(fake.call_count("GetAppDomainsContainingModule"), 1 + 3);
    }

    #[test]
    fn enum_modules_lists_every_module_and_releases_the_enumerator() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        let mut e = info.enum_modules().unwrap();
        assert_eq!(e.total().unwrap(), 2);
        let first = e.next().unwrap().unwrap();
        assert_eq!(first.0, M);
        e.reset().unwrap();
        let all: Vec<usize> = e.map(|m| m.unwrap().0).collect();
        assert_eq!(all, vec![M, M2]);
    }
}
