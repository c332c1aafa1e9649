//! Real-runtime tests: every scenario on every runtime leg.
//!
//! Run with `cargo test -p clrprof-tests --test runtime [-- --strict] [FILTER]`
//! after `cargo xtask provision` (or let `cargo xtask test` do both).

mod broken;
mod hello;

use clrprof_testing::harness::Harness;

fn main() {
    let mut harness = Harness::new(concat!(env!("CARGO_MANIFEST_DIR"), "/apps"))
        .workspace(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    for scenario in hello::scenarios().into_iter().chain(broken::scenarios()) {
        harness = harness.scenario(scenario);
    }
    harness.main()
}
