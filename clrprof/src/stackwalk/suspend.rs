//! The sampling thread and runtime suspensions (`ICorProfilerInfo10`).

use super::{
    do_stack_snapshot, Frame, FrameBuffer, ThreadGate, ThreadList, Walk, WalkEnd, WalkOptions,
};
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::RawThreadId;
use crate::info::enums::RawProfilerEnum;
use crate::info::{ProfilerInfo, RuntimeHandle, Scope};
use crate::thread::ProfilerThread;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};

static SUSPENSIONS: AtomicU64 = AtomicU64::new(1);

use crate::suspends::SUSPENSIONS_HELD;

/// The SDK-made thread that may suspend the runtime (rules 1 and 2 of the
/// [module](super)). Exists only on the thread [`spawn_sampling_thread`]
/// started, after its first Info call; it cannot be sent elsewhere.
pub struct SamplingThread {
    info: RuntimeHandle,
    walker: usize,
    _pinned: PhantomData<*const ()>,
}

/// Starts the sampling thread `name`: an SDK thread ([`crate::thread::spawn`])
/// that first makes its first Info call (`InitializeCurrentThread`, Info4+,
/// or `GetCurrentThreadID` before that), checks that the runtime does not
/// know it as a managed thread, and then runs `body`.
///
/// `walker` (0..4) names this thread's slot in the [`ThreadGate`]s it uses.
pub fn spawn_sampling_thread<T, F>(
    info: &RuntimeHandle,
    name: &str,
    walker: usize,
    body: F,
) -> std::io::Result<ProfilerThread<Result<T>>>
where
    F: FnOnce(&mut SamplingThread) -> T + Send + 'static,
    T: Send + 'static,
{
    let info = info.clone();
    crate::thread::spawn(name, move || {
        let mut thread = SamplingThread::initialize(info, walker)?;
        Ok(body(&mut thread))
    })
}

impl SamplingThread {
    fn initialize(info: RuntimeHandle, walker: usize) -> Result<Self> {
        match info.raw_info4("ICorProfilerInfo4::InitializeCurrentThread") {
            Ok(i4) => {
                // SAFETY: [suspension, plain-call] no arguments; the runtime documents this call as the
                // first one a profiler thread makes, before it suspends anything.
                let hr = unsafe { i4.InitializeCurrentThread() };
                check(hr, "ICorProfilerInfo4::InitializeCurrentThread")?;
            }
            Err(Error::Unsupported { .. }) => {}
            Err(e) => return Err(e),
        }
        // On every runtime: the thread must be unknown to the runtime, i.e.
        // it has never run managed code and never will.
        match info.current_thread() {
            Err(e) if hr_is(&e, KnownHresult::CORPROF_E_NOT_MANAGED_THREAD) => {}
            Err(e) => return Err(e),
            Ok(t) => {
                return Err(Error::Usage(format!(
                    "the sampling thread is a managed thread ({t:?}); a sampler must run on a thread that never runs managed code"
                )))
            }
        }
        Ok(SamplingThread {
            info,
            walker,
            _pinned: PhantomData,
        })
    }

    /// The runtime this thread samples.
    pub fn runtime(&self) -> &RuntimeHandle {
        &self.info
    }

    /// A scope for the SDK's own calls with IDs whose validity it proves
    /// itself (naming the functions seen on a stack, under the
    /// [`UnloadFence`](super::UnloadFence)). This thread is an SDK thread
    /// borrowed exclusively, so no other runtime's scope is open on it.
    pub(crate) fn info(&self) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(&self.info, Scope::Callback)
    }

    /// `ICorProfilerInfo10::SuspendRuntime`, and `ResumeRuntime` when the
    /// returned guard is dropped: stops every managed thread at a safe point
    /// until then.
    ///
    /// Needs `ICorProfilerInfo10` (.NET Core 3.0 and later); older runtimes
    /// give [`Error::Unsupported`]. Do not allocate, and take no lock a callback
    /// might hold, until the guard is dropped (see the [module](super) rules).
    pub fn suspend_runtime(&mut self) -> Result<RuntimeSuspension<'_>> {
        const CALL: &str = "ICorProfilerInfo10::SuspendRuntime";
        // The runtime is not retired (detach, Shutdown) while it is
        // suspended, so the ResumeRuntime that ends the suspension is never
        // refused.
        let live = self.info.hold_live(CALL)?;
        {
            let i10 = self.info.raw_info10(CALL)?;
            // SAFETY: [suspension, plain-call] no arguments; called from a profiler thread that has made
            // its first Info call and holds no lock (rules 1, 2, 4).
            check(unsafe { i10.SuspendRuntime() }, CALL)?;
        }
        SUSPENSIONS_HELD.with(|h| h.set(h.get() + 1));
        Ok(RuntimeSuspension {
            live,
            thread: self,
            serial: SUSPENSIONS.fetch_add(1, Ordering::Relaxed),
        })
    }
}

