//! The torture profiler (`tests/fixtures/torture`) inside real programs:
//! every safe API called from every callback on every ID and object in
//! scope, from its SDK thread under runtime suspensions and from a plain
//! std thread, while the apps load and unload collectible code and dynamic
//! methods, allocate, collect, throw and churn threads. Checked: the app's
//! exit status and stdout are byte-identical with and without the
//! profiler, and the profiler reached the API families each app must reach
//! (non-zero call counts in its `torture` records). Also across attach and
//! detach cycles, and under the multiplexer beside a second child.
//!
//! Each case prints the profiler's call count per family (and in total) on
//! stderr, for the closing report.
//!
//! What it found (each exercised only with `TORTURE_ROUTES=<n>` until it is
//! closed, so that these scenarios keep finding the next one):
//! - 7 (second review, route 7): `GetAppDomainsContainingModule` on the
//!   typed `ModuleId` of `ModuleLoadStarted`: SIGSEGV in libcoreclr
//!   (linux-x64-8.0, app alloc, at startup);
//! - 3 (route 3): `field_value` on a boxed value type from
//!   `ObjectAllocated` hands out a bogus `ObjectId`; `class_from_object` on
//!   it: SIGSEGV (linux-x64-8.0, app alloc);
//! - 1 (route 1): the std thread keeps calling its `RuntimeHandle` after
//!   the detach (with `TORTURE_ROUTES=1` in the attach scenario);
//! - 101 (new): `RuntimeHandle::enum_jited_functions2` from a std thread
//!   while collectible contexts unload: SIGSEGV in libcoreclr
//!   (linux-x64-8.0, app unload, about one run in two);
//! - 102 (new): `ReJitThread::request_rejit` (same IL) of a method of a
//!   collectible assembly (`Unload.Plugin::Run`, from its
//!   `JITCompilationFinished`): the app's main thread spins in the prestub
//!   for ever (linux-x64-3.1, app unload: hung);
//! - 103 (new, the runtime's): `RuntimeHandle::enum_jited_functions` from
//!   the std thread and the SDK thread while collectible contexts unload:
//!   SIGSEGV in the runtime's walk of its code heaps, or "The RX block to map
//!   as RW was not found" (linux-x64-10.0 and 11.0, app unload, about one
//!   run in three; under Wine with .NET 10 "Internal CLR error"). A C
//!   profiler making only that call does the same (tests/runtime/unload.rs);
//!   the SDK refuses it on .NET 10 and later outside scopes where the runtime
//!   cannot suspend, and the SDK thread here makes it inside its suspensions;
//! - (the re-entrancy family, closed) on linux-x64-10.0, with the profiler's
//!   own guard against its re-entering calls dropped: a handle made from
//!   the `HandleCreated` that `CreateHandle` delivers inside itself nested
//!   2,020 deep (SIGSEGV), a waited ReJIT from `GetReJITParameters`
//!   overflowed the stack (SIGABRT, "Stack overflow."), and a walk of the
//!   ELT records inside a walk, or a record asked for from the user's
//!   mapper, hung the app (300 s); all four are refused now;
//! - (the .NET 9 leg, closed) `class_from_token` from `ModuleLoadFinished`:
//!   SIGSEGV in libcoreclr 9.0.23 on every app (its loader dereferences a
//!   null assembly while the module's own assembly is still loading); the
//!   SDK now refuses type loads inside an assembly's load on .NET 9.

use crate::attach::{attach_retrying, start_longrun, wait_for_events, Trigger};
use crate::exceptions::WINE_NET8_LEG;
use clrprof_testing::background::read_records;
use clrprof_testing::csharp::CompileOptions;
use clrprof_testing::harness::{Case, CaseResult, Scenario, Verdict};
use clrprof_testing::manifest::Os;
use clrprof_testing::run::Outcome;
use clrprof_testing::wine::to_wine_path;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

type R<T> = Result<T, Verdict>;

