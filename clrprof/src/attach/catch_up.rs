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
//! [`CatchUp`] is an SDK component: registered in `InitializeForAttach`, it
//! hears module loads and unloads and JIT compilations from the SDK itself,
//! runs the enumerations at `ProfilerAttachComplete`, and calls the
//! profiler's [`CatchUpHandler`] once per module and once per function,
//! whichever path finds it first.
//!
//! Modules are handed out typed even when they come from the enumeration:
//! `EnumModules` lists only modules that are loaded and not being unloaded,
//! and while the handler looks at an enumerated module, that module's
//! `ModuleUnloadStarted` (after which its ID is dead) waits for the handler
//! to return, through the same announce-then-check protocol as the
//! sampler's [`ThreadGate`](crate::stackwalk::ThreadGate). Functions are
//! handed out raw: a function dies with its class, which may unload (a
//! generic instantiation over a collectible type) without its module.

use crate::error::Result;
use crate::ids::{FunctionId, ModuleId, RawFunctionId};
use crate::info::ProfilerInfo;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

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

/// How a module or function reached the [`CatchUpHandler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Found {
    /// The enumeration at `ProfilerAttachComplete`: it existed before the attach.
    Enumerated,
    /// A load or JIT callback after the attach.
    Callback,
}

/// What a profiler loaded by attach does with what it finds; see [`CatchUp`].
#[allow(unused_variables)]
pub trait CatchUpHandler: Send + Sync + 'static {
    /// A loaded module, reported once. Return `false` when it cannot be used
    /// yet (e.g. `module_info` said `CORPROF_E_DATAINCOMPLETE`: its load is
    /// still in progress); it is then reported again by its
    /// `ModuleLoadFinished`.
    ///
    /// On .NET 9 no type can be loaded here (`class_from_token` and the
    /// other calls that may load types answer [`Error::RuntimeVersion`](crate::error::Error::RuntimeVersion)):
    /// the module's assembly may still be loading (book: *IDs*, "Type
    /// loads during an assembly's load").
    fn module_loaded(&self, info: &ProfilerInfo, module: ModuleId<'_>, found: Found) -> bool {
        true
    }
    /// A JIT-compiled function, reported once (raw: see the module docs).
    fn function_compiled(&self, info: &ProfilerInfo, function: RawFunctionId, found: Found) {}
}

/// Catch-up for a profiler loaded by attach: each module and each
/// JIT-compiled function is reported once to the [`CatchUpHandler`],
/// whether it comes from the enumeration at `ProfilerAttachComplete` or
/// from a load callback racing it. Register it with [`CatchUp::register`]
/// in `initialize_for_attach`; nothing is forwarded by hand.
pub struct CatchUp {
    modules: Seen,
    functions: Seen,
    /// Modules whose `ModuleUnloadStarted` has begun (until loaded again).
    unloaded: Seen,
    /// The enumerated module being reported now (0: none).
    reporting: AtomicUsize,
    handler: Box<dyn CatchUpHandler>,
    enumerated_modules: AtomicUsize,
    enumerated_functions: AtomicUsize,
}

impl CatchUp {
    /// Registers catch-up for the runtime of `info` (during
    /// `InitializeForAttach`, or `Initialize`); adds `MONITOR_MODULE_LOADS`
    /// and `MONITOR_JIT_COMPILATION` to the event mask (both allowed after
    /// attach).
    pub fn register(info: &ProfilerInfo, handler: impl CatchUpHandler) -> Result<Arc<CatchUp>> {
        let catch_up = Arc::new(CatchUp {
            modules: Seen::new(),
            functions: Seen::new(),
            unloaded: Seen::new(),
            reporting: AtomicUsize::new(0),
            handler: Box::new(handler),
            enumerated_modules: AtomicUsize::new(0),
            enumerated_functions: AtomicUsize::new(0),
        });
        info.register(Arc::new(CatchUpComponent(catch_up.clone())))?;
        Ok(catch_up)
    }

    /// Modules reported so far (by either path, minus unloaded ones).
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// Functions reported so far (by either path).
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Modules and functions the enumerations reported (`Found::Enumerated`).
    pub fn enumerated(&self) -> (usize, usize) {
        (
            self.enumerated_modules.load(SeqCst),
            self.enumerated_functions.load(SeqCst),
        )
    }

    fn report_module(&self, info: &ProfilerInfo, module: ModuleId<'_>, found: Found) {
        let raw = module.as_sys();
        if raw == 0 || !self.modules.insert(raw) {
            return;
        }
        if self.handler.module_loaded(info, module, found) {
            if found == Found::Enumerated {
                self.enumerated_modules.fetch_add(1, SeqCst);
            }
        } else {
            self.modules.remove(raw);
        }
    }

