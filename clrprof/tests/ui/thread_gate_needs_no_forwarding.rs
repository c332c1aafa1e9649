// A ThreadGate hears ThreadDestroyed from the SDK (ThreadGate::register):
// there is no forwarding method a profiler could forget or call late.
use clrprof::stackwalk::ThreadGate;
use clrprof::ThreadId;

fn forward(gate: &ThreadGate, thread: ThreadId<'_>) {
    gate.thread_destroyed(thread.to_raw());
}

fn main() {}
