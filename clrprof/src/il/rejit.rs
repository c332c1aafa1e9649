//! ReJIT (`ICorProfilerInfo4::RequestReJIT` / `RequestRevert`) and the
//! SDK-owned thread that issues the requests.
//!
//! The runtime rules this module encodes:
//! - the profiler must have set [`EventMask::ENABLE_REJIT`](crate::event_mask::EventMask::ENABLE_REJIT)
//!   in `Initialize` (else `CORPROF_E_REJIT_NOT_ENABLED`) and implement
//!   `ICorProfilerCallback4` (clrprof always does);
//! - `RequestReJIT` and `RequestRevert` suspend the runtime to patch code
//!   or may start a garbage collection. Called on a thread that is inside a
//!   runtime callback (module load, JIT, ...) this can deadlock against the
//!   locks that callback holds, so they belong on a thread of the
//!   profiler's own; [`ReJitThread`] is that thread. It calls
//!   `InitializeCurrentThread` first, as the runtime asks of profiler
//!   threads that will call Info methods which suspend. Its waiting
//!   requests refuse a scope the suspension would wait for (cooperative
//!   mode, a suspension in progress: [`Error::WouldDeadlock`]);
//! - `RequestReJITWithInliners` (Info10, .NET Core 3.0+) also re-JITs every
//!   method the runtime compiled with one of the requested methods inlined
//!   (the runtime tracks inlining while ReJIT is enabled), so a rewritten
//!   method takes effect in its callers too; with
//!   [`ReJitFlags::BLOCK_INLINING`] the new versions inline nothing of the
//!   requested methods, and with [`ReJitFlags::INLINING_CALLBACKS`] their
//!   compilation reports `JITInlining`;
//! - the new IL is supplied in `GetReJITParameters`
//!   ([`Profiler::get_rejit_parameters`](crate::callback::Profiler::get_rejit_parameters))
//!   through [`FunctionControl`](crate::rejit::FunctionControl), once per
//!   (module, method) and request, also for methods not compiled yet when
//!   the request was made (they are compiled with the new IL on first call).

use crate::error::{check, Error, Result, HRESULT};
use crate::ids::*;
use crate::info::{ProfilerInfo, RuntimeHandle};
use crate::thread::ProfilerThread;
use clrprof_sys as sys;
use std::cell::Cell;
use std::sync::mpsc;
use std::sync::Mutex;

thread_local! {
    // reentrancy: rejit-parameters
    /// Whether this thread is inside `GetReJITParameters` (the SDK sets it
    /// around the profiler's handler).
    static PARAMETERS: Cell<bool> = const { Cell::new(false) };
}

/// The scope of one `GetReJITParameters` on this thread.
pub(crate) struct InParameters(bool);

impl InParameters {
    pub(crate) fn enter() -> InParameters {
        InParameters(PARAMETERS.with(|p| p.replace(true)))
    }
}

impl Drop for InParameters {
    fn drop(&mut self) {
        let _ = PARAMETERS.try_with(|p| p.set(self.0));
    }
}

/// Refuses a waited request inside `GetReJITParameters`.
fn not_in_parameters(call: &'static str) -> Result<()> {
    if PARAMETERS.with(Cell::get) {
        return Err(Error::WouldRecurse {
            call,
            why: "this thread is inside GetReJITParameters, where the runtime prepares a new \
                  version of a method on its way to compiling it; a ReJIT or revert waited for \
                  here makes the runtime prepare another version inside this one, and the \
                  handler is asked again (the torture profiler's re-entrancy family: a request \
                  of the same method from its GetReJITParameters overflowed the stack on .NET \
                  10.0.15); request from another callback or thread"
                .into(),
        });
    }
    Ok(())
}

bitflags::bitflags! {
    /// How `RequestReJITWithInliners` re-JITs (`COR_PRF_REJIT_FLAGS`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct ReJitFlags: u32 {
        /// `COR_PRF_REJIT_BLOCK_INLINING`: the new versions of the requested
        /// methods are never inlined (so their callers call them).
        const BLOCK_INLINING = sys::COR_PRF_REJIT_BLOCK_INLINING;
        /// `COR_PRF_REJIT_INLINING_CALLBACKS`: the re-JIT compilations
        /// report `JITInlining`.
        const INLINING_CALLBACKS = sys::COR_PRF_REJIT_INLINING_CALLBACKS;
    }
}