/// One app and what the torture profiler must reach in it.
struct App {
    name: &'static str,
    /// Arguments on Linux and on Windows legs (Wine is slower).
    args: fn(&Case<'_>) -> Vec<String>,
    /// API families with at least one call.
    families: &'static [&'static str],
    /// Callbacks delivered at least once.
    callbacks: &'static [&'static str],
    /// Throws more than one managed exception.
    throws: bool,
    /// Compiled with `/unsafe`.
    unsafe_code: bool,
}

/// Families every app reaches.
const COMMON: &[&str] = &[
    "function_info",
    "class_info",
    "module_info",
    "assembly_info",
    "app_domain_info",
    "thread_info",
    "names",
    "metadata",
    "object_info",
    "field_value",
    "string_text",
    "statics",
    "stack_walk",
    "gc_handles",
    "code_info",
    "il",
    "elt_arguments",
    "elt_return",
    "suspension",
    "suspended_walk",
    "enumerations",
    "runtime_handle",
    "std_thread",
    "event_pipe",
];

/// Callbacks every app gets.
const COMMON_CALLBACKS: &[&str] = &[
    "module_load_started",
    "module_load_finished",
    "assembly_load_finished",
    "class_load_finished",
    "jit_compilation_started",
    "jit_compilation_finished",
    "thread_created",
    "object_allocated",
    "function_id_mapper",
    "elt_enter_with_info",
    "elt_leave_with_info",
    "shutdown",
    "sdk_thread_suspension",
    "std_thread_round",
];

fn wine(case: &Case<'_>) -> bool {
    case.leg().os == Os::Windows
}

fn apps() -> Vec<App> {
    vec![
        App {
            name: "unload",
            args: |c| vec![if wine(c) { "8" } else { "20" }.into()],
            families: &[],
            callbacks: &[
                "class_unload_started",
                "module_unload_started",
                "garbage_collection_started",
            ],
            throws: false,
            unsafe_code: false,
        },
        App {
            name: "lcg",
            args: |c| vec![if wine(c) { "20" } else { "40" }.into()],
            families: &[],
            callbacks: &[
                "dynamic_method_jit_compilation_started",
                "dynamic_method_jit_compilation_finished",
                "garbage_collection_started",
            ],
            throws: false,
            unsafe_code: false,
        },
        App {
            name: "alloc",
            args: |_| vec![],
            families: &["array_elements", "object_references", "gc_info"],
            callbacks: &[
                "garbage_collection_started",
                "garbage_collection_finished",
                "runtime_suspend_started",
                "runtime_thread_suspended",
            ],
            throws: false,
            unsafe_code: false,
        },
        App {
            name: "heap",
            args: |_| vec!["85000".into()],
            families: &["array_elements", "object_references", "gc_info"],
            callbacks: &["garbage_collection_started", "handle_created"],
            throws: false,
            unsafe_code: false,
        },
        App {
            name: "busy",
            args: |_| vec![],
            families: &["exception_info"],
            callbacks: &[
                "thread_destroyed",
                "exception_thrown",
                "exception_catcher_enter",
                "garbage_collection_started",
            ],
            // One managed exception, but after the runtime's internal ones.
            throws: true,
            unsafe_code: false,
        },
        App {
            name: "exceptions",
            args: |_| vec![],
            families: &["exception_info"],
            callbacks: &[
                "exception_thrown",
                "exception_search_function_enter",
                "exception_search_catcher_found",
                "exception_unwind_function_enter",
                "exception_catcher_enter",
            ],
            throws: true,
            unsafe_code: false,
        },
        App {
            name: "eltargs",
            args: |_| vec![],
            families: &[],
            callbacks: &[],
            throws: false,
            unsafe_code: true,
        },
    ]
}

/// The profiler's records as counts per family and per callback.
struct Counts {
    families: BTreeMap<String, (u64, u64)>,
    callbacks: BTreeMap<String, u64>,
    total: u64,
}

