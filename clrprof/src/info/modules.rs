//! App domains, assemblies and modules (`ICorProfilerInfo`,
//! `ICorProfilerInfo3`).

use crate::buffer::{fill, fill_string};
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::enums::{module_enum, ModuleEnum};
use crate::info::ProfilerInfo;
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

impl ProfilerInfo {
    /// `GetAppDomainInfo`: name and process of an app domain.
    pub fn app_domain_info(&self, app_domain: AppDomainId<'_>) -> Result<AppDomainInfo> {
        let mut pid = 0usize;
        let name = fill_string("ICorProfilerInfo::GetAppDomainInfo", |cap, needed, buf| {
            // SAFETY: `app_domain` is valid (typed ID); `buf` has `cap` WCHARs.
            unsafe {
                self.raw_info1()
                    .GetAppDomainInfo(app_domain.as_sys(), cap, needed, buf, &mut pid)
            }
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
        let name = fill_string("ICorProfilerInfo::GetAssemblyInfo", |cap, needed, buf| {
            // SAFETY: `assembly` is valid (typed ID); `buf` has `cap` WCHARs.
            unsafe {
                self.raw_info1().GetAssemblyInfo(
                    assembly.as_sys(),
                    cap,
                    needed,
                    buf,
                    &mut ad,
                    &mut module,
                )
            }
        })?;
        // SAFETY: an assembly's app domain and manifest module live as long as it does.
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
            // SAFETY: `module` is valid; `buf` has `cap` WCHARs; other out pointers are locals.
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
            // SAFETY: the assembly of a loaded module lives as long as the module.
            assembly: unsafe { AssemblyId::from_sys(assembly) },
            flags: ModuleFlags::from_bits_retain(flags),
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
                // SAFETY: `module` is valid; `buf` has `cap` slots.
                unsafe { i3.GetAppDomainsContainingModule(module.as_sys(), cap, needed, buf) }
            },
        )?;
        // SAFETY: an app domain containing a loaded module outlives it.
        Ok(ids
            .into_iter()
            .map(|a| unsafe { AppDomainId::from_sys(a) })
            .collect())
    }

    /// `EnumModules` (Info3): every module loaded now (a snapshot taken by
    /// this call), e.g. for a profiler loaded by attach to catch up.
    ///
    /// The modules are tied to `&self`: each stays valid until its
    /// `ModuleUnloadStarted`, which the caller must track if it keeps them
    /// longer than the current callback.
    pub fn enum_modules(&self) -> Result<ModuleEnum<'_>> {
        let i3 = self.raw_info3("ICorProfilerInfo3::EnumModules")?;
        let mut e: Option<sys::ICorProfilerModuleEnum> = None;
        // SAFETY: `e` receives an owned reference.
        check(
            unsafe { i3.EnumModules(&mut e) },
            "ICorProfilerInfo3::EnumModules",
        )?;
        let e = e.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo3::EnumModules",
        ))?;
        // SAFETY: the modules are loaded now; see the doc comment.
        Ok(unsafe { module_enum(e) })
    }
}
