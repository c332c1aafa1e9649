//! Seeded walks of a thread the profiler suspended itself (Windows only).
//!
//! On Windows a sampler can stop one thread with `SuspendThread`, read its
//! registers with `GetThreadContext` and hand them to `DoStackSnapshot` as
//! the seed of the walk. The runtime only accepts a seed whose instruction
//! pointer is in managed (jitted or ready-to-run) code; a seed in unmanaged
//! code is refused with `CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX`.
//!
//! So when the suspended thread is in unmanaged code at the top of its stack
//! (the runtime, the OS, a P/Invoke target), [`walk_suspended_thread`]
//! records that run of unmanaged frames first, as one frame with no
//! function (`RawFunctionId(0)`; the thread's instruction pointer is
//! [`SuspendedThread::instruction_pointer`]), and then lets the runtime
//! walk unseeded, starting at the last managed frame it recorded on the
//! transition out of managed code. A profiler that wants the native frames
//! in between unwinds them itself (e.g. `RtlVirtualUnwind`) from the same
//! context, which [`SuspendedThread::context`] exposes after the walk.
//!
//! Between `SuspendThread` and `ResumeThread` no profiler code runs and
//! nothing is allocated (the suspended thread may hold the heap lock or any
//! other lock): the `CONTEXT` lives in a [`SuspendedThread`] made
//! beforehand, and the frames go into a [`FrameBuffer`] reserved
//! beforehand, read after the thread runs again. The runtime itself also
//! suspends the thread for the walk; the suspend counts nest.
//!
//! On other platforms the functions exist and return [`Error::Usage`].

#[cfg(windows)]
use super::{do_stack_snapshot, WalkOptions};
use super::{FrameBuffer, ThreadGate, WalkEnd};
use crate::error::{Error, Result};
use crate::ids::ThreadId;
use crate::info::ProfilerInfo;

/// Size of the x86_64 Windows `CONTEXT` structure.
pub const CONTEXT_SIZE: usize = 1232;

/// A 16-byte aligned `CONTEXT` buffer, reused across samples.
#[repr(C, align(16))]
pub struct SuspendedThread {
    context: [u8; CONTEXT_SIZE],
}

impl Default for SuspendedThread {
    fn default() -> Self {
        Self::new()
    }
}

impl SuspendedThread {
    /// A zeroed context buffer.
    pub const fn new() -> Self {
        SuspendedThread {
            context: [0; CONTEXT_SIZE],
        }
    }

    /// The raw `CONTEXT` of the last suspension.
    pub fn context(&self) -> &[u8] {
        &self.context
    }

    /// The instruction pointer (`Rip`, offset 0xF8) of the last suspension.
    pub fn instruction_pointer(&self) -> usize {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.context[0xF8..0x100]);
        u64::from_le_bytes(b) as usize
    }
}

#[cfg(all(windows, target_arch = "x86_64"))]
mod os {
    use core::ffi::c_void;
    pub const THREAD_SUSPEND_RESUME: u32 = 0x0002;
    pub const THREAD_GET_CONTEXT: u32 = 0x0008;
    pub const THREAD_QUERY_INFORMATION: u32 = 0x0040;
    /// CONTEXT_AMD64 | CONTEXT_CONTROL | CONTEXT_INTEGER.
    pub const CONTEXT_CONTROL_INTEGER: u32 = 0x0010_0003;
    /// Offset of `ContextFlags` in the x86_64 CONTEXT.
    pub const CONTEXT_FLAGS_OFFSET: usize = 0x30;
    #[link(name = "kernel32")]
    extern "system" {
        pub fn OpenThread(access: u32, inherit: i32, thread_id: u32) -> *mut c_void;
        pub fn SuspendThread(thread: *mut c_void) -> u32;
        pub fn ResumeThread(thread: *mut c_void) -> u32;
        pub fn GetThreadContext(thread: *mut c_void, context: *mut u8) -> i32;
        pub fn CloseHandle(handle: *mut c_void) -> i32;
        fn GetLastError() -> u32;
    }

    /// The calling thread's last Win32 error.
    pub fn last_error() -> u32 {
        // SAFETY: [os-api] no arguments; reads the calling thread's error slot.
        unsafe { GetLastError() }
    }
}

/// A thread handle from `OpenThread`, closed when dropped.
#[cfg(all(windows, target_arch = "x86_64"))]
struct Handle(*mut core::ffi::c_void);

#[cfg(all(windows, target_arch = "x86_64"))]
impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: [os-api] a handle from OpenThread, closed once.
        unsafe { os::CloseHandle(self.0) };
    }
}