fn counts(records: &[Value]) -> R<Counts> {
    let mut families = BTreeMap::new();
    let mut callbacks = BTreeMap::new();
    let mut total = 0;
    for r in records {
        match r["event"].as_str() {
            Some("torture") => {
                let family = r["family"].as_str().unwrap_or("?").to_string();
                let calls = r["calls"].as_u64().unwrap_or(0);
                let errors = r["errors"].as_u64().unwrap_or(0);
                let e = families.entry(family).or_insert((0, 0));
                e.0 += calls;
                e.1 += errors;
            }
            Some("torture_callback") => {
                *callbacks
                    .entry(r["callback"].as_str().unwrap_or("?").to_string())
                    .or_insert(0) += r["count"].as_u64().unwrap_or(0);
            }
            Some("torture_total") => total += r["calls"].as_u64().unwrap_or(0),
            _ => {}
        }
    }
    if families.is_empty() {
        return Err("the torture profiler wrote no counts (did it finish?)".into());
    }
    Ok(Counts {
        families,
        callbacks,
        total,
    })
}

impl Counts {
    fn require(&self, families: &[&str], callbacks: &[&str]) -> CaseResult {
        let missing: Vec<&&str> = families
            .iter()
            .filter(|f| self.families.get(**f).map_or(0, |c| c.0) == 0)
            .collect();
        let silent: Vec<&&str> = callbacks
            .iter()
            .filter(|c| self.callbacks.get(**c).copied().unwrap_or(0) == 0)
            .collect();
        if missing.is_empty() && silent.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the torture profiler made no call of {missing:?} and saw no {silent:?}; families {:?}; callbacks {:?}",
                self.families, self.callbacks
            )
            .into())
        }
    }

    fn report(&self, what: &str) {
        let families: Vec<String> = self
            .families
            .iter()
            .map(|(f, (c, e))| format!("{f}={c}/{e}err"))
            .collect();
        eprintln!(
            "    torture {what}: {} calls in {} callbacks; {}",
            self.total,
            self.callbacks.values().sum::<u64>(),
            families.join(" ")
        );
    }
}

/// The mismatch family's records: per case (attempts, refused, answered,
/// accepted), and the calls its wrappers' handler saw.
struct MismatchCounts {
    cases: BTreeMap<String, [u64; 4]>,
    handler_calls: u64,
}

