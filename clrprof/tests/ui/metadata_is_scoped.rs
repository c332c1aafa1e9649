// A module's metadata reads the module's image, which a collectible module
// takes with it when it unloads: a MetaDataImport / MetaDataEmit borrows the
// module it was opened from and cannot be kept in the profiler's struct or
// in a static; open it again from a scope that holds the module.
use clrprof::info::MetaDataOpen;
use clrprof::metadata::MetaDataImport;
use clrprof::metadata_emit::MetaDataEmit;
use clrprof::{profiler, EventMasks, FunctionId, ModuleId, Profiler, ProfilerInfo, Result};
use std::sync::Mutex;

static EMITTERS: Mutex<Vec<MetaDataEmit<'static>>> = Mutex::new(Vec::new());

#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E71}")]
#[derive(Default)]
struct P {
    kept: Mutex<Vec<MetaDataImport<'static>>>,
}

impl Profiler for P {
    fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
        Ok(EventMasks::default())
    }
    fn module_unload_started(&self, info: &ProfilerInfo, module: ModuleId<'_>) {
        if let Ok(md) = info.module_metadata(module, MetaDataOpen::Read) {
            self.kept.lock().unwrap().push(md);
        }
    }
    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        let Ok(fi) = info.function_info(function) else { return };
        if let Ok(emit) = info.module_metadata_emit(fi.module) {
            EMITTERS.lock().unwrap().push(emit);
        }
    }
}

fn main() {}
