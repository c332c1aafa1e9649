// The sampler hears ThreadDestroyed and unloads from the SDK itself, from
// Initialize on: it has no forwarding methods a profiler could forget.
use clrprof_sampler::Sampler;
use clrprof::{ProfilerInfo, ThreadId};

fn forward(sampler: &Sampler, info: &ProfilerInfo, thread: ThreadId<'_>) {
    let _ = info;
    sampler.thread_destroyed(thread);
}

fn main() {}