fn split(methods: &[(RawModuleId, MdMethodDef)]) -> Result<(u32, Vec<sys::ModuleID>, Vec<u32>)> {
    let n = u32::try_from(methods.len()).map_err(|_| Error::InvalidArgument("too many methods"))?;
    if n == 0 {
        return Err(Error::InvalidArgument("no methods to ReJIT or revert"));
    }
    Ok((
        n,
        methods.iter().map(|(m, _)| m.0 as sys::ModuleID).collect(),
        methods.iter().map(|(_, t)| t.0).collect(),
    ))
}

impl RuntimeHandle {
    /// `ICorProfilerInfo4::RequestReJIT` for (module, method) pairs.
    ///
    /// # Safety
    /// Every module must be loaded for the duration of the call. Do not call
    /// this from inside a runtime callback (see the module docs); use
    /// [`ReJitThread`].
    pub unsafe fn request_rejit_raw(&self, methods: &[(RawModuleId, MdMethodDef)]) -> Result<()> {
        let i4 = self.raw_info4("ICorProfilerInfo4::RequestReJIT")?;
        let (n, modules, tokens) = split(methods)?;
        check(
            // SAFETY: [caller-contract, interface-version] both arrays hold `n` entries for the call; module validity
            // is the caller's promise.
            unsafe { i4.RequestReJIT(n, modules.as_ptr(), tokens.as_ptr()) },
            "ICorProfilerInfo4::RequestReJIT",
        )
    }

    /// `ICorProfilerInfo10::RequestReJITWithInliners` for (module, method)
    /// pairs: re-JITs them and every method that inlined one of them.
    ///
    /// # Safety
    /// As for [`request_rejit_raw`](Self::request_rejit_raw).
    pub unsafe fn request_rejit_with_inliners_raw(
        &self,
        flags: ReJitFlags,
        methods: &[(RawModuleId, MdMethodDef)],
    ) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo10::RequestReJITWithInliners";
        let i10 = self.raw_info10(CALL)?;
        let (n, modules, tokens) = split(methods)?;
        check(
            // SAFETY: [caller-contract, interface-version] both arrays hold `n` entries for the call; module
            // validity is the caller's promise.
            unsafe {
                i10.RequestReJITWithInliners(flags.bits(), n, modules.as_ptr(), tokens.as_ptr())
            },
            CALL,
        )
    }

    /// `ICorProfilerInfo4::RequestRevert`: back to the original IL. Returns
    /// the per-method status the runtime reports.
    ///
    /// # Safety
    /// As for [`request_rejit_raw`](Self::request_rejit_raw).
    pub unsafe fn request_revert_raw(
        &self,
        methods: &[(RawModuleId, MdMethodDef)],
    ) -> Result<Vec<HRESULT>> {
        let i4 = self.raw_info4("ICorProfilerInfo4::RequestRevert")?;
        let (n, modules, tokens) = split(methods)?;
        let mut status = vec![HRESULT(0); methods.len()];
        check(
            // SAFETY: [caller-contract, local-memory] the three arrays hold `n` entries for the call.
            unsafe { i4.RequestRevert(n, modules.as_ptr(), tokens.as_ptr(), status.as_mut_ptr()) },
            "ICorProfilerInfo4::RequestRevert",
        )?;
        Ok(status)
    }
}

impl ProfilerInfo<'_> {
    /// `ICorProfilerInfo4::GetReJITIDs`: the ReJIT versions of a function.
    pub fn rejit_ids(&self, function: FunctionId<'_>) -> Result<Vec<RawReJitId>> {
        let i4 = self.raw_info4("ICorProfilerInfo4::GetReJITIDs")?;
        let mut n = 0u32;
        check(
            // SAFETY: [id-scope, buffer-protocol] size query: null buffer of 0 entries.
            unsafe { i4.GetReJITIDs(function.as_sys(), 0, &mut n, core::ptr::null_mut()) },
            "ICorProfilerInfo4::GetReJITIDs",
        )?;
        let mut ids = vec![0 as sys::ReJITID; n as usize];
        let mut got = 0u32;
        check(
            // SAFETY: [id-scope, buffer-protocol] `ids` has `n` entries.
            unsafe { i4.GetReJITIDs(function.as_sys(), n, &mut got, ids.as_mut_ptr()) },
            "ICorProfilerInfo4::GetReJITIDs",
        )?;
        ids.truncate(got.min(n) as usize);
        Ok(ids.into_iter().map(RawReJitId).collect())
    }
}

