//! Stack walks: `ICorProfilerInfo2::DoStackSnapshot`, made safe.
//!
//! Four kinds of walk, each with its own entry point:
//!
//! * **Synchronous** ([`ProfilerInfo::walk_current_thread`]): the calling
//!   thread walks its own stack, from inside a callback. Works on every
//!   runtime that has `ICorProfilerInfo2`.
//! * **Cross-thread under a runtime suspension**
//!   ([`RuntimeSuspension::walk`]): with `ICorProfilerInfo10`
//!   (`SuspendRuntime` / `ResumeRuntime`; .NET Core 3.0 and later — seen
//!   working on Linux with 3.1.23 and 8.0.4) a sampling
//!   thread stops every managed thread at a safe point, lists them with
//!   `ICorProfilerInfo4::EnumThreads` and walks each one. This is the kind of
//!   walk that works on Linux. Threads that are not running managed code
//!   at that moment (waiting in the runtime or the OS) are refused by the
//!   runtime (`E_FAIL` on 3.1.23 and 8.0.4); the sampler counts them as
//!   refused.
//! * **Asynchronous** ([`ProfilerInfo::walk_other_thread`]): the runtime
//!   suspends just the target thread for the walk. CoreCLR implements this
//!   only on Windows; elsewhere it refuses (`E_NOTIMPL` on Linux 3.1.23 and
//!   8.0.4), and the SDK turns the refusal into an
//!   [`Error::AsyncWalkUnsupported`] that says
//!   what to use instead (tested on both Linux legs). On Windows a profiler that suspended a thread itself can
//!   also seed the walk with the thread's register context ([`seeded`]).
//!
//! * **By signal, on the thread itself** ([`signals`], Linux on x86-64 and
//!   aarch64): no runtime call at all. A thread interrupted by the SDK's
//!   `SIGPROF` takes its own stack by frame pointers ([`fpwalk`]), every
//!   word checked against the stack bounds the thread registry
//!   ([`threads`]) learned on the thread, into a preallocated ring; the
//!   sampling thread places the instruction pointers with the [`CodeMap`]
//!   (every native code version the JIT, ReJIT and ReadyToRun callbacks
//!   reported, emptied behind the [`UnloadFence`]) and names them like any
//!   walked frame. The rules of the handler (async-signal-safe, the
//!   runtime's own signals, blocking calls, fault handling) are in
//!   [`signals`].
//!
//! The runtime's walks call a closure once per frame ([`Frame`]): a managed function
//! (its `FunctionID`), or a run of unmanaged frames (`FunctionID` 0, which
//! the SDK reports as [`Frame::function`] `None`). The closure returns
//! [`Walk::Continue`] or [`Walk::Stop`]; stopping makes the SDK's callback
//! return `S_FALSE`, the runtime ends the walk with
//! `CORPROF_E_STACKSNAPSHOT_ABORTED`, and the walk reports
//! [`WalkEnd::Stopped`] (not an error).
//!
//! # The rules of walking another thread's stack, and where they live
//!
//! The profiling API leaves a set of rules to the profiler author (David
//! Broman, *Profiler Stack Walking: Basics and Beyond*; the comments on
//! `InitializeCurrentThread` in the runtime). clrprof enforces them by
//! construction:
//!
//! 1. **The sampling thread is the SDK's.** Only a [`SamplingThread`] can
//!    suspend the runtime, and only [`spawn_sampling_thread`] makes one: it
//!    starts an SDK thread ([`crate::thread::spawn`], so a detach waits for
//!    it), which never runs managed code (it is a native thread the runtime
//!    has never seen; its first `GetCurrentThreadID` answers
//!    `CORPROF_E_NOT_MANAGED_THREAD`, which the SDK checks).
//! 2. **Its first Info call comes before any suspension.** The first call a
//!    thread makes into the runtime sets up thread-local state and may take
//!    locks (loader lock, heap lock) that a suspended thread could hold.
//!    [`spawn_sampling_thread`] calls `InitializeCurrentThread` (Info4; on
//!    older runtimes `GetCurrentThreadID`) before handing over the
//!    [`SamplingThread`].
//! 3. **`ThreadDestroyed` waits for walks of the dying thread.** After
//!    `ThreadDestroyed` returns the `ThreadID` is gone; walking it would read
//!    freed memory. A [`ThreadGate`] records the thread being walked in an
//!    atomic; the gate is an SDK component ([`ThreadGate::register`], and
//!    the sampler's own), so the SDK delivers `ThreadDestroyed` to it, which
//!    waits until that walk is over and keeps the thread from being walked
//!    again.
//! 4. **No profiler lock across Info calls that can trigger a GC.** A
//!    GC-triggering call (or a suspension: `SuspendRuntime` waits for a GC in
//!    progress to end) can wait for a thread that is itself blocked in a
//!    profiler callback on the profiler's lock, which deadlocks. The Info
//!    methods the runtime marks as possibly triggering a GC include
//!    `ForceGC`, `RequestReJIT`/`RequestRevert`, `ApplyMetaData`,
//!    `GetFunctionFromIP2`, `EnumNgenModuleMethodsInliningThisMethod` and the
//!    EventPipe session calls; `SuspendRuntime` itself waits like a GC. The
//!    sampler therefore shares nothing with callbacks but atomics: the
//!    [`ThreadGate`], its stop flag and its counters.
//! 5. **Nothing allocates while threads are suspended.** A thread suspended
//!    at an arbitrary point may hold the allocator's lock. Frames go into a
//!    [`FrameBuffer`] and thread lists into a [`ThreadList`], both allocated
//!    before the suspension, with fixed capacity (a stack deeper than the
//!    buffer is cut at the leaf end and marked truncated). Names are resolved
//!    only after `ResumeRuntime`.

