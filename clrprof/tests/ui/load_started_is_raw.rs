// The *LoadStarted callbacks (and ModuleAttachedToAssembly's assembly, which
// comes before AssemblyLoadFinished) hand out raw IDs: the runtime makes them
// valid for information requests only from the matching *Finished. Asking
// about a module in ModuleLoadStarted (GetClassFromToken) crashed .NET 8.
use clrprof::{
    profiler, EventMasks, MdTypeDef, ModuleId, Profiler, ProfilerInfo, RawAppDomainId,
    RawAssemblyId, RawClassId, RawModuleId, Result,
};

#[profiler(clsid = "{6D1F0C4B-2E7A-4B5C-9A83-0F4E1D2C3B47}")]
#[derive(Default)]
struct P;

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn module_load_started(&self, info: &ProfilerInfo, module: RawModuleId) {
        let _ = info.class_from_token(module, MdTypeDef::from_rid(2));
    }
    fn class_load_started(&self, info: &ProfilerInfo, class: RawClassId) {
        let _ = info.class_info(class);
    }
    fn assembly_load_started(&self, info: &ProfilerInfo, assembly: RawAssemblyId) {
        let _ = info.assembly_info(assembly);
    }
    fn app_domain_creation_started(&self, info: &ProfilerInfo, app_domain: RawAppDomainId) {
        let _ = info.app_domain_info(app_domain);
    }
    fn module_attached_to_assembly(
        &self,
        info: &ProfilerInfo,
        _module: ModuleId<'_>,
        assembly: RawAssemblyId,
    ) {
        let _ = info.assembly_info(assembly);
    }
}

fn main() {}