fn hr_is(e: &Error, k: KnownHresult) -> bool {
    e.hresult().0 == k as i32
}

/// The runtime suspended by [`SamplingThread::suspend_runtime`]; resumes on drop.
pub struct RuntimeSuspension<'s> {
    thread: &'s mut SamplingThread,
    /// Dropped after `Drop::drop` resumed the runtime.
    live: crate::info::LiveHold,
    serial: u64,
}

impl RuntimeSuspension<'_> {
    /// The runtime, lent for the suspension: no managed code runs and no
    /// garbage collection can start until the guard is dropped (a GC needs
    /// the same suspension), so typed IDs obtained here are valid for the
    /// suspension, and object references may be read
    /// ([`ProfilerInfo::gc_blocked`] is `true`). This thread holds the only
    /// suspension scope it can have (the guard borrows the
    /// [`SamplingThread`] exclusively), so no other runtime's scope is open
    /// on it.
    pub fn info(&self) -> ProfilerInfo<'_> {
        ProfilerInfo::scoped(&self.thread.info, Scope::NoGc)
    }

    // provenance: suspension-partners
    /// `ICorProfilerInfo4::EnumThreads`: lists the managed threads into
    /// `list`, without allocating in the profiler. The runtime holds its
    /// thread-store lock for the whole suspension, so the list stays valid
    /// until the guard is dropped; threads whose `ThreadDestroyed` was
    /// already reported are not listed.
    pub fn enum_threads(&self, list: &mut ThreadList) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo4::EnumThreads";
        let i4 = self.thread.info.raw_info4(CALL)?;
        let mut raw: Option<clrprof_sys::ICorProfilerThreadEnum> = None;
        // SAFETY: [suspension, plain-call] valid out pointer; the runtime is suspended by this profiler,
        // the case EnumThreads handles without taking the thread-store lock again.
        check(unsafe { i4.EnumThreads(&mut raw) }, CALL)?;
        let Some(e) = raw else {
            return Err(Error::runtime(
                crate::error::HRESULT(KnownHresult::E_POINTER as i32),
                CALL,
            ));
        };
        list.clear();
        list.serial = self.serial;
        loop {
            let spare = list.spare();
            if spare.is_empty() {
                let mut total = 0u32;
                if e.get_count(&mut total).0 >= 0 {
                    list.overflow = (total as usize).saturating_sub(list.len());
                }
                break;
            }
            let mut fetched = 0u32;
            let want = spare.len().min(u32::MAX as usize) as u32;
            // SAFETY: [buffer-protocol] `spare` has room for `want` ThreadIDs.
            let hr = unsafe { e.next(want, spare.as_mut_ptr(), &mut fetched) };
            check(
                hr,
                <clrprof_sys::ICorProfilerThreadEnum as RawProfilerEnum>::NEXT,
            )?;
            list.added(fetched as usize);
            if fetched < want {
                break;
            }
        }
        Ok(())
    }

    // provenance: suspension-partners
    /// Walks thread number `index` of `list` (listed by
    /// [`enum_threads`](Self::enum_threads) during *this* suspension), unless
    /// `gate` says it was destroyed (then `Ok(None)`).
    pub fn walk(
        &self,
        list: &ThreadList,
        index: usize,
        gate: &ThreadGate,
        options: WalkOptions,
        mut visit: impl FnMut(Frame<'_>) -> Walk,
    ) -> Result<Option<WalkEnd>> {
        if list.serial != self.serial {
            return Err(Error::Usage(
                "that thread list was not filled during this suspension".to_string(),
            ));
        }
        if !gate.hears(self.thread.info.runtime_slot()) {
            return Err(Error::WrongPartner {
                call: "stackwalk::RuntimeSuspension::walk",
                why: "the thread gate was registered with another runtime, whose \
                      ThreadDestroyed it hears instead of this one's; register a gate in each \
                      runtime's Initialize"
                    .to_string(),
            });
        }
        let Some(thread) = list.threads().nth(index) else {
            return Err(Error::InvalidArgument("thread index beyond the list"));
        };
        let Some(_entry) = gate.enter(self.thread.walker, thread) else {
            return Ok(None);
        };
        // SAFETY: [thread-alive, suspension] the ID was listed by EnumThreads during this suspension (the
        // thread store cannot delete a Thread while it is held), and the gate
        // entry keeps its ThreadDestroyed from returning until the walk ends.
        unsafe { do_stack_snapshot(&self.thread.info, thread.0, options, None, &mut visit) }
            .map(Some)
    }

    // provenance: suspension-partners
    /// Walks thread `index` of `list` into `buffer` as one [`super::StackSample`]
    /// (leaf first, unmanaged runs as `RawFunctionId(0)`), allocating nothing.
    /// `Ok(false)` when the thread was skipped (destroyed, or no room in the
    /// buffer); an error when the runtime refused to walk it (e.g. a thread
    /// it cannot walk at this moment).
    pub fn sample_into(
        &self,
        list: &ThreadList,
        index: usize,
        gate: &ThreadGate,
        buffer: &mut FrameBuffer,
    ) -> Result<bool> {
        let Some(thread) = list.threads().nth(index) else {
            return Ok(false);
        };
        if !buffer.begin_walked(thread, self.thread.info.runtime_slot()) {
            return Ok(false);
        }
        let walked = self.walk(list, index, gate, WalkOptions::default(), |frame| {
            super::push_frame(buffer, &frame)
        });
        match walked {
            Ok(Some(_)) => {
                buffer.set_context(self.context_of(list, thread, gate));
                Ok(true)
            }
            Ok(None) => {
                buffer.abandon();
                Ok(false)
            }
            Err(e) => {
                buffer.abandon();
                Err(e)
            }
        }
    }
}

