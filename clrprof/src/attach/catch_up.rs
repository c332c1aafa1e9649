//! `ProfilerAttachComplete` catch-up: what loaded before the profiler did.
//!
//! A profiler loaded by attach gets no callbacks for modules loaded and
//! functions compiled before it arrived. The runtime's recipe (profiling API
//! docs, "Profiler Attach and Detach", catch-up): enable the load callbacks in
//! `InitializeForAttach`, then, when `ProfilerAttachComplete` arrives,
//! enumerate what already exists with `ICorProfilerInfo3::EnumModules` and
//! `EnumJITedFunctions`.
//!
//! The race the docs warn about: the enumeration and the load callbacks run
//! at the same time on different threads. A module whose load finishes while
//! the enumeration runs can be both enumerated and announced by
//! `ModuleLoadFinished`, in either order; one that the enumerator took while
//! its load was still in progress is announced afterwards as well. Counting
//! both paths double-counts. [`CatchUp`] keeps one [`Seen`] set per ID kind,
//! keyed by raw ID, and reports each ID through whichever path gets there
//! first.
//!
//! The enumerations use [`ProfilerInfo::enum_modules`] and
//! [`ProfilerInfo::enum_jited_functions`].

use crate::error::Result;
use crate::ids::{FunctionId, ModuleId};
use crate::info::ProfilerInfo;
use std::collections::HashSet;
use std::sync::Mutex;

const SHARDS: usize = 16;

/// A concurrent set of raw runtime IDs: "has this ID been reported yet?".
///
/// Sharded by ID so the callback threads and the enumerating thread seldom
/// wait for each other.
pub struct Seen {
    shards: [Mutex<HashSet<usize>>; SHARDS],
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            shards: core::array::from_fn(|_| Mutex::new(HashSet::new())),
        }
    }
}

impl Seen {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    fn shard(&self, raw: usize) -> &Mutex<HashSet<usize>> {
        // IDs are pointers: drop the alignment bits before picking a shard.
        &self.shards[(raw >> 4) % SHARDS]
    }

    /// Records `raw`; `true` if it was not recorded before (the caller is the
    /// first to report it).
    pub fn insert(&self, raw: usize) -> bool {
        match self.shard(raw).lock() {
            Ok(mut s) => s.insert(raw),
            Err(poisoned) => poisoned.into_inner().insert(raw),
        }
    }

    /// Forgets `raw` (e.g. on `ModuleUnloadStarted`: the runtime may reuse
    /// the address for a later module).
    pub fn remove(&self, raw: usize) -> bool {
        match self.shard(raw).lock() {
            Ok(mut s) => s.remove(&raw),
            Err(poisoned) => poisoned.into_inner().remove(&raw),
        }
    }

    /// `true` if `raw` is recorded.
    pub fn contains(&self, raw: usize) -> bool {
        match self.shard(raw).lock() {
            Ok(s) => s.contains(&raw),
            Err(poisoned) => poisoned.into_inner().contains(&raw),
        }
    }

    /// How many IDs are recorded.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| match s.lock() {
                Ok(s) => s.len(),
                Err(p) => p.into_inner().len(),
            })
            .sum()
    }

    /// `true` when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Catch-up bookkeeping for a profiler loaded by attach: each module and
/// each JIT-compiled function is reported once, whether it comes from the
/// enumeration in `profiler_attach_complete` or from a load callback racing it.
///
/// Use: call [`CatchUp::module_loaded`] from `module_load_finished` and
/// [`CatchUp::function_compiled`] from `jit_compilation_finished` and act
/// only when they return `true`; call [`CatchUp::loaded_modules`] and
/// [`CatchUp::compiled_functions`] from `profiler_attach_complete`.
#[derive(Default)]
pub struct CatchUp {
    modules: Seen,
    functions: Seen,
}

impl CatchUp {
    /// Empty bookkeeping.
    pub fn new() -> Self {
        Self::default()
    }

    /// From `module_load_finished`: `true` if the module was not reported yet.
    pub fn module_loaded(&self, module: ModuleId<'_>) -> bool {
        self.modules.insert(module.as_sys())
    }

    /// From `module_unload_started`: forget the module, so a new module at
    /// the same address is reported again.
    pub fn module_unloaded(&self, module: ModuleId<'_>) {
        self.modules.remove(module.as_sys());
    }

    /// From `jit_compilation_finished`: `true` if the function was not reported yet.
    pub fn function_compiled(&self, function: FunctionId<'_>) -> bool {
        self.functions.insert(function.as_sys())
    }

