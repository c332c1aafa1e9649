//! A test runner for real-runtime tests: every scenario on every leg.
//!
//! libtest cannot report "skipped", and a leg that did not run must never look
//! like a pass, so real-runtime tests use this runner from a `harness = false`
//! test target:
//!
//! ```no_run
//! use clrprof_testing::harness::{Harness, Scenario};
//! fn main() {
//!     Harness::new(concat!(env!("CARGO_MANIFEST_DIR"), "/apps"))
//!         .scenario(Scenario::new("hello", |case| {
//!             let app = case.app("hello")?;
//!             let outcome = case.run(case.spec(&app))?;
//!             outcome.check()?;
//!             Ok(())
//!         }))
//!         .main()
//! }
//! ```
//!
//! It prints one line per scenario × leg (`ok`, `FAILED: reason`,
//! `skipped: reason`), then the plain line `N passed, N failed, N skipped`,
//! and exits non-zero when anything failed. In strict mode (`--strict`, or
//! `CI=true`) a leg that cannot run, or a missing tool, is a failure. A
//! scenario may exclude a leg with a reason (a known runtime defect); that is
//! reported as skipped in every mode.
//!
//! Arguments: `--strict`; `--leg NAME` (repeatable) to restrict legs; `--list`
//! to list the cases; `--jobs N` cases at once (default
//! `$CLRPROF_HARNESS_JOBS`, else the machine's parallelism up to 4; a
//! scenario marked [`Scenario::exclusive`] runs alone after the others);
//! any other word filters cases by substring of `scenario [leg]`. With `$CLRPROF_HARNESS_SUMMARY` set, a JSON summary is
//! written to that file (used by `cargo xtask test`): the counts per leg
//! (`"legs"`) and every case's result (`"cases"`: `scenario`, `leg`,
//! `result` = `ok` / `failed` / `skipped`, and `reason`).

use crate::csharp::{compile, CompileOptions};
use crate::fixtures::{broken_profiler, BrokenBuild};
use crate::manifest::{self, Leg, Runtimes, Target};
use crate::run::{run_app, Outcome, Profiler, RunSpec};
use crate::Error;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The case ran and something was wrong.
    Failed(String),
    /// The case could not run (counted as a failure in strict mode unless
    /// the scenario excluded the leg).
    Skipped(String),
}

impl From<String> for Verdict {
    fn from(s: String) -> Verdict {
        Verdict::Failed(s)
    }
}

impl From<&str> for Verdict {
    fn from(s: &str) -> Verdict {
        Verdict::Failed(s.to_string())
    }
}

impl From<Error> for Verdict {
    fn from(e: Error) -> Verdict {
        Verdict::Failed(e.to_string())
    }
}

/// What a scenario body returns.
pub type CaseResult = std::result::Result<(), Verdict>;