impl RuntimeSuspension<'_> {
    // provenance: suspension-partners
    /// The trace context of `thread` (listed in `list` during this
    /// suspension), read from its record ([`crate::context`]). The record is
    /// the one the thread registry ([`super::threads`]) holds for the
    /// thread, when the registry runs for this runtime (the signal sampler's
    /// primitives, Linux); elsewhere (Windows, or no registry) the record of
    /// its OS thread: `GetThreadInfo` (no lock, any mode) gives the OS
    /// thread, the record is found and read without allocating or locking.
    /// `None` when no thread has a record, the thread was destroyed, or it
    /// has no context.
    fn context_of(
        &self,
        list: &ThreadList,
        thread: RawThreadId,
        gate: &ThreadGate,
    ) -> Option<crate::context::TraceContext> {
        if !crate::context::any_records() || list.serial != self.serial {
            return None;
        }
        if let Some(registered) =
            super::threads::context_of(self.thread.info.runtime_slot().0, thread.0)
        {
            return registered;
        }
        let _entry = gate.enter(self.thread.walker, thread)?;
        let info1 = self.thread.info.raw_info1().ok()?;
        let mut os_thread = 0u32;
        // SAFETY: [thread-alive, suspension, plain-call] the ID was listed by EnumThreads during this
        // suspension (the thread store cannot delete a Thread while it is held), and the gate entry
        // keeps its ThreadDestroyed from returning until the call ends; valid out pointer.
        let hr = unsafe { info1.GetThreadInfo(thread.0, &mut os_thread) };
        if hr.0 < 0 {
            return None;
        }
        crate::context::record_of_os_thread(u64::from(os_thread))?.snapshot()
    }
}