    /// From `profiler_attach_complete`: enumerates the modules loaded now
    /// (`EnumModules`) and calls `report` for each one no callback reported
    /// yet. `report` returns `false` when it could not use the module yet
    /// (e.g. `module_info` said `CORPROF_E_DATAINCOMPLETE`: its load is still
    /// in progress); it is then left for `module_load_finished` to report.
    /// Returns how many modules `report` accepted.
    ///
    /// A module ID is valid until its `ModuleUnloadStarted`; the enumeration
    /// hands out modules that are loaded at the time of the call.
    pub fn loaded_modules(
        &self,
        info: &ProfilerInfo,
        mut report: impl FnMut(ModuleId<'_>) -> bool,
    ) -> Result<usize> {
        let mut accepted = 0;
        for module in info.enum_modules()? {
            let module = module?;
            let raw = module.as_sys();
            if raw == 0 || !self.modules.insert(raw) {
                continue;
            }
            if report(module) {
                accepted += 1;
            } else {
                self.modules.remove(raw);
            }
        }
        Ok(accepted)
    }

    /// From `profiler_attach_complete`: enumerates the functions compiled so
    /// far (`EnumJITedFunctions`) and calls `report` for each one not yet
    /// reported by `jit_compilation_finished`. Returns how many were reported.
    ///
    /// A function ID is valid until its class unloads.
    pub fn compiled_functions(
        &self,
        info: &ProfilerInfo,
        mut report: impl FnMut(FunctionId<'_>),
    ) -> Result<usize> {
        let mut reported = 0;
        for jitted in info.enum_jited_functions()? {
            let function = jitted?.function;
            let raw = function.as_sys();
            if raw == 0 || !self.functions.insert(raw) {
                continue;
            }
            report(function);
            reported += 1;
        }
        Ok(reported)
    }

    /// Modules reported so far (by either path, minus unloaded ones).
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// Functions reported so far (by either path).
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{FakeModule, FakeRuntime};
    use clrprof_sys as sys;
    use std::sync::Arc;

    fn fake_with(modules: &[usize], functions: &[usize]) -> FakeRuntime {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            for &m in modules {
                st.modules.insert(m, FakeModule::default());
            }
            for &f in functions {
                st.jitted.push(sys::COR_PRF_FUNCTION {
                    functionId: f,
                    reJitId: 0,
                });
            }
        }
        fake
    }

    #[test]
    fn modules_reported_once_across_enumeration_and_callbacks() {
        // 100 modules: more than one enumerator batch.
        let ids: Vec<usize> = (1..=100).map(|i| i * 0x1000).collect();
        let fake = fake_with(&ids, &[]);
        let info = fake.profiler_info_attached();
        let c = CatchUp::new();
        // A load callback got there first for one module...
        // SAFETY: fake IDs, never passed to a real runtime.
        assert!(c.module_loaded(unsafe { ModuleId::from_sys(0x5000) }));
        let mut seen = Vec::new();
        // ...and one module is still loading (incomplete) during the enumeration.
        let n = c
            .loaded_modules(&info, |m| {
                if m.as_sys() == 0x7000 {
                    return false;
                }
                seen.push(m.as_sys());
                true
            })
            .unwrap();
        assert_eq!(n, 98);
        assert_eq!(seen.len(), 98);
        assert!(!seen.contains(&0x5000) && !seen.contains(&0x7000));
        // The incomplete one is left for its ModuleLoadFinished; the others are not reported twice.
        // SAFETY: as above.
        assert!(c.module_loaded(unsafe { ModuleId::from_sys(0x7000) }));
        // SAFETY: as above.
        assert!(!c.module_loaded(unsafe { ModuleId::from_sys(0x9000) }));
        assert_eq!(c.module_count(), 100);
        assert_eq!(fake.live_enumerators(), 0);
    }

    #[test]
    fn functions_compiled_before_attach_are_reported_once() {
        let fake = fake_with(&[], &[0x10, 0x20, 0x30]);
        let info = fake.profiler_info_attached();
        let c = CatchUp::new();
        // SAFETY: fake ID.
        assert!(c.function_compiled(unsafe { FunctionId::from_sys(0x20) }));
        let mut seen = Vec::new();
        assert_eq!(
            c.compiled_functions(&info, |f| seen.push(f.as_sys()))
                .unwrap(),
            2
        );
        assert_eq!(seen, vec![0x10, 0x30]);
        assert_eq!(
            c.compiled_functions(&info, |_| panic!("reported twice"))
                .unwrap(),
            0
        );
        assert_eq!(fake.live_enumerators(), 0);
    }

    #[test]
    fn enumeration_failures_are_errors() {
        let fake = fake_with(&[0x1000], &[]);
        fake.fail(
            "EnumModules",
            crate::HRESULT(crate::error::KnownHresult::E_FAIL as i32),
        );
        let c = CatchUp::new();
        let e = c
            .loaded_modules(&fake.profiler_info_attached(), |_| true)
            .unwrap_err();
        assert!(e.to_string().contains("EnumModules"), "{e}");
    }

    #[test]
    fn each_id_is_first_exactly_once_across_threads() {
        let seen = Arc::new(Seen::new());
        let firsts: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let seen = seen.clone();
                    s.spawn(move || {
                        (0..1000usize)
                            .filter(|i| seen.insert(0x1000 + i * 16))
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(firsts, 1000);
        assert_eq!(seen.len(), 1000);
        assert!(seen.remove(0x1000));
        assert!(!seen.contains(0x1000));
        assert!(seen.insert(0x1000));
    }
}