fn mismatch_counts(records: &[Value]) -> MismatchCounts {
    let mut cases = BTreeMap::new();
    let mut handler_calls = 0;
    for r in records {
        match r["event"].as_str() {
            Some("torture_mismatch") => {
                let e: &mut [u64; 4] = cases
                    .entry(r["case"].as_str().unwrap_or("?").to_string())
                    .or_default();
                for (i, k) in ["attempts", "refused", "answered", "accepted"]
                    .iter()
                    .enumerate()
                {
                    e[i] += r[*k].as_u64().unwrap_or(0);
                }
            }
            Some("torture_mismatch_handler") => {
                handler_calls += r["calls"].as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    MismatchCounts {
        cases,
        handler_calls,
    }
}

/// The cases whose wrong partner the SDK (or the runtime, for a frame of
/// another function) must refuse every time.
const MUST_REFUSE: &[&str] = &[
    "rejit_control",
    "jit_function",
    "frame_function",
    "sample_buffer",
    "thread_list",
    "shape_arguments",
    "id_runtime",
    "handlers_context",
    "rejit_wait",
];

/// The cases whose partner the runtime validates (an answer names another
/// member of the same module or function).
const RUNTIME_CHECKED: &[&str] = &["token_module", "field_class", "rejit_version"];

impl MismatchCounts {
    /// No wrong partner accepted where it must be refused, no call of a
    /// wrapper that must never be installed.
    fn none_accepted(&self) -> CaseResult {
        let accepted: Vec<(&String, &[u64; 4])> = self
            .cases
            .iter()
            .filter(|(c, n)| MUST_REFUSE.contains(&c.as_str()) && n[3] > 0)
            .collect();
        if !accepted.is_empty() || self.handler_calls > 0 {
            return Err(format!(
                "wrong partners accepted (attempts, refused, answered, accepted): {accepted:?}; \
                 calls of never-installed wrappers: {}",
                self.handler_calls
            )
            .into());
        }
        Ok(())
    }

    fn report(&self, what: &str) {
        let cases: Vec<String> = self
            .cases
            .iter()
            .map(|(c, n)| format!("{c}={}/{}ref/{}ans/{}acc", n[0], n[1], n[2], n[3]))
            .collect();
        eprintln!("    mismatch {what}: {}", cases.join(" "));
    }
}

/// Exit status and stdout identical with and without the profiler.
fn same_app(plain: &Outcome, with: &Outcome, what: &str) -> CaseResult {
    if format!("{:?}", plain.exit) != format!("{:?}", with.exit) {
        return Err(format!(
            "exit changed under {what}: {:?} without, {:?} with; stderr: {}",
            plain.exit,
            with.exit,
            tail(&with.stderr)
        )
        .into());
    }
    if plain.stdout != with.stdout {
        return Err(format!(
            "app output changed under {what}:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, with.stdout
        )
        .into());
    }
    Ok(())
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(2000);
    let mut start = start;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Why the apps that throw do not run under the torture profiler on
/// win-x64-8.0.
const WINE_NET8_TORTURE: &str = "Wine 8 + .NET 8.0.4 break exception dispatch: the exceptions app \
     hangs at its second exception without any profiler, and the busy app's single managed \
     exception, thrown after the runtime raised hundreds of internal exceptions for the torture \
     profiler's refused calls, jumps to a bad address in Wine's dispatcher and faults until the \
     stack overflows (WINEDEBUG=+seh); both run under torture on win-x64-3.1";

/// The knobs of a run (the fixture's defaults otherwise). `TORTURE_EXTRA`
/// (`K=V,K=V`) in the test's environment replaces them, to bisect a
/// failure by probe family (e.g. `TORTURE_SAMPLE_MS=0` turns the sampling
/// thread off, `TORTURE_ASYNC_WALK=0` the asynchronous walks).
fn knobs(_case: &Case<'_>) -> Vec<(String, String)> {
    if let Ok(extra) = std::env::var("TORTURE_EXTRA") {
        return extra
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
    vec![("TORTURE_EVERY".into(), "8".into())]
}

fn app_scenario(app: App) -> Scenario {
    let name = format!(
        "torture: every safe API from every callback, app {}",
        app.name
    );
    let throws = app.throws;
    let s = Scenario::new(&name, move |case| {
        let path = case.app_with(
            app.name,
            CompileOptions {
                allow_unsafe: app.unsafe_code,
                ..CompileOptions::default()
            },
        )?;
        let args = (app.args)(case);
        let mut plain = case.spec(&path);
        plain.args = args.clone();
        let plain = case.run(plain)?;
        plain.check_exit()?;
        let profiler = case.profiler("torture")?;
        let mut spec = case
            .spec(&path)
            .profiler(profiler)
            .timeout(Duration::from_secs(300));
        spec.args = args;
        for (k, v) in knobs(case) {
            spec = spec.env(&k, &v);
        }
        let with = case.run(spec)?;
        same_app(&plain, &with, "the torture profiler")?;
        with.check_profiler_loaded()?;
        if !with.bad_records.is_empty() {
            return Err(format!("invalid records: {:?}", with.bad_records).into());
        }
        let c = counts(&with.records)?;
        c.report(&format!(
            "{} ({:.1}s)",
            app.name,
            with.duration.as_secs_f64()
        ));
        mismatch_counts(&with.records).none_accepted()?;
        let families: Vec<&str> = COMMON.iter().chain(app.families).copied().collect();
        let callbacks: Vec<&str> = COMMON_CALLBACKS
            .iter()
            .chain(app.callbacks)
            .copied()
            .collect();
        c.require(&families, &callbacks)
    });
    if throws {
        s.exclude_leg(WINE_NET8_LEG, WINE_NET8_TORTURE)
    } else {
        s
    }
}

/// Attach and detach cycles of the torture profiler to the `longrun` app.
fn attach_cycles(case: &Case<'_>) -> CaseResult {
    const CYCLES: usize = 3;
    let profiler = case.profiler("torture")?;
    let trigger = Trigger::for_case(case)?;
    let knobs = knobs(case);
    let pairs: Vec<(&str, &str)> = knobs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let run = start_longrun(case, &pairs)?;
    let data = format!(
        "output={};detach_after_ms=300",
        trigger.target_path(&run.records)?
    );
    for i in 1..=CYCLES {
        attach_retrying(&trigger, run.pid, &profiler, &data)?;
        wait_for_events(&run.records, "detached", i, Duration::from_secs(60))?;
    }
    let records = run.stop_and_check()?;
    let attached = records.iter().filter(|r| r["event"] == "attached").count();
    if attached != CYCLES {
        return Err(format!("{attached} of {CYCLES} attaches recorded").into());
    }
    let c = counts(&records)?;
    c.report("attach/detach");
    c.require(
        &[
            "function_info",
            "class_info",
            "module_info",
            "names",
            "stack_walk",
            "runtime_handle",
            "enumerations",
            "suspension",
        ],
        &[
            "profiler_attach_complete",
            "profiler_detach_succeeded",
            "jit_compilation_started",
            "dynamic_method_jit_compilation_finished",
            "sdk_thread_suspension",
        ],
    )
}

/// The torture profiler under the multiplexer, beside jit-tracer.
fn under_mux(case: &Case<'_>) -> CaseResult {
    let app = case.app("busy")?;
    let plain = case.run(case.spec(&app))?;
    plain.check_exit()?;
    let torture = case.profiler("torture")?;
    let jit = case.profiler("jit-tracer")?;
    let mux = case.profiler("clrprof-mux")?;
    let spec = case.spec(&app);
    let out1 = spec.work_dir.join("child1.jsonl");
    let out2 = spec.work_dir.join("child2.jsonl");
    let path = |p: &Path| -> R<String> {
        match case.leg().os {
            Os::Linux => Ok(p.display().to_string()),
            Os::Windows => Ok(to_wine_path(p)?),
        }
    };
    let list = format!(
        "{}={};{}={}",
        path(&torture.path)?,
        torture.clsid,
        path(&jit.path)?,
        jit.clsid
    );
    let mut spec = spec
        .profiler(mux)
        .timeout(Duration::from_secs(300))
        .env("CLRPROF_MUX_PROFILERS", &list)
        .env("CLRPROF_MUX_1_CLRPROF_OUTPUT", &path(&out1)?)
        .env("CLRPROF_MUX_2_CLRPROF_OUTPUT", &path(&out2)?);
    for (k, v) in knobs(case) {
        spec = spec.env(&k, &v);
    }
    let with = case.run(spec)?;
    same_app(&plain, &with, "the multiplexer with the torture profiler")?;
    let (torture_records, bad) = read_records(&out1);
    if !bad.is_empty() {
        return Err(format!("torture child wrote invalid records: {bad:?}").into());
    }
    let (jit_records, _) = read_records(&out2);
    if !jit_records.iter().any(|r| r["event"] == "jit") {
        return Err(format!(
            "the second child recorded no JIT compilation: {:?}",
            jit_records.iter().take(5).collect::<Vec<_>>()
        )
        .into());
    }
    let c = counts(&torture_records)?;
    c.report("under the multiplexer (busy)");
    c.require(COMMON, COMMON_CALLBACKS)
}

/// The mismatch family on four apps (collectible contexts, dynamic
/// methods, ELT arguments, threads and exceptions): every app unchanged;
/// every case tried; the SDK's pairs refused every time, the runtime's
/// validated (refused or answered for a member of the same scope), never a
/// call of a wrapper built for another method.
fn mismatch_family(case: &Case<'_>) -> CaseResult {
    let mut all = Vec::new();
    for (name, args, unsafe_code) in [
        (
            "unload",
            vec![if wine(case) { "8" } else { "20" }.to_string()],
            false,
        ),
        ("lcg", vec!["40".to_string()], false),
        ("eltargs", vec![], true),
        ("busy", vec![], false),
    ] {
        let path = case.app_with(
            name,
            CompileOptions {
                allow_unsafe: unsafe_code,
                ..CompileOptions::default()
            },
        )?;
        let mut plain = case.spec(&path);
        plain.args = args.clone();
        let plain = case.run(plain)?;
        plain.check_exit()?;
        let mut spec = case
            .spec(&path)
            .profiler(case.profiler("torture")?)
            .timeout(Duration::from_secs(300))
            .env("TORTURE_MISMATCH", "1");
        spec.args = args;
        for (k, v) in knobs(case) {
            spec = spec.env(&k, &v);
        }
        let with = case.run(spec)?;
        same_app(&plain, &with, &format!("the mismatch family ({name})"))?;
        if !with.bad_records.is_empty() {
            return Err(format!("invalid records: {:?}", with.bad_records).into());
        }
        let m = mismatch_counts(&with.records);
        m.report(name);
        m.none_accepted()?;
        all.extend(with.records);
    }
    let m = mismatch_counts(&all);
    m.report("all apps");
    let mut problems = Vec::new();
    for c in MUST_REFUSE.iter().chain(RUNTIME_CHECKED) {
        let [attempts, refused, answered, accepted] = m.cases.get(*c).copied().unwrap_or_default();
        if attempts == 0 {
            problems.push(format!("{c}: never tried"));
        } else if MUST_REFUSE.contains(c) && (refused != attempts || accepted != 0) {
            problems.push(format!("{c}: {refused} of {attempts} refused"));
        } else if refused + answered + accepted != attempts {
            problems.push(format!("{c}: counts do not add up"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// The re-entrancy family's records: per case (attempts, refused,
/// answered, wrong).
fn reentrancy_counts(records: &[Value]) -> BTreeMap<String, [u64; 4]> {
    let mut cases = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r["event"] == "torture_reentrancy")
    {
        let e: &mut [u64; 4] = cases
            .entry(r["case"].as_str().unwrap_or("?").to_string())
            .or_default();
        for (i, k) in ["attempts", "refused", "answered", "wrong"]
            .iter()
            .enumerate()
        {
            e[i] += r[*k].as_u64().unwrap_or(0);
        }
    }
    cases
}

/// The cases every leg reaches, those that need EventPipe from a profiler
/// (Info12, .NET 5+), and those that need GC handles (Info13, .NET 7+).
const REENTRANCY_CASES: &[&str] = &[
    "claim_table",
    "wrap_in_claim",
    "install_in_claim",
    "mask_in_claim",
    "elt_records_nested",
    "elt_records_in_mapper",
    "rejit_in_rejit",
];
const REENTRANCY_EVENTPIPE: &[&str] = &[
    "write_in_delivery",
    "relay_runtime_event",
    "provider_in_delivery",
    "write_in_provider_created",
    "stop_in_delivery",
    "handle_in_handle_created",
];
/// The cases whose every attempt must be refused.
const REENTRANCY_MUST_REFUSE: &[&str] = &[
    "wrap_in_claim",
    "install_in_claim",
    "mask_in_claim",
    "write_in_delivery",
    "provider_in_delivery",
    "write_in_provider_created",
    "elt_records_nested",
    "elt_records_in_mapper",
    "rejit_in_rejit",
];

/// The re-entrancy family (`TORTURE_REENTRANCY=1`, on the alloc app, which
/// throws no exception, so Wine 8 with .NET 8 runs it too): from
/// inside each callback every API that could re-enter it or a lock the SDK
/// holds there; the app unchanged, every case tried, none answered wrong,
/// the ones that would re-enter without bound refused.
fn reentrancy_family(case: &Case<'_>) -> CaseResult {
    let path = case.app("alloc")?;
    let plain = case.run(case.spec(&path))?;
    plain.check_exit()?;
    let mut spec = case
        .spec(&path)
        .profiler(case.profiler("torture")?)
        .timeout(Duration::from_secs(120))
        .env("TORTURE_REENTRANCY", "1");
    // The families the re-entrancy family does not need stay off (the app
    // scenarios run them): the sampling and std threads, asynchronous
    // walks, the mismatch family. `TORTURE_EXTRA` replaces these too.
    let knobs = match std::env::var("TORTURE_EXTRA") {
        Ok(_) => knobs(case),
        Err(_) => [
            "TORTURE_EVERY=8",
            "TORTURE_SAMPLE_MS=0",
            "TORTURE_STD_THREAD=0",
            "TORTURE_ASYNC_WALK=0",
            "TORTURE_MISMATCH=0",
        ]
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    for (k, v) in knobs {
        spec = spec.env(&k, &v);
    }
    let with = case.run(spec)?;
    same_app(&plain, &with, "the re-entrancy family")?;
    if !with.bad_records.is_empty() {
        return Err(format!("invalid records: {:?}", with.bad_records).into());
    }
    let cases = reentrancy_counts(&with.records);
    let shown: Vec<String> = cases
        .iter()
        .map(|(c, n)| format!("{c}={}/{}ref/{}ans/{}wrong", n[0], n[1], n[2], n[3]))
        .collect();
    eprintln!("    reentrancy: {}", shown.join(" "));
    let eventpipe = with
        .runtime_record()
        .and_then(|r| r["version"].as_str())
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|major| major >= 5);
    let mut problems = Vec::new();
    let wanted = REENTRANCY_CASES
        .iter()
        .chain(if eventpipe { REENTRANCY_EVENTPIPE } else { &[] });
    for c in wanted {
        let [attempts, refused, _, wrong] = cases.get(*c).copied().unwrap_or_default();
        if attempts == 0 {
            problems.push(format!("{c}: never tried"));
        } else if wrong > 0 {
            problems.push(format!("{c}: {wrong} of {attempts} answered wrong"));
        } else if REENTRANCY_MUST_REFUSE.contains(c) && refused != attempts {
            problems.push(format!("{c}: {refused} of {attempts} refused"));
        } else if *c == "handle_in_handle_created" && refused == 0 {
            // The profiler's own handles are announced inside CreateHandle.
            problems.push(format!("{c}: none of {attempts} refused"));
        }
    }
    for (c, n) in &cases {
        if n[3] > 0 && !problems.iter().any(|p| p.starts_with(c.as_str())) {
            problems.push(format!("{c}: {} answered wrong", n[3]));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; ").into())
    }
}

/// A small deterministic generator for the signals' delays (xorshift64*),
/// seeded from the clock unless `TORTURE_SIGNAL_SEED` says otherwise; the
/// seed is printed, so a failing run can be repeated.
struct Delays(u64);

impl Delays {
    fn new() -> Delays {
        let seed = std::env::var("TORTURE_SIGNAL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            })
            | 1;
        eprintln!("    torture signals: TORTURE_SIGNAL_SEED={seed}");
        Delays(seed)
    }

    /// A delay in `0..max_ms` milliseconds.
    fn next(&mut self, max_ms: u64) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        Duration::from_millis(self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % max_ms)
    }
}

/// Why the loop gets Ctrl-C, never SIGTERM, on .NET Core 3.1 (the runtime's
/// defect, shown without clrprof).
const SIGTERM_NET31_ELT: &str = "on .NET Core 3.1.3 the orderly exit of a SIGTERM \
     while a thread runs code with ELT WithInfo probes kills the process with SIGSEGV in the \
     runtime's ProfileEnter, which reads the profiler interface the shutdown has released: \
     the hand-written C profiler of benches/elt (CLRPROF_ELT=withinfo, no SDK) on the signals \
     app's work loop died so in 9 of 16 runs (the torture profiler in 2 of 7), the same C \
     profiler on 8.0.34 and 9.0.23 in none of 12 each";

/// Ctrl-C or SIGTERM at random points while the torture profiler runs, in
/// the `signals` app's `work` mode (allocations, exceptions, a thread, a
/// collection, in a loop, printing only "ready"). Two runs, the signal of
/// each drawn at random (start-up gets Ctrl-C before .NET 10): one at a
/// random moment of the loop (the same
/// moment without the profiler: the exit and stdout must be the same, and
/// the profiler's `finish` must have written its counts), one at a random
/// moment of start-up (the process must end of the signal, or with the
/// runtime's orderly 143 for SIGTERM before .NET 10, having printed at most
/// "ready").
fn signals_at_random_points(case: &Case<'_>) -> CaseResult {
    use crate::signals::{plain_end_is_known, run_signalled_at, same_end, At, SIGINT, SIGTERM};
    let app = case.app("signals")?;
    let profiler = case.profiler("torture")?;
    let mut delays = Delays::new();
    let ready_within = Duration::from_secs(120);
    // The orderly exit of SIGTERM before .NET 10 runs the torture
    // profiler's Shutdown and finish, which wait for its threads (about 7 s
    // seen on 8.0 and 9.0).
    let bound = Duration::from_secs(60);
    let torture_spec = || {
        let mut spec = case.spec(&app).profiler(profiler.clone());
        spec.args = vec!["work".into()];
        for (k, v) in knobs(case) {
            spec = spec.env(&k, &v);
        }
        spec
    };
    let (first, second) = if delays.next(2).is_zero() {
        (SIGINT, SIGTERM)
    } else {
        (SIGTERM, SIGINT)
    };
    let first = if case.leg().name == "linux-x64-3.1" {
        eprintln!("    torture signals: Ctrl-C in the loop: {SIGTERM_NET31_ELT}");
        SIGINT
    } else {
        first
    };

    let at = At::AfterReady(delays.next(1000));
    eprintln!("    torture signals: {first} at {at:?}");
    let mut plain = case.spec(&app);
    plain.args = vec!["work".into()];
    let plain = run_signalled_at(case, &plain, &[(first, at)], ready_within, bound)?;
    plain_end_is_known(&plain, first)?;
    let with = run_signalled_at(case, &torture_spec(), &[(first, at)], ready_within, bound)?;
    same_end(
        &plain,
        &with,
        &format!("signal {first} {at:?} under the torture profiler"),
    )?;
    if !with.bad_records.is_empty() {
        return Err(format!("invalid records: {:?}", with.bad_records).into());
    }
    let c = counts(&with.records)?;
    c.report(&format!("signal {first} {at:?}"));
    mismatch_counts(&with.records).none_accepted()?;

    let orderly_sigterm = !matches!(
        case.leg().name.as_str(),
        "linux-x64-10.0" | "linux-x64-11.0"
    );
    // Before .NET 10 a SIGTERM is the runtime's own orderly exit (no
    // finishing in a signal path; `exit paths: SIGTERM` runs it), which under
    // the torture profiler takes about 7 s: start-up gets the Ctrl-C there.
    let second = if orderly_sigterm { SIGINT } else { second };
    let at = At::AfterStart(delays.next(2000));
    eprintln!("    torture signals: {second} at {at:?}");
    let with = run_signalled_at(case, &torture_spec(), &[(second, at)], ready_within, bound)?;
    let ended = match with.exit {
        clrprof_testing::run::Exit::Signal(s) => s == second,
        clrprof_testing::run::Exit::Code(143) => second == SIGTERM && orderly_sigterm,
        _ => false,
    };
    if !ended || !(with.stdout.is_empty() || with.stdout == "ready\n") {
        return Err(format!(
            "signal {second} {at:?} under the torture profiler: ended {:?} printing {:?}; stderr: {}",
            with.exit,
            with.stdout,
            tail(&with.stderr)
        )
        .into());
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    let mut all: Vec<Scenario> = apps().into_iter().map(app_scenario).collect();
    all.push(Scenario::new(
        "torture: attach and detach cycles (longrun)",
        attach_cycles,
    ));
    all.push(
        Scenario::new(
            "torture: the mismatch family, every API that takes two things that must belong together fed the wrong partner",
            mismatch_family,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_TORTURE),
    );
    all.push(
        Scenario::new(
            "torture: Ctrl-C or SIGTERM at random points, in the loop and in start-up (signals)",
            signals_at_random_points,
        )
        .only_on(&crate::signals::LINUX, "POSIX signals"),
    );
    all.push(
        Scenario::new(
            "torture: under the multiplexer beside jit-tracer (busy)",
            under_mux,
        )
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_TORTURE),
    );
    all.push(Scenario::new(
        "torture: the re-entrancy family, every API that could re-enter its callback or a lock the SDK holds there, called from inside it (alloc)",
        reentrancy_family,
    ));
    all
}
