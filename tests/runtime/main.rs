//! Real-runtime tests: every scenario on every runtime leg.
//!
//! Run with `cargo test -p clrprof-tests --test runtime [-- --strict] [FILTER]`
//! after `cargo xtask provision` (or let `cargo xtask test` do both).

mod attach;
mod book;
mod broken;
mod conformance;
mod doctor;
mod elt;
mod eventpipe;
mod events;
mod exceptions;
mod exits;
mod frames;
mod heap;
mod heap_snapshot;
mod hello;
mod il;
mod info;
mod info_newer;
mod inliners;
mod jit_tracer;
mod large;
mod lifecycle;
mod live_heap;
mod modern;
mod mux;
mod notification;
mod otlp_protoc;
mod otlp_traces;
mod panics;
mod pprof;
mod profiles;
mod provenance;
mod provisioning;
mod readers;
mod reentrancy;
mod review36;
mod review42_fresh;
mod review42_mux;
mod sampling;
mod sampling_signals;
mod scopes;
mod server;
mod signals;
mod sxs;
mod torture;
mod tracecontext;
mod tracecontext_e2e;
mod tracers;
mod unload;
mod versions;
mod wine;
mod wrap;

use clrprof_testing::harness::Harness;

fn main() {
    let mut harness = Harness::new(concat!(env!("CARGO_MANIFEST_DIR"), "/apps"))
        .workspace(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let scenarios = hello::scenarios()
        .into_iter()
        .chain(exceptions::scenarios())
        .chain(events::scenarios())
        .chain(tracers::scenarios())
        .chain(jit_tracer::scenarios())
        .chain(il::scenarios())
        .chain(panics::scenarios())
        .chain(panics::signature_scenarios())
        .chain(sampling::scenarios())
        .chain(sampling_signals::scenarios())
        .chain(tracecontext::scenarios())
        .chain(tracecontext_e2e::scenarios())
        .chain(pprof::scenarios())
        .chain(profiles::scenarios())
        .chain(live_heap::scenarios())
        .chain(heap_snapshot::scenarios())
        .chain(provisioning::scenarios())
        .chain(sxs::scenarios())
        .chain(broken::scenarios())
        .chain(attach::scenarios())
        .chain(info::scenarios())
        .chain(info_newer::scenarios())
        .chain(notification::scenarios())
        .chain(elt::scenarios())
        .chain(unload::scenarios())
        .chain(exits::scenarios())
        .chain(exits::python_scenarios())
        .chain(signals::scenarios())
        .chain(heap::scenarios())
        .chain(eventpipe::scenarios())
        .chain(inliners::scenarios())
        .chain(mux::scenarios())
        .chain(doctor::scenarios())
        .chain(book::scenarios())
        .chain(mux::python_scenarios())
        .chain(conformance::scenarios())
        .chain(scopes::scenarios())
        .chain(server::scenarios())
        .chain(readers::scenarios())
        .chain(lifecycle::scenarios())
        .chain(frames::scenarios())
        .chain(wrap::scenarios())
        .chain(modern::scenarios())
        .chain(large::scenarios())
        .chain(provenance::scenarios())
        .chain(review36::scenarios())
        .chain(reentrancy::scenarios())
        .chain(review42_mux::scenarios())
        .chain(review42_fresh::scenarios())
        .chain(versions::scenarios())
        .chain(torture::scenarios())
        .chain(wine::scenarios());
    for scenario in scenarios {
        harness = harness.scenario(scenario);
    }
    harness.main()
}