use crate::error::{check, Error, KnownHresult, Result, HRESULT};
use crate::guard::guard;
use crate::ids::{FunctionId, RawFunctionId, ThreadId};
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;
use core::ffi::c_void;
use core::marker::PhantomData;

mod buffer;
pub mod codemap;
pub mod fpwalk;
mod gate;
mod leaf;
pub(crate) mod naming;
pub mod seeded;
pub mod signals;
pub(crate) mod suspend;
pub mod threads;

pub use buffer::{FrameBuffer, SampleKind, StackSample, ThreadList};
pub use codemap::{CodeMap, CodeMapStats};
pub use fpwalk::StackBounds;
pub use gate::ThreadGate;
pub use naming::{
    FrameName, FrameNamer, FrameRef, UnloadFence, UNKNOWN_FRAME, UNMANAGED_FRAME, UNPLACED,
    UNPLACED_FRAME,
};
pub use signals::{SignalConfig, SignalSampling, SignalStats, SignalTick};
pub use suspend::{spawn_sampling_thread, RuntimeSuspension, SamplingThread};

/// What the walk closure wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// Report the next frame.
    Continue,
    /// End the walk here (the SDK's callback returns `S_FALSE`).
    Stop,
}

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// Every frame was reported.
    Complete,
    /// The closure returned [`Walk::Stop`]; the runtime answered
    /// `CORPROF_E_STACKSNAPSHOT_ABORTED` (or `S_FALSE`), which is not an error.
    Stopped,
}

/// A `COR_PRF_FRAME_INFO`: opaque, valid only during the frame callback
/// (corprof.idl), hence the lifetime. Pass it to `GetFunctionInfo2` for the
/// exact generic instantiation of the frame's method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotFrameInfo<'w> {
    raw: sys::COR_PRF_FRAME_INFO,
    _walk: PhantomData<&'w ()>,
}

impl SnapshotFrameInfo<'_> {
    /// The raw handle, for the raw API during the callback.
    pub fn as_sys(self) -> sys::COR_PRF_FRAME_INFO {
        self.raw
    }
}

impl crate::info::sealed::Sealed for SnapshotFrameInfo<'_> {}

impl crate::info::FrameHandle for SnapshotFrameInfo<'_> {
    fn raw_frame(&self) -> sys::COR_PRF_FRAME_INFO {
        self.raw
    }
}

/// One frame of a walk: a managed function, or a run of unmanaged frames.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'w> {
    /// The managed function, or `None` for a run of unmanaged frames (the
    /// runtime's `FunctionID` 0).
    pub function: Option<FunctionId<'w>>,
    /// The native instruction pointer in this frame.
    pub ip: usize,
    /// The frame's `COR_PRF_FRAME_INFO`.
    pub frame_info: SnapshotFrameInfo<'w>,
    /// The frame's register context (a platform `CONTEXT`), only when the walk
    /// asked for [`WalkOptions::register_context`].
    pub context: Option<&'w [u8]>,
}

impl Frame<'_> {
    /// The function as a storable raw ID (`RawFunctionId(0)` for unmanaged).
    pub fn raw_function(&self) -> RawFunctionId {
        self.function.map(|f| f.to_raw()).unwrap_or_default()
    }
}

/// Options of a walk (`COR_PRF_SNAPSHOT_INFO`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkOptions {
    /// `COR_PRF_SNAPSHOT_REGISTER_CONTEXT`: hand each frame its register context.
    pub register_context: bool,
}

impl WalkOptions {
    fn flags(self) -> u32 {
        if self.register_context {
            sys::COR_PRF_SNAPSHOT_REGISTER_CONTEXT
        } else {
            sys::COR_PRF_SNAPSHOT_DEFAULT
        }
    }
}