enum Job {
    ReJit(
        Vec<(RawModuleId, MdMethodDef)>,
        mpsc::Sender<Result<Vec<HRESULT>>>,
    ),
    ReJitWithInliners(
        ReJitFlags,
        Vec<(RawModuleId, MdMethodDef)>,
        mpsc::Sender<Result<Vec<HRESULT>>>,
    ),
    Revert(
        Vec<(RawModuleId, MdMethodDef)>,
        mpsc::Sender<Result<Vec<HRESULT>>>,
    ),
}

/// A thread of the profiler's own that issues `RequestReJIT` and
/// `RequestRevert` (see the module docs for why). It is an SDK thread
/// ([`crate::thread::spawn`]): a detach is refused while it runs, and it
/// holds the library until it has left it.
pub struct ReJitThread {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<ProfilerThread<()>>>,
    /// The runtime the requests go to (for the checks made before queuing).
    runtime: RuntimeHandle,
}

impl ReJitThread {
    /// Starts the thread. It calls `InitializeCurrentThread` (Info4) first;
    /// on a runtime without Info4 this fails with `Unsupported`.
    pub fn spawn(info: &RuntimeHandle) -> Result<ReJitThread> {
        info.raw_info4("ICorProfilerInfo4::RequestReJIT")?;
        let runtime = info.clone();
        let info = info.clone();
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = crate::thread::spawn("clrprof-rejit", move || {
            if let Ok(i4) = info.raw_info4("ICorProfilerInfo4::InitializeCurrentThread") {
                // SAFETY: [plain-call] no arguments; allowed on any thread the profiler
                // created. A failure only loses the pre-initialisation.
                let _ = unsafe { i4.InitializeCurrentThread() };
            }
            while let Ok(job) = rx.recv() {
                crate::guard::guard("ReJIT thread", (), || match job {
                    Job::ReJit(methods, reply) => {
                        // SAFETY: [id-scope] jobs are queued only by
                        // `request_rejit_async` / `request_revert_async`,
                        // unsafe functions whose contract is that the modules
                        // stay loaded until the reply is sent (the safe
                        // `request_rejit` keeps its caller's scope open
                        // until then).
                        let r = unsafe { info.request_rejit_raw(&methods) }
                            .map(|()| vec![HRESULT(0); methods.len()]);
                        let _ = reply.send(r);
                    }
                    Job::ReJitWithInliners(flags, methods, reply) => {
                        // SAFETY: [id-scope] as for ReJIT: the queuing functions'
                        // contract keeps the modules loaded until the reply.
                        let r = unsafe { info.request_rejit_with_inliners_raw(flags, &methods) }
                            .map(|()| vec![HRESULT(0); methods.len()]);
                        let _ = reply.send(r);
                    }
                    Job::Revert(methods, reply) => {
                        // SAFETY: [id-scope] as for ReJIT: the queuing functions'
                        // contract keeps the modules loaded until the reply.
                        let _ = reply.send(unsafe { info.request_revert_raw(&methods) });
                    }
                });
            }
        })
        .map_err(|e| Error::Usage(format!("cannot start the ReJIT thread: {e}")))?;
        Ok(ReJitThread {
            jobs: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            runtime,
        })
    }

    /// Refuses methods of collectible assemblies on .NET Core 3.x and
    /// earlier (`GetRuntimeInformation` major below 5, CoreCLR): the torture
    /// profiler (tests/fixtures/torture) found that a ReJIT of such a
    /// method, even with its own IL, left the calling thread spinning in the
    /// runtime's prestub for ever on .NET Core 3.1.23 (the collectible-code
    /// app hung), while .NET 8.0.4 re-JITs them. Checked with the caller's
    /// module IDs, which its scope keeps valid.
    /// Refuses the IDs of a scope of another runtime than the thread's:
    /// the requests go to this thread's runtime, which would take another
    /// runtime's `ModuleID`s for its own (side-by-side runtimes, a
    /// `ReJitThread` kept where several runtimes' callbacks reach it). The
    /// IDs come from `info`'s scope (no other runtime's scope is open on
    /// this thread while it is), so the check is of `info`.
    fn same_runtime(&self, info: &ProfilerInfo, call: &'static str) -> Result<()> {
        if info.same_runtime(&self.runtime) {
            return Ok(());
        }
        Err(Error::WrongPartner {
            call,
            why: "the IDs come from a scope of another runtime than the one this ReJitThread \
                  was spawned for; spawn a ReJitThread for each runtime"
                .to_string(),
        })
    }

