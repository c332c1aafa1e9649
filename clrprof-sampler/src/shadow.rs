//! A stack source that reads the ELT shadow stacks instead of walking the
//! runtime's stacks: for runtimes without `ICorProfilerInfo10::SuspendRuntime`
//! (before .NET Core 3.0), or where walks are not wanted.
//!
//! The profiler installs ELT hooks that keep shadow stacks
//! ([`clrprof::elt::shadow_stack`]) during `initialize` — ELT needs
//! `MONITOR_ENTERLEAVE`, which can only be set there — and forwards the
//! exception-unwind callbacks so unwound frames are popped. Each tick then
//! copies every thread's shadow stack through its seqlock: nothing is
//! suspended, the sampled threads never wait, and only hooked (JIT-compiled)
//! frames appear — no native frames and no precompiled framework code.

use super::{StackSource, Tick};
use clrprof::error::Result;
use clrprof::ids::RawThreadId;
use clrprof::stackwalk::{FrameBuffer, SamplingThread, ThreadGate};

/// Samples the shadow stacks that the ELT hooks keep.
#[derive(Default)]
pub struct ShadowStackSource;

impl StackSource for ShadowStackSource {
    fn take(
        &mut self,
        _thread: &mut SamplingThread,
        _gate: &ThreadGate,
        buffer: &mut FrameBuffer,
    ) -> Result<Tick> {
        let mut tick = Tick::default();
        clrprof::elt::shadow_stack::for_each_thread(|os_thread, _stats, frames| {
            if frames.is_empty() {
                return;
            }
            // The OS thread ID stands for the thread: shadow stacks are
            // kept per OS thread, not per managed ThreadID.
            if !buffer.begin(RawThreadId(os_thread as usize)) {
                tick.skipped += 1;
                return;
            }
            // Shadow stacks are root first; samples are leaf first.
            for frame in frames.iter().rev() {
                if !buffer.push(frame.function()) {
                    break;
                }
            }
        });
        Ok(tick)
    }

    fn method(&self) -> &'static str {
        "shadow-stack"
    }
}