/// What the trampoline needs: the closure and what happened to it.
struct WalkState<'c> {
    visit: &'c mut dyn FnMut(Frame<'_>) -> Walk,
    stopped: bool,
    panicked: bool,
}

/// The `StackSnapshotCallback` the SDK hands the runtime.
unsafe extern "system" fn snapshot_frame(
    function: sys::FunctionID,
    ip: usize,
    frame_info: sys::COR_PRF_FRAME_INFO,
    context_size: u32,
    context: *mut u8,
    client_data: *mut c_void,
) -> HRESULT {
    const S_FALSE: HRESULT = HRESULT(KnownHresult::S_FALSE as i32);
    if client_data.is_null() {
        return S_FALSE;
    }
    // SAFETY: [stack-snapshot, callback-args] `client_data` is the `&mut WalkState` that `do_stack_snapshot`
    // passed to DoStackSnapshot; the runtime hands it back unchanged, on the
    // walking thread, while that call is still running (corprof.idl).
    let state = unsafe { &mut *(client_data as *mut WalkState<'_>) };
    let context = if context.is_null() || context_size == 0 {
        None
    } else {
        // SAFETY: [stack-snapshot, callback-args] the runtime passes a CONTEXT of `context_size` bytes, valid
        // for the duration of this callback (corprof.idl, StackSnapshotCallback).
        Some(unsafe { core::slice::from_raw_parts(context as *const u8, context_size as usize) })
    };
    let frame = Frame {
        function: if function == 0 {
            None
        } else {
            // SAFETY: [stack-snapshot, id-scope] a function with a frame on a live stack is loaded; its
            // ID is valid at least for this callback, the lifetime the frame has.
            Some(unsafe { FunctionId::from_sys(function) })
        },
        ip,
        frame_info: SnapshotFrameInfo {
            raw: frame_info,
            _walk: PhantomData,
        },
        context,
    };
    let visit = &mut *state.visit;
    match guard("StackSnapshotCallback", None, || Some(visit(frame))) {
        Some(Walk::Continue) => HRESULT(0),
        Some(Walk::Stop) => {
            state.stopped = true;
            S_FALSE
        }
        None => {
            state.panicked = true;
            S_FALSE
        }
    }
}

/// Calls `DoStackSnapshot` with the SDK's callback.
///
/// # Safety
/// `thread` must be 0 (the calling thread) or a `ThreadID` valid for the
/// whole call (see the [module rules](self)); `context`, when given, must be
/// a `CONTEXT` of the platform.
pub(crate) unsafe fn do_stack_snapshot(
    info: &RuntimeHandle,
    thread: usize,
    options: WalkOptions,
    context: Option<&[u8]>,
    visit: &mut dyn FnMut(Frame<'_>) -> Walk,
) -> Result<WalkEnd> {
    const CALL: &str = "ICorProfilerInfo2::DoStackSnapshot";
    let i2 = info.raw_info2(CALL)?;
    let mut state = WalkState {
        visit,
        stopped: false,
        panicked: false,
    };
    let (ctx_ptr, ctx_len) = match context {
        Some(c) => (c.as_ptr(), c.len() as u32),
        None => (core::ptr::null(), 0),
    };
    // SAFETY: [stack-snapshot, ffi-abi, caller-contract] the callback matches StackSnapshotCallback; `state` outlives the
    // call and is only used on this thread through the client data; the
    // caller guarantees the thread and the context.
    let hr = unsafe {
        i2.DoStackSnapshot(
            thread,
            Some(snapshot_frame),
            options.flags(),
            &mut state as *mut WalkState<'_> as *mut c_void,
            ctx_ptr,
            ctx_len,
        )
    };
    if state.panicked {
        return Err(Error::Usage(
            "the stack-walk closure panicked; the walk was stopped (the panic is in the log)"
                .to_string(),
        ));
    }
    if state.stopped
        && (hr.0 == KnownHresult::CORPROF_E_STACKSNAPSHOT_ABORTED as i32
            || hr.0 == KnownHresult::S_FALSE as i32)
    {
        return Ok(WalkEnd::Stopped);
    }
    check(hr, CALL)?;
    Ok(WalkEnd::Complete)
}

impl<'s> ProfilerInfo<'s> {
    /// `DoStackSnapshot` of the calling thread's own stack (a synchronous
    /// walk: a null `ThreadID`), leaf first.
    ///
    /// Call it from a callback on a managed thread (e.g. `ExceptionThrown`,
    /// `ObjectAllocated`, an ELT hook). The profiler must have asked for
    /// [`EventMask::ENABLE_STACK_SNAPSHOT`](crate::event_mask::EventMask::ENABLE_STACK_SNAPSHOT)
    /// (otherwise the runtime answers `CORPROF_E_INCONSISTENT_WITH_FLAGS`).
    ///
    /// There is no walk from inside an ELT hook: the hooks get no
    /// `ProfilerInfo`. The runtime's own answer there (a current-thread
    /// `DoStackSnapshot` through the raw interface from an enter hook,
    /// measured by the scenario "version rules: DoStackSnapshot of the current
    /// thread from an ELT enter hook"): from fast-path hooks `E_FAIL` on
    /// every runtime (.NET Core 3.1.3, 8.0.34, 9.0.23, 10.0.15, 11.0.0);
    /// from WithInfo hooks the stack up to the hooked method on 3.1.3,
    /// 8.0.34 and 9.0.23, and `E_FAIL` from 10.0.15 on, 11.0.0 included, on
    /// Linux x64 and on Windows x64 under Wine (dotnet/runtime issue
    /// 130220; its fix, PR 132301, was closed unmerged). Keep a shadow
    /// stack ([`crate::elt::shadow_stack`]) for stacks at ELT time.
    pub fn walk_current_thread(
        &self,
        options: WalkOptions,
        mut visit: impl FnMut(Frame<'_>) -> Walk,
    ) -> Result<WalkEnd> {
        // SAFETY: [stack-snapshot] thread 0 means the calling thread, valid while it runs; no context.
        unsafe { do_stack_snapshot(self, 0, options, None, &mut visit) }
    }

    // provenance: suspension-partners
    /// `DoStackSnapshot` of another thread without suspending the runtime (an
    /// asynchronous walk: the runtime suspends only `thread` for the walk),
    /// into `buffer` as one [`StackSample`] (leaf first, unmanaged runs as
    /// `RawFunctionId(0)`).
    ///
    /// No profiler code runs during the walk: the runtime calls the frame
    /// callback while `thread` is OS-suspended (`SuspendThread`), possibly
    /// holding the heap lock or any other lock, so a callback that
    /// allocated, logged or locked could wait forever for the thread it
    /// stopped. The SDK's own callback only writes into the preallocated
    /// `buffer`; read the frames ([`FrameBuffer::frames`]) after this
    /// returns. A stack deeper than the buffer allows is cut at the leaf
    /// end ([`StackSample::truncated`], [`WalkEnd::Stopped`]). Name frames
    /// from a sampling thread with an [`UnloadFence`], or from the
    /// [`NameCache`](crate::names::NameCache)'s cached names.
    ///
    /// CoreCLR supports this on Windows only. On other platforms the runtime
    /// refuses, and this returns [`Error::AsyncWalkUnsupported`] with the
    /// runtime's code, whose message says what works instead: [`RuntimeSuspension::walk`] (Info10), or ELT
    /// shadow stacks on older runtimes. A refused or failed walk leaves
    /// nothing in `buffer`; a buffer with no room for another stack is an
    /// [`Error::Usage`].
    ///
    /// The caller must keep `thread` walkable: the walk must end before the
    /// profiler's `thread_destroyed` callback for that thread returns (use a
    /// [`ThreadGate`]), which is why `thread` borrows the caller's scope.
    pub fn walk_other_thread(
        &self,
        thread: ThreadId<'_>,
        options: WalkOptions,
        buffer: &mut FrameBuffer,
    ) -> Result<WalkEnd> {
        if !buffer.begin_walked(thread.to_raw(), self.runtime_slot()) {
            return Err(Error::Usage(
                "the FrameBuffer has no room for another stack; clear it first".to_string(),
            ));
        }
        // SAFETY: [id-scope, stack-snapshot] `thread` is valid for this call (typed ID borrowing the caller's scope).
        let result = unsafe {
            do_stack_snapshot(self, thread.as_sys(), options, None, &mut |frame| {
                push_frame(buffer, &frame)
            })
        };
        if result.is_err() {
            buffer.abandon();
        }
        match result {
            Err(Error::Runtime { hr, .. }) if !cfg!(windows) => {
                Err(Error::AsyncWalkUnsupported { hr })
            }
            other => other,
        }
    }
}

/// The SDK's frame callback for walks into a [`FrameBuffer`]: pushes the
/// frame's function (0 for an unmanaged run) and stops when the stack is
/// full. Allocation-free and lock-free (the buffer's memory is reserved).
pub(crate) fn push_frame(buffer: &mut FrameBuffer, frame: &Frame<'_>) -> Walk {
    let function = frame
        .function
        .map(|f| f.to_raw())
        .unwrap_or(RawFunctionId(0));
    if buffer.push_walked(function) {
        Walk::Continue
    } else {
        Walk::Stop
    }
}
