//! Project automation: `cargo xtask <command>`.
//!
//! Each command lives in its own module; `main` only dispatches.

mod bench;
mod bench_context;
mod bench_dispatch;
mod bench_elt;
mod bench_gate;
mod bench_heap;
mod bench_memory;
mod bench_mux;
mod bench_profiles;
mod bench_sampler;
mod bench_server;
mod bench_wrap;
mod book;
mod conformance;
mod coverage;
mod cross;
mod demo;
mod gen_mux;
mod gen_sys;
mod ledger;
mod lint;
mod measure;
mod msvc;
mod package;
mod provenance;
mod provision;
mod reentrancy;
mod signals;
mod test;
mod toolchain;
mod workspace;

/// Result type shared by every xtask command.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "usage: cargo xtask <command> [args]

commands:
  test        provision everything, then run every test on every leg
  demo        provision, build the examples and show what each tracer sees
  provision   install the test runtimes and the C# compiler into the cache
  toolchain   install the cross toolchains (rustup targets, gcc, qemu, wine)
  cross-test  run the clrprof-sys tests for aarch64 (qemu) and win-x64 (Wine)
  msvc        build the SDK for x86_64-pc-windows-msvc and check the trampolines' unwind data
  gen-sys     regenerate clrprof-sys from corprof.idl / cor.h
  gen-mux     regenerate clrprof-mux's forwarding layer from clrprof-sys (--check: verify it)
  package     cargo package of every crate meant for crates.io, offline (--verify: build each from its .crate)
  book        check the listings and build the mdBook tutorial into target/book
  coverage    generate book/src/coverage.md (--check: fail if stale or a corprof.idl method is unaccounted for)
  ledger      generate book/src/soundness-ledger.md: every unsafe block's runtime rule, its enforcement and tests
              (--check: fail if untagged, a rule's test is missing, or stale; `ledger propose` suggests tags)
  conformance generate book/src/conformance.md: the runtime's profiler tests against the scenarios (--check: fail on a failed one)
  bench       `bench elt`: ELT hook cost of clrprof against a hand-written C profiler;
              `bench sampler`: the sampler's cost against the app alone;
              `bench profiles`: the allocation profile's cost (runtime events vs ObjectAllocated) on an allocating app;
              `bench mux`: what the profiler multiplexer adds to a child, per callback and per ELT hook;
              `bench memory`: peak resident memory each example tracer adds, and its growth under code unloading;
              `bench gate`: the hot paths' instructions against their C yardsticks, failing above the goals (a step of `test`);
              `bench all`: every benchmark, one JSON file each in target/bench/";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((c, r)) => (c.as_str(), r),
        None => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let result = match cmd {
        "test" => test::main(rest),
        "demo" => demo::main(rest),
        "provision" => provision::main(rest),
        "toolchain" => toolchain::main(rest),
        "cross-test" => cross::main(rest),
        "msvc" => msvc::main(rest),
        "gen-sys" => gen_sys::main(rest),
        "gen-mux" => gen_mux::main(rest),
        "package" => package::main(rest),
        "book" => book::main(rest),
        "coverage" => coverage::main(rest),
        "conformance" => conformance::main(rest),
        "ledger" => ledger::main(rest),
        "bench" => bench::main(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => {
            eprintln!("unknown command `{other}`\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask {cmd}: error: {e}");
        std::process::exit(1);
    }
}
