//! A minimal sampler: every managed thread's stack 1000 times a second,
//! written as folded stacks (`root;...;leaf N`, what `clrprof flamegraph`
//! reads) to the file `CLRPROF_OUTPUT` names, when the profiler finishes.

use clrprof::{profiler, EventMasks, NameCache, Profiler, ProfilerInfo, Result};
use clrprof_sampler::{Sampler, SamplerConfig};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

// Keep the CLSID `clrprof new` wrote into your crate: it is the one it printed.
#[profiler(clsid = "{3F0C9A52-7E1D-4B86-9C2A-5D1E0B7F4A63}")]
#[derive(Default)]
pub struct MinimalSampler {
    sampler: OnceLock<Arc<Sampler>>,
    output: OnceLock<PathBuf>,
}

impl Profiler for MinimalSampler {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        // Read your variables here: later, under the multiplexer, another
        // profiler's values may be in the environment.
        if let Some(path) = std::env::var_os("CLRPROF_OUTPUT") {
            let _ = self.output.set(PathBuf::from(path));
        }
        // Registering adds the events the sampler needs; sampling starts
        // by itself once the runtime is up.
        let sampler = Sampler::register(info, SamplerConfig::at(1000), Arc::new(NameCache::new()))?;
        let _ = self.sampler.set(sampler);
        Ok(EventMasks::default())
    }

    // `finish` runs once, at Shutdown or at process exit, whichever comes.
    fn finish(&self) {
        let (Some(sampler), Some(path)) = (self.sampler.get(), self.output.get()) else {
            return;
        };
        if let Ok(profile) = sampler.stop() {
            let mut folded = Vec::new();
            if profile.write_folded(&mut folded).is_ok() {
                let _ = std::fs::write(path, folded);
            }
            // The same profile as pprof: `profile.pprof_bytes()`.
        }
    }
}