    fn report_function(&self, info: &ProfilerInfo, function: RawFunctionId, found: Found) {
        if function.0 == 0 || !self.functions.insert(function.0) {
            return;
        }
        if found == Found::Enumerated {
            self.enumerated_functions.fetch_add(1, SeqCst);
        }
        self.handler.function_compiled(info, function, found);
    }

    /// The enumerations of `ProfilerAttachComplete`.
    fn enumerate(&self, info: &ProfilerInfo) -> Result<()> {
        for module in info.enum_modules()? {
            let raw = module?.0;
            // Announce, then check (see the module docs): either the
            // unload sees the announcement and waits, or this sees the
            // unload and skips the module.
            self.reporting.store(raw, SeqCst);
            if !self.unloaded.contains(raw) {
                // SAFETY: [id-scope] EnumModules lists only modules the runtime has
                // made available to profilers (their load reached the
                // point where ModuleLoadFinished is issued: never one
                // between ModuleLoadStarted and that, whose ID is not valid
                // yet) and not those whose unload has begun; this module's
                // ModuleUnloadStarted, after which the ID is dead, has not
                // begun (checked above) and cannot return before
                // `reporting` is cleared below; the typed ID lives only
                // inside this block.
                let module = unsafe { ModuleId::from_sys(raw) };
                // The enumeration lists modules whose assembly is still
                // loading on another thread: no type loads on .NET 9 (see
                // `AssemblyLoading`).
                let _loading = crate::info::AssemblyLoading::enter();
                self.report_module(info, module, Found::Enumerated);
            }
            self.reporting.store(0, SeqCst);
        }
        // On .NET 10 and later the runtime's walk of its code heaps is safe
        // only while the runtime cannot suspend (`info::jit`'s
        // `CODE_HEAP_WALK`); `ProfilerAttachComplete` does not keep it from
        // suspending, so the SDK suspends it for the walk.
        let functions = match info.enum_jited_functions() {
            Ok(all) => all.collect::<Result<Vec<_>>>()?,
            Err(crate::error::Error::RuntimeVersion { called: false, .. }) => {
                crate::stackwalk::suspend::enum_jited_functions_suspended(info)?
            }
            Err(e) => return Err(e),
        };
        for function in functions {
            self.report_function(info, function.function, Found::Enumerated);
        }
        Ok(())
    }
}

/// The SDK component behind [`CatchUp::register`].
struct CatchUpComponent(Arc<CatchUp>);