type Body = Box<dyn Fn(&Case<'_>) -> CaseResult + Send + Sync>;

/// One scenario: a body run once per leg.
pub struct Scenario {
    name: String,
    excluded: Vec<(String, String)>,
    only_on: Option<(Vec<String>, String)>,
    also_on: Vec<String>,
    exclusive: bool,
    body: Body,
}

impl Scenario {
    /// A scenario named `name` running `body` on every leg.
    pub fn new(
        name: &str,
        body: impl Fn(&Case<'_>) -> CaseResult + Send + Sync + 'static,
    ) -> Scenario {
        Scenario {
            name: name.to_string(),
            excluded: Vec::new(),
            only_on: None,
            also_on: Vec::new(),
            exclusive: false,
            body: Box::new(body),
        }
    }

    /// Leaves out leg `leg`, reporting `reason` (e.g. a known runtime defect).
    pub fn exclude_leg(mut self, leg: &str, reason: &str) -> Scenario {
        self.excluded.push((leg.to_string(), reason.to_string()));
        self
    }

    /// Runs only on the legs `legs`; every other leg reports skipped with `reason`.
    pub fn only_on(mut self, legs: &[&str], reason: &str) -> Scenario {
        self.only_on = Some((
            legs.iter().map(|l| l.to_string()).collect(),
            reason.to_string(),
        ));
        self
    }

    /// Runs on the opt-in legs `legs` too (see [`manifest::OPT_IN_LEGS`]:
    /// the emulated arm64 leg runs the scenarios that ask for it), besides
    /// every standard leg.
    pub fn also_on(mut self, legs: &[&str]) -> Scenario {
        self.also_on.extend(legs.iter().map(|l| l.to_string()));
        self
    }

    /// Runs alone: after the other cases, with no case beside it (a timing
    /// or a peak memory that another case's load would disturb).
    pub fn exclusive(mut self) -> Scenario {
        self.exclusive = true;
        self
    }

    /// Whether the scenario runs on the opt-in leg `leg`.
    fn opts_in(&self, leg: &str) -> bool {
        self.also_on.iter().any(|l| l == leg)
            || self
                .only_on
                .as_ref()
                .is_some_and(|(legs, _)| legs.iter().any(|l| l == leg))
    }

    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The directory of the cases' working directories: the build's own
/// (`$CARGO_TARGET_DIR`, else the workspace's `target/`) `clrprof-runs/`, so
/// that several checkouts sharing one runtime cache (`$CLRPROF_CACHE`)
/// never run a case in the same directory (a case clears its directory
/// when it starts); the cache's `runs/` when neither can be found.
fn runs_dir(cache: &Path, workspace: Option<&Path>) -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("clrprof-runs");
    }
    let root = match workspace {
        Some(w) => Some(w.to_path_buf()),
        None => crate::build::workspace_root().ok(),
    };
    match root {
        Some(root) => root.join("target").join("clrprof-runs"),
        None => cache.join("runs"),
    }
}

/// Shared state of one harness run.
struct Context {
    runtimes: Runtimes,
    cache: PathBuf,
    /// Where each case's working directory is made (see [`runs_dir`]).
    runs: PathBuf,
    apps_dir: PathBuf,
    workspace: Option<PathBuf>,
    strict: bool,
    profilers: Mutex<HashMap<(String, Target), std::result::Result<Profiler, String>>>,
}

impl Context {
    fn unavailable(&self, reason: String) -> Verdict {
        if self.strict {
            Verdict::Failed(format!("{reason} (strict mode)"))
        } else {
            Verdict::Skipped(reason)
        }
    }
}

/// What a scenario body gets: the leg, and helpers bound to it.
pub struct Case<'h> {
    leg: &'h Leg,
    ctx: &'h Context,
    work_dir: PathBuf,
    runs: Cell<usize>,
}