    /// Refuses to wait in a scope the runtime's suspension waits for:
    /// `RequestReJIT` and `RequestRevert` suspend the runtime (.NET Core
    /// 3.x: `ReJitManager::UpdateActiveILVersions` calls
    /// `ThreadSuspend::SuspendEE(SUSPEND_FOR_REJIT)`) or may trigger a
    /// collection (`GC_TRIGGERS` in rejit.cpp on every version; corprof's
    /// remarks: "RequestReJIT typically suspends the runtime ... call it
    /// from a thread the profiler created, not from a callback thread").
    /// The request runs on this thread's own thread, but the caller waits
    /// for its answer: from a callback in cooperative mode (one that
    /// receives `ObjectID`s) or one the runtime issues while suspended,
    /// the suspension waits for the caller and the caller for it, and the
    /// application hangs (review 36: `ObjectAllocated` on 3.1, 8.0, 10.0).
    fn may_wait(info: &ProfilerInfo, call: &'static str) -> Result<()> {
        match info.wait_would_deadlock() {
            None => Ok(()),
            Some(why) => Err(Error::WouldDeadlock {
                call,
                why: format!(
                    "{why}; ask from a callback that runs in preemptive mode \
                     (JITCompilationStarted of another method, a profiler thread's own loop), \
                     or queue the request (request_rejit_async, unsafe) and keep the modules \
                     loaded until it is answered"
                ),
            }),
        }
    }