impl crate::component::Component for CatchUpComponent {
    fn name(&self) -> &'static str {
        "catch-up"
    }

    fn masks(&self) -> crate::event_mask::EventMasks {
        (crate::event_mask::EventMask::MONITOR_MODULE_LOADS
            | crate::event_mask::EventMask::MONITOR_JIT_COMPILATION)
            .into()
    }

    fn module_load_finished(&self, info: &ProfilerInfo, module: ModuleId<'_>) {
        self.0.unloaded.remove(module.as_sys());
        self.0.report_module(info, module, Found::Callback);
    }

    fn module_unload_started(&self, _info: &ProfilerInfo, module: ModuleId<'_>) {
        let raw = module.as_sys();
        self.0.unloaded.insert(raw);
        while self.0.reporting.load(SeqCst) == raw {
            std::thread::yield_now();
        }
        self.0.modules.remove(raw);
    }

    fn jit_compilation_finished(&self, info: &ProfilerInfo, function: FunctionId<'_>) {
        self.0
            .report_function(info, function.to_raw(), Found::Callback);
    }

    fn profiler_attach_complete(&self, info: &ProfilerInfo) {
        if let Err(e) = self.0.enumerate(info) {
            log::error!("attach catch-up: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::Components;
    use crate::event_mask::EventMask;
    use crate::testing::fake::{fake_ids, FakeModule, FakeRuntime};
    use clrprof_sys as sys;
    use std::sync::atomic::{AtomicBool, Ordering};

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

    /// Records what reaches the handler; refuses one module as "incomplete".
    #[derive(Default)]
    struct Recorder {
        modules: Mutex<Vec<(usize, Found)>>,
        functions: Mutex<Vec<(usize, Found)>>,
        incomplete: usize,
    }

    impl CatchUpHandler for Arc<Recorder> {
        fn module_loaded(&self, _: &ProfilerInfo, module: ModuleId<'_>, found: Found) -> bool {
            if module.as_sys() == self.incomplete {
                return false;
            }
            self.modules.lock().unwrap().push((module.as_sys(), found));
            true
        }
        fn function_compiled(&self, _: &ProfilerInfo, f: RawFunctionId, found: Found) {
            self.functions.lock().unwrap().push((f.0, found));
        }
    }

    fn register(fake: &FakeRuntime, recorder: Arc<Recorder>) -> (Arc<CatchUp>, Components) {
        let mut catch_up = None;
        let components = fake.initialize_components(true, |info| {
            catch_up = Some(CatchUp::register(info, recorder).unwrap());
        });
        (catch_up.unwrap(), components)
    }

    #[test]
    fn modules_reported_once_across_enumeration_and_callbacks() {
        // 100 modules: more than one enumerator batch.
        let ids: Vec<usize> = (1..=100).map(|i| i * 0x1000).collect();
        let fake = fake_with(&ids, &[]);
        let recorder = Arc::new(Recorder {
            incomplete: 0x7000,
            ..Default::default()
        });
        let (c, components) = register(&fake, recorder.clone());
        assert_eq!(
            components.masks().low,
            EventMask::MONITOR_MODULE_LOADS | EventMask::MONITOR_JIT_COMPILATION
        );
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_attached() };
        // A load callback got there first for one module...
        fake_ids!(fake; m5 = module_id(0x5000), m7 = module_id(0x7000), m9 = module_id(0x9000));
        components.each("test", |c| c.module_load_finished(&info, m5));
        // ...and one module is still loading (incomplete) during the enumeration.
        components.each("test", |c| c.profiler_attach_complete(&info));
        let modules = recorder.modules.lock().unwrap().clone();
        let enumerated: Vec<usize> = modules
            .iter()
            .filter(|(_, f)| *f == Found::Enumerated)
            .map(|(m, _)| *m)
            .collect();
        assert_eq!(enumerated.len(), 98);
        assert!(!enumerated.contains(&0x5000) && !enumerated.contains(&0x7000));
        assert_eq!(c.enumerated().0, 98);
        // The incomplete one is left for its ModuleLoadFinished; the others
        // are not reported twice.
        components.each("test", |c| c.module_load_finished(&info, m7));
        components.each("test", |c| c.module_load_finished(&info, m9));
        let callbacks: Vec<usize> = recorder
            .modules
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, f)| *f == Found::Callback)
            .map(|(m, _)| *m)
            .collect();
        assert_eq!(callbacks, vec![0x5000]);
        assert_eq!(
            c.module_count(),
            99,
            "0x7000 was refused and stays unreported"
        );
        assert_eq!(fake.live_enumerators(), 0);
    }

    #[test]
    fn functions_compiled_before_attach_are_reported_once() {
        let fake = fake_with(&[], &[0x10, 0x20, 0x30]);
        let recorder = Arc::new(Recorder::default());
        let (c, components) = register(&fake, recorder.clone());
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_attached() };
        fake_ids!(fake; f = function_id(0x20));
        components.each("test", |c| c.jit_compilation_finished(&info, f));
        components.each("test", |c| c.profiler_attach_complete(&info));
        components.each("test", |c| c.jit_compilation_finished(&info, f));
        let got = recorder.functions.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![
                (0x20, Found::Callback),
                (0x10, Found::Enumerated),
                (0x30, Found::Enumerated)
            ]
        );
        assert_eq!(c.function_count(), 3);
        assert_eq!(fake.live_enumerators(), 0);
    }

    #[test]
    fn on_net10_functions_are_enumerated_inside_a_runtime_suspension() {
        for major in [9u16, 10, 11] {
            let fake = FakeRuntime::with_info_version(10);
            fake.state().jitted = [0x10, 0x20]
                .map(|f| sys::COR_PRF_FUNCTION {
                    functionId: f,
                    reJitId: 0,
                })
                .to_vec();
            fake.state().runtime.major = major;
            // The fake's threads are one: the SDK thread must not look managed.
            fake.state().current_thread = None;
            // The fake answers E_NOTIMPL to both unless told otherwise.
            fake.fail("SuspendRuntime", sys::S_OK);
            fake.fail("ResumeRuntime", sys::S_OK);
            let recorder = Arc::new(Recorder::default());
            let (c, components) = register(&fake, recorder.clone());
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info_attached() };
            components.each("test", |c| c.profiler_attach_complete(&info));
            assert_eq!(c.function_count(), 2, ".NET {major}");
            let suspended = major >= 10;
            assert_eq!(
                fake.call_count("SuspendRuntime"),
                usize::from(suspended),
                ".NET {major}"
            );
            assert_eq!(
                fake.call_count("ResumeRuntime"),
                usize::from(suspended),
                ".NET {major}"
            );
            assert_eq!(fake.call_count("EnumJITedFunctions"), 1, ".NET {major}");
            assert_eq!(fake.live_enumerators(), 0);
        }
    }

    /// Asks for a class of every module it is handed; records whether the
    /// SDK refused the type load for the running version.
    #[derive(Default)]
    struct Loader {
        refused: Mutex<Vec<(usize, bool)>>,
    }

    impl CatchUpHandler for Arc<Loader> {
        fn module_loaded(&self, info: &ProfilerInfo, module: ModuleId<'_>, _: Found) -> bool {
            let refused = matches!(
                info.class_from_token(module, crate::ids::MdTypeDef::from_rid(2)),
                Err(crate::error::Error::RuntimeVersion { called: false, .. })
            );
            self.refused
                .lock()
                .unwrap()
                .push((module.as_sys(), refused));
            true
        }
    }

    #[test]
    fn enumerated_modules_load_no_types_on_net9() {
        for major in [8u16, 9, 10] {
            let fake = fake_with(&[0x1000, 0x2000], &[]);
            fake.state().runtime.major = major;
            let loader = Arc::new(Loader::default());
            let l = loader.clone();
            let components = fake.initialize_components(true, |info| {
                CatchUp::register(info, l).unwrap();
            });
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info_attached() };
            components.each("test", |c| c.profiler_attach_complete(&info));
            let refused = loader.refused.lock().unwrap().clone();
            let net9 = major == 9;
            assert_eq!(refused, [(0x1000, net9), (0x2000, net9)], ".NET {major}");
            assert_eq!(
                fake.call_count("GetClassFromToken"),
                if net9 { 0 } else { 2 },
                ".NET {major}"
            );
        }
    }

    /// A handler that blocks while it looks at one enumerated module, so a
    /// test can run that module's ModuleUnloadStarted at the same time.
    struct Blocking {
        module: usize,
        entered: std::sync::mpsc::Sender<()>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
        done: Arc<AtomicBool>,
    }

    impl CatchUpHandler for Blocking {
        fn module_loaded(&self, _: &ProfilerInfo, module: ModuleId<'_>, _: Found) -> bool {
            if module.as_sys() == self.module {
                let _ = self.entered.send(());
                let _ = self.release.lock().unwrap().recv();
                self.done.store(true, Ordering::SeqCst);
            }
            true
        }
    }

    #[test]
    fn an_unload_waits_for_the_handler_of_its_enumerated_module() {
        let fake = fake_with(&[0x1000, 0x2000], &[]);
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        let handler = Blocking {
            module: 0x2000,
            entered: entered_tx,
            release: Mutex::new(release_rx),
            done: done.clone(),
        };
        let mut registered = None;
        let components = Arc::new(fake.initialize_components(true, |info| {
            registered = Some(CatchUp::register(info, handler).unwrap());
        }));
        std::thread::scope(|s| {
            let theirs = components.clone();
            let fake = &fake;
            s.spawn(move || {
                // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
                let info = unsafe { fake.profiler_info_attached() };
                theirs.each("test", |c| c.profiler_attach_complete(&info));
            });
            entered_rx.recv().unwrap();
            let unloader = s.spawn(|| {
                // SAFETY: [test-fake] as above.
                let info = unsafe { fake.profiler_info_attached() };
                fake_ids!(fake; m = module_id(0x2000));
                components.each("test", |c| c.module_unload_started(&info, m));
                done.load(Ordering::SeqCst)
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!unloader.is_finished(), "the unload did not wait");
            release_tx.send(()).unwrap();
            assert!(
                unloader.join().unwrap(),
                "ModuleUnloadStarted returned while the handler still used the module"
            );
        });
        // An unloaded module is not enumerated again.
        let recorder = Arc::new(Recorder::default());
        let (_, components) = register(&fake, recorder.clone());
        // SAFETY: [test-fake] as above.
        let info = unsafe { fake.profiler_info_attached() };
        fake_ids!(fake; m = module_id(0x1000));
        components.each("test", |c| c.module_unload_started(&info, m));
        components.each("test", |c| c.profiler_attach_complete(&info));
        assert_eq!(
            recorder.modules.lock().unwrap().clone(),
            vec![(0x2000, Found::Enumerated)]
        );
    }

    #[test]
    fn enumeration_failures_are_logged_not_fatal() {
        let fake = fake_with(&[0x1000], &[]);
        fake.fail(
            "EnumModules",
            crate::error::HRESULT(crate::error::KnownHresult::E_FAIL as i32),
        );
        let recorder = Arc::new(Recorder::default());
        let (c, components) = register(&fake, recorder.clone());
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_attached() };
        let e = c.enumerate(&info).unwrap_err();
        assert!(e.to_string().contains("EnumModules"), "{e}");
        components.each("test", |c| c.profiler_attach_complete(&info));
        assert!(recorder.modules.lock().unwrap().is_empty());
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