impl Case<'_> {
    /// The leg this case runs on.
    pub fn leg(&self) -> &Leg {
        self.leg
    }

    /// Whether the harness runs in strict mode.
    pub fn strict(&self) -> bool {
        self.ctx.strict
    }

    /// The rig's cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.ctx.cache
    }

    /// Compiles `<apps dir>/<name>.cs` (cached) and returns its assembly prepared for this leg.
    pub fn app(&self, name: &str) -> std::result::Result<PathBuf, Verdict> {
        self.app_with(name, CompileOptions::default())
    }

    /// Like [`Case::app`] with compiler options.
    pub fn app_with(
        &self,
        name: &str,
        options: CompileOptions,
    ) -> std::result::Result<PathBuf, Verdict> {
        let Some(compiler) = self.ctx.runtimes.compiler() else {
            return Err(self.ctx.unavailable(
                "no C# compiler (install mono-mcs or run `clrprof provision`; in the clrprof repository `cargo xtask provision`)".to_string(),
            ));
        };
        if options.aspnetcore && !self.leg.has_aspnetcore() {
            return Err(Verdict::Skipped(format!(
                "{name} is an ASP.NET Core app; this leg's runtime root has no ASP.NET Core \
                 (provisioned on the linux-x64 .NET 10 and 11 legs)"
            )));
        }
        let source = self.ctx.apps_dir.join(format!("{name}.cs"));
        let compiled = compile(&compiler, &source, &self.ctx.cache, options, self.leg)?;
        Ok(compiled.for_leg(self.leg)?)
    }

    /// Like [`Case::app_with`], for an app that references the NuGet
    /// packages `set` (those this leg needs, see
    /// [`crate::packages::for_leg`]): compiled against their assemblies,
    /// which are deployed next to it with its `deps.json`. The packages are
    /// fetched (pinned, checked) into the cache when provisioning has not.
    pub fn app_with_packages(
        &self,
        name: &str,
        options: CompileOptions,
        set: &[crate::packages::LibraryPackage],
    ) -> std::result::Result<PathBuf, Verdict> {
        let Some(compiler) = self.ctx.runtimes.compiler() else {
            return Err(self.ctx.unavailable("no C# compiler".to_string()));
        };
        if options.aspnetcore && !self.leg.has_aspnetcore() {
            return Err(Verdict::Skipped(format!(
                "{name} is an ASP.NET Core app; this leg's runtime root has no ASP.NET Core"
            )));
        }
        let packages = crate::packages::for_leg(set, self.leg);
        let assemblies = crate::packages::assemblies(
            &self.ctx.cache,
            &packages,
            self.leg,
            &crate::nuget::Feed::configured(),
            &crate::nuget::Quiet,
        )
        .map_err(|e| {
            self.ctx
                .unavailable(format!("{name}'s NuGet packages: {e}"))
        })?;
        let extra: Vec<PathBuf> = assemblies.iter().map(|a| a.path.clone()).collect();
        let source = self.ctx.apps_dir.join(format!("{name}.cs"));
        let compiled = crate::csharp::compile_with_references(
            &compiler,
            &source,
            &self.ctx.cache,
            options,
            self.leg,
            &extra,
        )?;
        let dll = compiled.for_leg(self.leg)?;
        crate::packages::deploy(&compiler, &self.ctx.cache, self.leg, &dll, &assemblies)?;
        Ok(dll)
    }

    /// Like [`Case::app`], compiled against the reference assemblies of the
    /// older leg `compiled_for` (so that it also runs there, e.g. in one
    /// process hosting both runtimes), prepared for this leg.
    pub fn app_compiled_for(
        &self,
        name: &str,
        compiled_for: &str,
    ) -> std::result::Result<PathBuf, Verdict> {
        let Some(other) = self.ctx.runtimes.leg(compiled_for) else {
            return Err(self
                .ctx
                .unavailable(format!("leg {compiled_for} is not available")));
        };
        let Some(compiler) = self.ctx.runtimes.compiler() else {
            return Err(self.ctx.unavailable("no C# compiler".to_string()));
        };
        let source = self.ctx.apps_dir.join(format!("{name}.cs"));
        let compiled = compile(
            &compiler,
            &source,
            &self.ctx.cache,
            CompileOptions::default(),
            other,
        )?;
        Ok(compiled.for_leg(self.leg)?)
    }

    /// An assembly compiled from `source`, a C# file outside the apps
    /// folder (the SDK's trace-context startup hook), against the reference
    /// assemblies of leg `compiled_for` when that leg is provisioned (else
    /// this leg's), prepared for this leg.
    pub fn assembly_from(
        &self,
        source: &Path,
        options: CompileOptions,
        compiled_for: &str,
    ) -> std::result::Result<PathBuf, Verdict> {
        let Some(compiler) = self.ctx.runtimes.compiler() else {
            return Err(self.ctx.unavailable("no C# compiler".to_string()));
        };
        let against = self.ctx.runtimes.leg(compiled_for).unwrap_or(self.leg);
        let compiled = compile(&compiler, source, &self.ctx.cache, options, against)?;
        Ok(compiled.for_leg(self.leg)?)
    }

    /// Another available leg, by name (for scenarios that combine legs, such
    /// as side-by-side runtimes in one process).
    pub fn other_leg(&self, name: &str) -> Option<&Leg> {
        self.ctx.runtimes.leg(name)
    }

    /// Builds a library that serves several profiler classes and selects the
    /// class `clsid`, which must be among the CLSID markers in the file.
    pub fn profiler_class(
        &self,
        package: &str,
        clsid: &str,
    ) -> std::result::Result<Profiler, Verdict> {
        let mut profiler = self.profiler_any(package)?;
        let wanted =
            crate::clsid::normalize_clsid(clsid).map_err(|e| Verdict::Failed(e.to_string()))?;
        let served = crate::clsid::clsids_in_file(&profiler.path)
            .map_err(|e| Verdict::Failed(e.to_string()))?;
        if !served.contains(&wanted) {
            return Err(Verdict::Failed(format!(
                "{} does not embed the CLSID {wanted}; it embeds {served:?}",
                profiler.path.display()
            )));
        }
        profiler.clsid = wanted;
        Ok(profiler)
    }

    fn profiler_any(&self, package: &str) -> std::result::Result<Profiler, Verdict> {
        let workspace = match &self.ctx.workspace {
            Some(w) => w.clone(),
            None => crate::build::workspace_root().map_err(|e| Verdict::Failed(e.to_string()))?,
        };
        let path = crate::build::build_cdylib(package, self.leg.target(), false, &workspace)
            .map_err(|e| Verdict::Failed(e.to_string()))?;
        Ok(Profiler {
            path,
            clsid: String::new(),
        })
    }

    /// Builds the profiler `cdylib` package `package` for this leg's OS (once
    /// per harness run) and reads its CLSID marker.
    pub fn profiler(&self, package: &str) -> std::result::Result<Profiler, Verdict> {
        let key = (package.to_string(), self.leg.target());
        let cached = self
            .ctx
            .profilers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some(done) = cached {
            return done.map_err(Verdict::Failed);
        }
        let built = (|| {
            let workspace = match &self.ctx.workspace {
                Some(w) => w.clone(),
                None => crate::build::workspace_root()?,
            };
            let path = crate::build::build_cdylib(package, self.leg.target(), false, &workspace)?;
            let clsid = crate::clsid::single_clsid(&path)?;
            Ok::<_, Error>(Profiler { path, clsid })
        })()
        .map_err(|e| e.to_string());
        self.ctx
            .profilers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, built.clone());
        built.map_err(Verdict::Failed)
    }

    /// The broken-profiler fixture built for this leg's OS.
    pub fn broken_profiler(&self, build: BrokenBuild) -> std::result::Result<Profiler, Verdict> {
        broken_profiler(self.leg.os, build, &self.ctx.cache).map_err(|e| {
            self.ctx
                .unavailable(format!("cannot build the broken-profiler fixture: {e}"))
        })
    }

    /// A run spec for `app` with a fresh work directory of this case.
    pub fn spec(&self, app: &Path) -> RunSpec {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        RunSpec::new(app, self.work_dir.join(n.to_string()))
    }

    /// Runs `spec` on this leg.
    pub fn run(&self, spec: RunSpec) -> std::result::Result<Outcome, Verdict> {
        Ok(run_app(self.leg, self.ctx.runtimes.wine(), &spec)?)
    }
}

