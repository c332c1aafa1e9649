// Only the SDK's sampling thread (a SamplingThread, made by
// spawn_sampling_thread after its first Info call, never a managed thread)
// moves signal samples into a buffer: their frames are named by calling
// the runtime.
use clrprof::stackwalk::{FrameBuffer, SignalSampling};
use clrprof::RuntimeHandle;

fn take(signals: &SignalSampling, runtime: &RuntimeHandle, buffer: &mut FrameBuffer) {
    let _ = signals.take(runtime, buffer, std::time::Duration::from_millis(10));
}

fn main() {}