// provenance: suspension-partners
/// Suspends `thread` (its OS thread, from `GetThreadInfo`), reads its
/// registers into `scratch`, walks it seeded from them (or, when it stands in
/// unmanaged code, records that run and walks unseeded; see the module docs)
/// into `buffer` as one [`StackSample`](super::StackSample), and resumes it.
/// `walker` is this caller's [`ThreadGate`] slot. `Ok(None)` when the
/// thread was destroyed meanwhile; a buffer with no room for another stack
/// is an [`Error::Usage`]; a failed walk leaves nothing in `buffer`.
#[cfg(all(windows, target_arch = "x86_64"))]
pub fn walk_suspended_thread(
    info: &ProfilerInfo,
    thread: ThreadId<'_>,
    gate: &ThreadGate,
    walker: usize,
    scratch: &mut SuspendedThread,
    buffer: &mut FrameBuffer,
) -> Result<Option<WalkEnd>> {
    if !gate.hears(info.runtime_slot()) {
        return Err(Error::WrongPartner {
            call: "stackwalk::seeded::walk_suspended_thread",
            why: "the thread gate was registered with another runtime, whose ThreadDestroyed \
                  it hears instead of this one's; register a gate in each runtime's Initialize"
                .to_string(),
        });
    }
    let os_id = info.thread_info(thread)?;
    let Some(_entry) = gate.enter(walker, thread.to_raw()) else {
        return Ok(None);
    };
    // SAFETY: [os-api] plain values; a null handle is checked below.
    let handle = unsafe {
        os::OpenThread(
            os::THREAD_SUSPEND_RESUME | os::THREAD_GET_CONTEXT | os::THREAD_QUERY_INFORMATION,
            0,
            os_id,
        )
    };
    if handle.is_null() {
        return Err(Error::Os {
            call: "OpenThread",
            code: os::last_error(),
        });
    }
    let handle = Handle(handle);
    if !buffer.begin_walked(thread.to_raw(), info.runtime_slot()) {
        return Err(Error::Usage(
            "the FrameBuffer has no room for another stack; clear it first".to_string(),
        ));
    }
    let result = walk_while_suspended(info, thread, &handle, scratch, buffer);
    if result.is_err() {
        buffer.abandon();
    }
    result.map(Some)
}

/// The part of [`walk_suspended_thread`] between `SuspendThread` and
/// `ResumeThread`: only SDK code, no allocation.
#[cfg(all(windows, target_arch = "x86_64"))]
fn walk_while_suspended(
    info: &ProfilerInfo,
    thread: ThreadId<'_>,
    handle: &Handle,
    scratch: &mut SuspendedThread,
    buffer: &mut FrameBuffer,
) -> Result<WalkEnd> {
    use crate::error::KnownHresult;
    // SAFETY: [os-api] a valid thread handle with THREAD_SUSPEND_RESUME.
    if unsafe { os::SuspendThread(handle.0) } == u32::MAX {
        return Err(Error::Os {
            call: "SuspendThread",
            code: os::last_error(),
        });
    }
    struct Resume(*mut core::ffi::c_void);
    impl Drop for Resume {
        fn drop(&mut self) {
            // SAFETY: [os-api] pairs the successful SuspendThread above.
            unsafe { os::ResumeThread(self.0) };
        }
    }
    let _resume = Resume(handle.0);
    scratch.context[os::CONTEXT_FLAGS_OFFSET..os::CONTEXT_FLAGS_OFFSET + 4]
        .copy_from_slice(&os::CONTEXT_CONTROL_INTEGER.to_le_bytes());
    // SAFETY: [os-api, ffi-abi] `scratch.context` is a 16-byte aligned CONTEXT-sized buffer
    // with ContextFlags set; the thread is suspended.
    if unsafe { os::GetThreadContext(handle.0, scratch.context.as_mut_ptr()) } == 0 {
        return Err(Error::Os {
            call: "GetThreadContext",
            code: os::last_error(),
        });
    }
    let ip = scratch.instruction_pointer();
    let managed = info.function_from_ip(ip).is_ok();
    if !managed && !buffer.push_walked(crate::ids::RawFunctionId(0)) {
        return Ok(WalkEnd::Stopped);
    }
    let mut visit = |frame: super::Frame<'_>| super::push_frame(buffer, &frame);
    let seed = managed.then_some(&scratch.context[..]);
    // SAFETY: [thread-alive, stack-snapshot] the thread is valid (typed ID, and the gate holds off its
    // ThreadDestroyed); the seed is the thread's own CONTEXT and points into
    // managed code (checked with GetFunctionFromIP), as the runtime requires.
    let result = unsafe {
        do_stack_snapshot(
            info,
            thread.as_sys(),
            WalkOptions::default(),
            seed,
            &mut visit,
        )
    };
    match result {
        Err(e) if e.hresult().0 == KnownHresult::CORPROF_E_STACKSNAPSHOT_UNMANAGED_CTX as i32 => {
            // The IP left managed code between the check and the walk: walk unseeded.
            // SAFETY: [thread-alive, stack-snapshot] the gate entry taken above still keeps the thread's
            // ThreadDestroyed from returning, so its ThreadID stays valid
            // for the walk; no context is passed.
            unsafe {
                do_stack_snapshot(
                    info,
                    thread.as_sys(),
                    WalkOptions::default(),
                    None,
                    &mut visit,
                )
            }
        }
        other => other,
    }
}

// provenance: suspension-partners
/// On this platform a profiler cannot suspend one thread and seed a walk:
/// always [`Error::Usage`].
#[cfg(not(all(windows, target_arch = "x86_64")))]
pub fn walk_suspended_thread(
    _info: &ProfilerInfo,
    _thread: ThreadId<'_>,
    _gate: &ThreadGate,
    _walker: usize,
    _scratch: &mut SuspendedThread,
    _buffer: &mut FrameBuffer,
) -> Result<Option<WalkEnd>> {
    Err(Error::Usage(
        "seeded walks of a thread suspended by the profiler exist only on Windows x86_64; \
         use RuntimeSuspension::walk (ICorProfilerInfo10) elsewhere"
            .to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_buffer_is_aligned_and_reads_rip() {
        let mut s = SuspendedThread::new();
        assert_eq!(core::mem::align_of::<SuspendedThread>(), 16);
        s.context[0xF8..0x100].copy_from_slice(&0x1234_5678u64.to_le_bytes());
        assert_eq!(s.instruction_pointer(), 0x1234_5678);
    }
}