/// Pass/fail/skip counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases that were skipped.
    pub skipped: usize,
}

/// The runner.
pub struct Harness {
    apps_dir: PathBuf,
    scenarios: Vec<Scenario>,
    workspace: Option<PathBuf>,
    found_legs_only: bool,
}

impl Harness {
    /// A harness whose apps (`<name>.cs`) live in `apps_dir`.
    pub fn new(apps_dir: impl Into<PathBuf>) -> Harness {
        Harness {
            apps_dir: apps_dir.into(),
            scenarios: Vec::new(),
            workspace: None,
            found_legs_only: false,
        }
    }

    /// Runs on the legs found (provisioned by `clrprof provision`, or the
    /// runtimes of an installed `dotnet`, any version: see
    /// [`manifest::installed_dotnet_legs`]) instead of the standard legs:
    /// a profiler author with .NET 10 installed tests against .NET 10
    /// without provisioning anything. With no leg found, the one case says
    /// so (skipped, or failed in strict mode) and names `clrprof provision`.
    pub fn found_legs_only(mut self) -> Harness {
        self.found_legs_only = true;
        self
    }

    /// The directory cargo builds profilers in (default: the current workspace).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Harness {
        self.workspace = Some(dir.into());
        self
    }

    /// Adds a scenario.
    pub fn scenario(mut self, scenario: Scenario) -> Harness {
        self.scenarios.push(scenario);
        self
    }

    /// Runs with the process arguments and exits with the harness's status.
    pub fn main(self) -> ! {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let (counts, _) = self.run(&args);
        std::process::exit(if counts.failed > 0 { 1 } else { 0 })
    }

    /// Runs with `args` (see the module docs); returns the totals and the per-leg counts.
    pub fn run(self, args: &[String]) -> (Counts, BTreeMap<String, Counts>) {
        let ci = std::env::var("CI")
            .map(|v| v == "true" || v == "1")
            .unwrap_or(false);
        let mut strict = ci;
        let mut list = false;
        let mut only_legs: Vec<String> = Vec::new();
        let mut filters: Vec<String> = Vec::new();
        let mut jobs = default_jobs();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--strict" => strict = true,
                "--list" => list = true,
                "--leg" => only_legs.extend(it.next().cloned()),
                "--jobs" => {
                    if let Some(n) = it.next().and_then(|n| n.parse::<usize>().ok()) {
                        jobs = n;
                    }
                }
                // libtest options cargo may pass through; they have no meaning here.
                "--test-threads" | "--format" | "--color" | "--skip" | "-Z" => {
                    it.next();
                }
                other if other.starts_with('-') => {}
                other => filters.push(other.to_string()),
            }
        }
        if let Ok(legs) = std::env::var("CLRPROF_LEGS") {
            only_legs.extend(
                legs.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
        }

        let runtimes = manifest::discover();
        let cache = runtimes.cache_dir();
        let mut leg_names: Vec<String> = if self.found_legs_only {
            Vec::new()
        } else {
            manifest::STANDARD_LEGS
                .iter()
                .chain(manifest::OPT_IN_LEGS.iter())
                .map(|s| s.to_string())
                .collect()
        };
        for leg in &runtimes.legs {
            if !leg_names.contains(&leg.name) {
                leg_names.push(leg.name.clone());
            }
        }
        leg_names.retain(|l| only_legs.is_empty() || only_legs.contains(l));
        if self.found_legs_only && leg_names.is_empty() {
            leg_names.push(NO_RUNTIME_LEG.to_string());
        }

        let runs = runs_dir(&cache, self.workspace.as_deref());
        let ctx = Context {
            runtimes,
            cache,
            runs,
            apps_dir: self.apps_dir,
            workspace: self.workspace,
            strict,
            profilers: Mutex::new(HashMap::new()),
        };
        println!(
            "clrprof real-runtime harness: {} scenario(s) x {} leg(s){}; runtimes from: {}",
            self.scenarios.len(),
            leg_names.len(),
            if strict { ", strict" } else { "" },
            if ctx.runtimes.sources.is_empty() {
                "nowhere".to_string()
            } else {
                ctx.runtimes.sources.join(", ")
            }
        );

        // The cases, in scenario order, each leg of a scenario in turn.
        let mut planned: Vec<(&Scenario, &str, String)> = Vec::new();
        for scenario in &self.scenarios {
            for leg_name in &leg_names {
                // Opt-in legs (a non-`dotnet` host, an emulated one) run only
                // the scenarios naming them.
                if manifest::OPT_IN_LEGS.contains(&leg_name.as_str()) && !scenario.opts_in(leg_name)
                {
                    continue;
                }
                let case_name = format!("{} [{}]", scenario.name, leg_name);
                if !filters.is_empty() && !filters.iter().any(|f| case_name.contains(f.as_str())) {
                    continue;
                }
                if list {
                    println!("{case_name}");
                    continue;
                }
                planned.push((scenario, leg_name.as_str(), case_name));
            }
        }

        // Cases run on `jobs` threads; the exclusive ones (timings that a
        // case running beside them would disturb) after them, alone.
        let results: Mutex<Vec<Option<(CaseResult, f64)>>> =
            Mutex::new(planned.iter().map(|_| None).collect());
        let print = Mutex::new(());
        let run_one = |i: usize| {
            let (scenario, leg_name, case_name) = &planned[i];
            let started = Instant::now();
            let verdict = run_case(scenario, leg_name, &ctx);
            let secs = started.elapsed().as_secs_f64();
            let line = match &verdict {
                Ok(()) => format!("ok ({secs:.1}s)"),
                Err(Verdict::Failed(reason)) => format!("FAILED: {}", indent(reason)),
                Err(Verdict::Skipped(reason)) => format!("skipped: {}", indent(reason)),
            };
            {
                let _one_at_a_time = print.lock().unwrap_or_else(|e| e.into_inner());
                println!("test {case_name} ... {line}");
            }
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((verdict, secs));
        };
        let (shared, exclusive): (Vec<usize>, Vec<usize>) =
            (0..planned.len()).partition(|&i| !planned[i].0.exclusive);
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&i) = shared.get(k) else { break };
                    run_one(i);
                });
            }
        });
        for i in exclusive {
            run_one(i);
        }

        let mut total = Counts::default();
        let mut per_leg: BTreeMap<String, Counts> = BTreeMap::new();
        let mut failures: Vec<String> = Vec::new();
        // Every case's result, for the summary file.
        let mut cases: Vec<serde_json::Value> = Vec::new();
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        for ((scenario, leg_name, case_name), result) in planned.iter().zip(results) {
            let Some((verdict, secs)) = result else {
                continue;
            };
            let (result, reason) = match &verdict {
                Ok(()) => ("ok", ""),
                Err(Verdict::Failed(r)) => ("failed", first_line(r)),
                Err(Verdict::Skipped(r)) => ("skipped", r.as_str()),
            };
            cases.push(serde_json::json!({
                "scenario": scenario.name,
                "leg": leg_name,
                "result": result,
                "reason": reason,
                "seconds": (secs * 10.0).round() / 10.0,
            }));
            let counts = per_leg.entry(leg_name.to_string()).or_default();
            match verdict {
                Ok(()) => {
                    counts.passed += 1;
                    total.passed += 1;
                }
                Err(Verdict::Failed(reason)) => {
                    counts.failed += 1;
                    total.failed += 1;
                    failures.push(format!("{case_name}: {}", first_line(&reason)));
                }
                Err(Verdict::Skipped(_)) => {
                    counts.skipped += 1;
                    total.skipped += 1;
                }
            }
        }
        if !failures.is_empty() {
            println!("\nfailures:");
            for f in &failures {
                println!("    {f}");
            }
        }
        if let Some(path) = std::env::var_os("CLRPROF_HARNESS_SUMMARY") {
            let legs: serde_json::Map<String, serde_json::Value> = per_leg
                .iter()
                .map(|(k, c)| {
                    (k.clone(), serde_json::json!({"passed": c.passed, "failed": c.failed, "skipped": c.skipped}))
                })
                .collect();
            let text = serde_json::json!({ "legs": legs, "cases": cases }).to_string();
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!(
                    "cannot write harness summary {}: {e}",
                    PathBuf::from(path).display()
                );
            }
        }
        println!(
            "\n{} passed, {} failed, {} skipped",
            total.passed, total.failed, total.skipped
        );
        (total, per_leg)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn indent(s: &str) -> String {
    s.trim_end().replace('\n', "\n        ")
}

