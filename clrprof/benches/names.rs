//! Name-cache throughput: lookups per second of `NameCache::function_name`
//! when the name is cached (no runtime call) and when every lookup resolves
//! through the runtime (the fake runtime's `GetTokenAndMetaDataFromFunction`
//! + metadata calls), plus concurrent cached lookups from 4 threads.
//!
//! A plain `Instant` loop (no bench framework); the figures go to stdout and
//! to `target/bench/names.json`. Run with
//! `cargo bench -p clrprof --features fake-runtime --bench names`.

use clrprof::testing::fake::{FakeFunction, FakeMetaData, FakeModule, FakeRuntime};
use clrprof::NameCache;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FUNCTIONS: usize = 1024;

fn world() -> FakeRuntime {
    let fake = FakeRuntime::new();
    let mut md = FakeMetaData::default()
        .with_type(0x0200_0002, "Bench.Outer")
        .with_nested_type(0x0200_0003, "Inner", 0x0200_0002);
    for i in 0..FUNCTIONS as u32 {
        md = md.with_method(0x0600_0001 + i, 0x0200_0003, &format!("Method{i}"));
    }
    let mut st = fake.state();
    st.modules.insert(
        0x2000,
        FakeModule {
            metadata: Arc::new(md),
            ..Default::default()
        },
    );
    for i in 0..FUNCTIONS {
        st.functions.insert(
            0x10_0000 + i,
            FakeFunction {
                module: 0x2000,
                token: 0x0600_0001 + i as u32,
                ..Default::default()
            },
        );
    }
    drop(st);
    fake
}

/// Runs `f` in a loop for about `budget`, returning operations per second.
fn rate(budget: Duration, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed() < budget {
        for _ in 0..1000 {
            f(n);
            n += 1;
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let fake = world();
    // SAFETY: the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let budget = Duration::from_millis(500);

    let cache = NameCache::new();
    // SAFETY: the IDs go only to the fake's ProfilerInfo.
    let ids: Vec<_> = (0..FUNCTIONS)
        .map(|i| unsafe { fake.function_id(0x10_0000 + i) })
        .collect();
    for &f in &ids {
        cache.function_name(&info, f).expect("warm-up");
    }
    let cached = rate(budget, |n| {
        let name = cache
            .function_name(&info, ids[n % FUNCTIONS])
            .expect("cached");
        std::hint::black_box(name);
    });
    let uncached = rate(budget, |n| {
        let name = info.function_name(ids[n % FUNCTIONS]).expect("resolved");
        std::hint::black_box(name);
    });
    let shared = Arc::new(cache);
    let start = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let cache = shared.clone();
            let raw: Vec<_> = ids.iter().map(|f| f.to_raw()).collect();
            std::thread::spawn(move || {
                let mut n = 0usize;
                let begin = Instant::now();
                while begin.elapsed() < budget {
                    for _ in 0..1000 {
                        let name = cache.cached_function_name(raw[(n + t * 7) % FUNCTIONS]);
                        assert!(name.is_some());
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    let total: usize = threads
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .sum();
    let concurrent = total as f64 / start.elapsed().as_secs_f64();

    let json = format!(
        "{{\"bench\":\"names\",\"functions\":{FUNCTIONS},\"cached_lookups_per_sec\":{cached:.0},\"uncached_lookups_per_sec\":{uncached:.0},\"cached_lookups_per_sec_4_threads\":{concurrent:.0}}}\n"
    );
    print!("{json}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("bench");
    if let Err(e) =
        std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join("names.json"), &json))
    {
        eprintln!("could not write {}: {e}", dir.join("names.json").display());
        std::process::exit(1);
    }
}