    fn refuse_collectible_before_net5(
        &self,
        call: &'static str,
        methods: &[(ModuleId<'_>, MdMethodDef)],
    ) -> Result<()> {
        let runtime = self.runtime.runtime_information()?;
        if runtime.runtime_type != crate::runtimes::RuntimeType::CoreClr || runtime.major >= 5 {
            return Ok(());
        }
        let info = ProfilerInfo::scoped(&self.runtime, crate::info::Scope::Callback);
        for (module, _) in methods {
            let flags = info.module_info2(*module)?.flags;
            if flags.contains(crate::info::ModuleFlags::COLLECTIBLE) {
                return Err(Error::RuntimeVersion {
                    hr: HRESULT(crate::error::KnownHresult::E_NOTIMPL as i32),
                    call,
                    called: false,
                    why: "ReJIT of a method of a collectible assembly hangs the method's \
                          callers on .NET Core 3.x (seen on 3.1.23: the calling thread \
                          spins in the prestub); .NET 5 and later re-JIT them"
                        .into(),
                });
            }
        }
        Ok(())
    }

    fn queue(
        &self,
        make: impl FnOnce(mpsc::Sender<Result<Vec<HRESULT>>>) -> Job,
    ) -> Result<mpsc::Receiver<Result<Vec<HRESULT>>>> {
        let (tx, rx) = mpsc::channel();
        // reentrancy: none: `make` only builds the job from the caller's arguments (an SDK closure)
        let jobs = self
            .jobs
            .lock()
            .map_err(|_| Error::Usage("ReJIT thread lock poisoned".into()))?;
        jobs.as_ref()
            .ok_or_else(|| Error::Usage("the ReJIT thread has stopped".into()))?
            .send(make(tx))
            .map_err(|_| Error::Usage("the ReJIT thread has stopped".into()))?;
        Ok(rx)
    }

    /// Queues a ReJIT request and returns at once; the receiver gets the
    /// outcome.
    ///
    /// # Safety
    /// The modules must stay loaded until the outcome arrives.
    pub unsafe fn request_rejit_async(
        &self,
        methods: Vec<(RawModuleId, MdMethodDef)>,
    ) -> Result<mpsc::Receiver<Result<Vec<HRESULT>>>> {
        self.queue(|tx| Job::ReJit(methods, tx))
    }

    /// Queues a `RequestReJITWithInliners` request (Info10) and returns at
    /// once; the receiver gets the outcome.
    ///
    /// # Safety
    /// As for [`request_rejit_async`](Self::request_rejit_async).
    pub unsafe fn request_rejit_with_inliners_async(
        &self,
        flags: ReJitFlags,
        methods: Vec<(RawModuleId, MdMethodDef)>,
    ) -> Result<mpsc::Receiver<Result<Vec<HRESULT>>>> {
        self.queue(|tx| Job::ReJitWithInliners(flags, methods, tx))
    }

    /// Queues a revert request and returns at once.
    ///
    /// # Safety
    /// As for [`request_rejit_async`](Self::request_rejit_async).
    pub unsafe fn request_revert_async(
        &self,
        methods: Vec<(RawModuleId, MdMethodDef)>,
    ) -> Result<mpsc::Receiver<Result<Vec<HRESULT>>>> {
        self.queue(|tx| Job::Revert(methods, tx))
    }

    // provenance: id-runtime
    /// Requests ReJIT of `methods` (IDs of `info`'s scope) on the thread and
    /// waits for the runtime's answer (the IDs stay valid meanwhile because
    /// the caller is blocked in the scope that lent them). `info` must be of
    /// the runtime the thread was spawned for, else [`Error::WrongPartner`]. The new IL is asked for later, in
    /// `GetReJITParameters`, when each method is next called.
    ///
    /// Refused inside `GetReJITParameters` ([`Error::WouldRecurse`], nothing
    /// requested): the runtime would prepare another version inside the
    /// one it asks parameters for, and ask again.
    ///
    /// It waits, so it refuses ([`Error::WouldDeadlock`], nothing requested)
    /// in a scope the runtime's suspension would wait for: a callback that
    /// receives `ObjectID`s (`ObjectAllocated`, `ExceptionThrown`, ...,
    /// which run in cooperative mode), a runtime suspension the profiler
    /// made, and the callbacks the runtime issues while it is suspended or
    /// collecting (`GarbageCollectionStarted`, `RuntimeSuspendFinished`,
    /// `MovedReferences2`, ...). `JITCompilationStarted` of an unrelated
    /// method is a place to wait.
    ///
    /// On .NET Core 3.x a method of a collectible assembly is refused with
    /// [`Error::RuntimeVersion`] (the runtime hangs its callers there).
    pub fn request_rejit(
        &self,
        info: &ProfilerInfo,
        methods: &[(ModuleId<'_>, MdMethodDef)],
    ) -> Result<()> {
        self.same_runtime(info, "ReJitThread::request_rejit")?;
        not_in_parameters("ReJitThread::request_rejit")?;
        Self::may_wait(info, "ReJitThread::request_rejit")?;
        self.refuse_collectible_before_net5("ICorProfilerInfo4::RequestReJIT", methods)?;
        let raw = methods.iter().map(|(m, t)| (m.to_raw(), *t)).collect();
        // SAFETY: [id-scope] we block below until the thread has answered, so the IDs
        // (valid for the caller's scope) outlive their use.
        let rx = unsafe { self.request_rejit_async(raw)? };
        rx.recv()
            .map_err(|_| Error::Usage("the ReJIT thread stopped before answering".into()))?
            .map(|_| ())
    }

    // provenance: id-runtime
    /// `RequestReJITWithInliners` (Info10) of `methods`, made on the
    /// thread, waiting for the runtime's answer: the methods and every
    /// method compiled with one of them inlined are re-JITted with the IL
    /// the profiler supplies in `GetReJITParameters`. Where it may wait:
    /// as for [`request_rejit`](Self::request_rejit). On a runtime without
    /// Info10 this is [`Error::Unsupported`].
    pub fn request_rejit_with_inliners(
        &self,
        info: &ProfilerInfo,
        flags: ReJitFlags,
        methods: &[(ModuleId<'_>, MdMethodDef)],
    ) -> Result<()> {
        self.same_runtime(info, "ReJitThread::request_rejit_with_inliners")?;
        not_in_parameters("ReJitThread::request_rejit_with_inliners")?;
        Self::may_wait(info, "ReJitThread::request_rejit_with_inliners")?;
        self.refuse_collectible_before_net5(
            "ICorProfilerInfo10::RequestReJITWithInliners",
            methods,
        )?;
        let raw = methods.iter().map(|(m, t)| (m.to_raw(), *t)).collect();
        // SAFETY: [id-scope] as in `request_rejit`: we block until the thread answered.
        let rx = unsafe { self.request_rejit_with_inliners_async(flags, raw)? };
        rx.recv()
            .map_err(|_| Error::Usage("the ReJIT thread stopped before answering".into()))?
            .map(|_| ())
    }

    // provenance: id-runtime
    /// Requests a revert and waits; returns the per-method status. Where
    /// it may wait: as for [`request_rejit`](Self::request_rejit)
    /// (`RequestRevert` suspends the runtime like `RequestReJIT`).
    pub fn request_revert(
        &self,
        info: &ProfilerInfo,
        methods: &[(ModuleId<'_>, MdMethodDef)],
    ) -> Result<Vec<HRESULT>> {
        self.same_runtime(info, "ReJitThread::request_revert")?;
        not_in_parameters("ReJitThread::request_revert")?;
        Self::may_wait(info, "ReJitThread::request_revert")?;
        let raw = methods.iter().map(|(m, t)| (m.to_raw(), *t)).collect();
        // SAFETY: [id-scope] as in `request_rejit`.
        let rx = unsafe { self.request_revert_async(raw)? };
        rx.recv()
            .map_err(|_| Error::Usage("the ReJIT thread stopped before answering".into()))?
    }

    /// Stops the thread after the queued requests and waits for it.
    pub fn stop(&self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

impl Drop for ReJitThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeRuntime};

    #[test]
    fn rejit_with_inliners_goes_through_the_thread() {
        let fake = FakeRuntime::with_info_version(10);
        // SAFETY: [test-fake] the fake describes no memory the SDK reads.
        let info = unsafe { fake.profiler_info() };
        let thread = ReJitThread::spawn(&info.handle()).unwrap();
        fake_ids!(fake; m = module_id(0x2000));
        thread
            .request_rejit_with_inliners(
                &info,
                ReJitFlags::BLOCK_INLINING | ReJitFlags::INLINING_CALLBACKS,
                &[(m, MdMethodDef(0x0600_0001)), (m, MdMethodDef(0x0600_0002))],
            )
            .unwrap();
        thread.stop();
        assert_eq!(
            fake.calls_of("RequestReJITWithInliners")[0].args,
            vec![0x3, 2, 0x2000, 0x0600_0001, 0x2000, 0x0600_0002]
        );
        assert!(matches!(
            thread.request_rejit_with_inliners(&info, ReJitFlags::empty(), &[(m, MdMethodDef(1))]),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn rejit_with_inliners_needs_info10() {
        let fake = FakeRuntime::with_info_version(9);
        // SAFETY: [test-fake] the fake describes no memory the SDK reads.
        let info = unsafe { fake.profiler_info() };
        let thread = ReJitThread::spawn(&info.handle()).unwrap();
        fake_ids!(fake; m = module_id(0x2000));
        let e = thread
            .request_rejit_with_inliners(&info, ReJitFlags::BLOCK_INLINING, &[(m, MdMethodDef(1))])
            .unwrap_err();
        assert!(
            matches!(e, Error::Unsupported { needs: 10, has: 9, call } if call == "ICorProfilerInfo10::RequestReJITWithInliners"),
            "{e:?}"
        );
        // SAFETY: [test-fake] no modules are involved, and the fake lacks Info10.
        let raw = unsafe { info.request_rejit_with_inliners_raw(ReJitFlags::empty(), &[]) };
        assert!(matches!(raw, Err(Error::Unsupported { .. })));
    }

    #[test]
    fn requests_refuse_to_wait_where_a_suspension_waits_for_the_caller() {
        use crate::info::Scope;
        let fake = FakeRuntime::with_info_version(10);
        // SAFETY: [test-fake] the fake describes no memory the SDK reads.
        let info = unsafe { fake.profiler_info() };
        let thread = ReJitThread::spawn(&info.handle()).unwrap();
        fake_ids!(fake; m = module_id(0x2000));
        let one = [(m, MdMethodDef(0x0600_0001))];
        for (scope, why) in [
            (
                Scope::NoGc,
                "this scope blocks garbage collections and runtime suspensions",
            ),
            (Scope::Suspended, "the runtime is suspended"),
            (Scope::GcRelocating, "the runtime is suspended"),
        ] {
            // SAFETY: [test-fake] as above.
            let there = unsafe { fake.profiler_info_in(scope) };
            let refused = [
                thread.request_rejit(&there, &one).unwrap_err(),
                thread
                    .request_rejit_with_inliners(&there, ReJitFlags::empty(), &one)
                    .unwrap_err(),
                thread.request_revert(&there, &one).unwrap_err(),
            ];
            let calls = [
                "ReJitThread::request_rejit",
                "ReJitThread::request_rejit_with_inliners",
                "ReJitThread::request_revert",
            ];
            for (e, call) in refused.iter().zip(calls) {
                assert!(
                    matches!(e, Error::WouldDeadlock { call: c, why: w } if *c == call && w.starts_with(why)),
                    "{e:?}"
                );
                assert!(e.is(crate::error::KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE));
                assert!(
                    e.to_string().contains("refused (nothing was requested)"),
                    "{e}"
                );
            }
        }
        // A callback in preemptive mode (JITCompilationStarted) waits.
        thread.request_rejit(&info, &one).unwrap();
        thread.stop();
        assert_eq!(fake.calls_of("RequestReJIT").len(), 1);
        assert_eq!(fake.calls_of("RequestRevert").len(), 0);
        assert_eq!(fake.calls_of("RequestReJITWithInliners").len(), 0);
    }

    #[test]
    fn no_waited_request_inside_get_rejit_parameters() {
        // The torture profiler's re-entrancy family: a request of the same
        // method from its GetReJITParameters overflowed the stack (.NET 10).
        let fake = FakeRuntime::with_info_version(10);
        // SAFETY: [test-fake] the fake describes no memory the SDK reads.
        let info = unsafe { fake.profiler_info() };
        let thread = ReJitThread::spawn(&info.handle()).unwrap();
        fake_ids!(fake; m = module_id(0x2000));
        let one = [(m, MdMethodDef(0x0600_0001))];
        {
            // As the SDK's dispatch of GetReJITParameters does.
            let _inside = InParameters::enter();
            let refused = [
                thread.request_rejit(&info, &one).unwrap_err(),
                thread
                    .request_rejit_with_inliners(&info, ReJitFlags::empty(), &one)
                    .unwrap_err(),
                thread.request_revert(&info, &one).unwrap_err(),
            ];
            for e in &refused {
                assert!(matches!(e, Error::WouldRecurse { .. }), "{e:?}");
                assert!(e.is(crate::error::KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE));
            }
        }
        // Outside it, the same request is made.
        thread.request_rejit(&info, &one).unwrap();
        thread.stop();
        assert_eq!(fake.calls_of("RequestReJIT").len(), 1);
        assert_eq!(fake.calls_of("RequestRevert").len(), 0);
    }

    #[test]
    fn requests_refuse_the_ids_of_another_runtime() {
        let (a, b) = (
            FakeRuntime::with_info_version(10),
            FakeRuntime::with_info_version(10),
        );
        // SAFETY: [test-fake] the fakes describe no memory the SDK reads.
        let (ia, ib) = unsafe { (a.profiler_info(), b.profiler_info()) };
        let thread = ReJitThread::spawn(&ia.handle()).unwrap();
        fake_ids!(b; m = module_id(0x2000));
        let e = thread
            .request_rejit(&ib, &[(m, MdMethodDef(0x0600_0001))])
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::WrongPartner {
                    call: "ReJitThread::request_rejit",
                    ..
                }
            ),
            "{e}"
        );
        assert!(thread.request_revert(&ib, &[(m, MdMethodDef(1))]).is_err());
        assert!(thread
            .request_rejit_with_inliners(&ib, ReJitFlags::empty(), &[(m, MdMethodDef(1))])
            .is_err());
        thread.stop();
        assert_eq!(a.calls_of("RequestReJIT").len(), 0);
        assert_eq!(a.calls_of("RequestRevert").len(), 0);
        assert_eq!(a.calls_of("RequestReJITWithInliners").len(), 0);
    }
}