/// Cases run at once: `$CLRPROF_HARNESS_JOBS`, else the machine's
/// parallelism (at most 4: each case starts runtimes of its own).
fn default_jobs() -> usize {
    std::env::var("CLRPROF_HARNESS_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get().min(4))
                .unwrap_or(1)
        })
}

/// The leg name a [`Harness::found_legs_only`] run reports when it found none.
const NO_RUNTIME_LEG: &str = "no-runtime";

fn run_case(scenario: &Scenario, leg_name: &str, ctx: &Context) -> CaseResult {
    if leg_name == NO_RUNTIME_LEG {
        return Err(ctx.unavailable(
            "no runtime found: run `clrprof provision` in this crate (provisions .NET Core 3.1 and \
             .NET 8, 9, 10 and 11 from NuGet into target/clrprof-cache), or install .NET (any \
             version: `dotnet` on PATH or in $DOTNET_ROOT is a leg)"
                .to_string(),
        ));
    }
    if let Some((_, reason)) = scenario.excluded.iter().find(|(l, _)| l == leg_name) {
        return Err(Verdict::Skipped(format!("excluded on this leg: {reason}")));
    }
    if let Some((legs, reason)) = &scenario.only_on {
        if !legs.iter().any(|l| l == leg_name) {
            return Err(Verdict::Skipped(format!(
                "runs only on {}: {reason}",
                legs.join(", ")
            )));
        }
    }
    let Some(leg) = ctx.runtimes.leg(leg_name) else {
        let reason = ctx
            .runtimes
            .missing
            .iter()
            .find(|m| m.name == leg_name)
            .map(|m| m.reason.clone())
            .unwrap_or_else(|| "not found".to_string());
        return Err(ctx.unavailable(format!("leg {leg_name} cannot run: {reason}")));
    };
    let work_dir = ctx.runs.join(sanitize(&scenario.name)).join(&leg.name);
    let _ = std::fs::remove_dir_all(&work_dir);
    let case = Case {
        leg,
        ctx,
        work_dir,
        runs: Cell::new(0),
    };
    match catch_unwind(AssertUnwindSafe(|| (scenario.body)(&case))) {
        Ok(result) => result,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".to_string());
            Err(Verdict::Failed(format!("panicked: {msg}")))
        }
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