impl Drop for RuntimeSuspension<'_> {
    fn drop(&mut self) {
        const CALL: &str = "ICorProfilerInfo10::ResumeRuntime";
        // Through the hold: the runtime is not retired until it is dropped,
        // after this (a retiring callback waits), so a suspension always
        // ends.
        if let Ok(i10) = self.live.info10(CALL) {
            // SAFETY: [suspension, plain-call] no arguments; pairs the SuspendRuntime that made this
            // guard; the runtime's object exists while `live` is held.
            let hr = unsafe { i10.ResumeRuntime() };
            if hr.0 < 0 {
                log::error!("{CALL} failed with {:#010x}", hr.0 as u32);
            }
        }
        SUSPENSIONS_HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

#[cfg(all(test, feature = "fake-runtime"))]
mod tests {
    use crate::error::{Error, HRESULT};
    use crate::testing::fake::FakeRuntime;

    /// Route 7 of the fourth review: a forced collection asked for while
    /// this thread holds the runtime suspended, through the suspension's
    /// `info()` or a kept handle, is refused before the runtime is called;
    /// after the suspension it is made.
    #[test]
    fn force_gc_is_refused_while_this_thread_holds_a_suspension() {
        let _serial = crate::thread::TEST_REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fake = FakeRuntime::with_info_version(10);
        fake.fail("SuspendRuntime", HRESULT(0));
        fake.fail("ResumeRuntime", HRESULT(0));
        // SAFETY: [test-fake] the fake's objects describe memory this test owns.
        let handle = unsafe { fake.runtime_handle(false) };
        let probe = super::spawn_sampling_thread(&handle, "unit-test-forcegc", 0, |thread| {
            let kept = thread.runtime().clone();
            let suspension = thread.suspend_runtime().expect("suspended");
            let via_info = suspension.info().force_gc();
            let via_kept = kept.force_gc();
            drop(suspension);
            (via_info, via_kept, thread.runtime().force_gc())
        })
        .unwrap();
        let (via_info, via_kept, after) = probe.join().unwrap().unwrap();
        for refused in [via_info, via_kept] {
            assert!(
                matches!(&refused, Err(Error::WouldDeadlock { call: "ICorProfilerInfo2::ForceGC", why })
                    if why.starts_with("this thread holds a runtime suspension")),
                "{refused:?}"
            );
        }
        after.unwrap();
        assert_eq!(
            fake.call_count("ForceGC"),
            1,
            "only the call after the suspension"
        );
    }
}

/// `EnumJITedFunctions` made inside a runtime suspension on a new SDK
/// sampling thread, for callers whose scope cannot prove that the runtime
/// cannot suspend (see `info::jit`'s `CODE_HEAP_WALK`): the walk of the
/// code heaps then never overlaps the runtime's own suspension in which a
/// collectible context's code heaps are taken away. The enumerator holds a
/// copy of the list, read after the runtime resumed. The caller waits for
/// the thread, so it must be a thread that does not keep the runtime from
/// suspending (it is refused in a scope that does, where the caller can
/// enumerate directly).
pub(crate) fn enum_jited_functions_suspended(
    info: &ProfilerInfo<'_>,
) -> Result<Vec<crate::info::JitedFunction>> {
    const CALL: &str = "ICorProfilerInfo3::EnumJITedFunctions";
    if info.suspensions_excluded() {
        return Err(Error::Usage(format!(
            "{CALL} inside a suspension of its own from a scope that keeps the runtime from \
             suspending would wait for ever; call ProfilerInfo::enum_jited_functions there"
        )));
    }
    let thread = spawn_sampling_thread(&info.handle(), "clrprof-jit-enum", 0, |thread| {
        // A GC (or another suspension) in progress refuses SuspendRuntime
        // for a moment; the unload app saw about one refusal in four.
        let mut tries = 0u32;
        let enumerator = loop {
            match thread.suspend_runtime() {
                Ok(suspension) => break suspension.info().enum_jited_functions()?,
                Err(e) if tries < 1000 && retry_suspension(&e) => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => return Err(e),
            }
        };
        // The runtime is running again: the enumerator is a copy.
        enumerator.collect::<Result<Vec<_>>>()
    })
    .map_err(|e| Error::Os {
        call: "spawn (the thread of a suspended EnumJITedFunctions)",
        code: e.raw_os_error().unwrap_or(0) as u32,
    })?;
    match thread.join() {
        Ok(result) => result?,
        Err(_) => Err(Error::Usage(format!(
            "{CALL}: the SDK thread that made it panicked"
        ))),
    }
}

/// Whether `SuspendRuntime` refused only for now (a suspension or a GC in
/// progress).
fn retry_suspension(e: &Error) -> bool {
    hr_is(e, KnownHresult::CORPROF_E_SUSPENSION_IN_PROGRESS)
}
