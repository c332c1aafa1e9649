//! Checks on recorded callback sequences: ordering rules, validity windows of
//! IDs, and the two-pass state machine of managed exception handling.
//!
//! The input is the JSON Lines a recording profiler wrote, in file order,
//! one record per callback: `{"event":"<CallbackName>","t":<thread>, ...}`
//! where `<CallbackName>` is the runtime's name (`ClassLoadStarted`,
//! `ExceptionSearchFunctionEnter`, ...), `t` names the OS thread that
//! delivered the callback, `id` carries the callback's main ID when it has
//! one, `name` a function or module name and `class` an object's class. The
//! file order must be the order the callbacks ran in (one lock around the
//! writes), so each thread's records are in its own order.
//!
//! Every check returns the violations it found as sentences; an empty list
//! means the sequence obeys the rule.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

fn event(r: &Value) -> &str {
    r["event"].as_str().unwrap_or("")
}

fn thread(r: &Value) -> u64 {
    r["t"].as_u64().unwrap_or(0)
}

fn id(r: &Value) -> Option<u64> {
    r["id"].as_u64()
}

fn name(r: &Value) -> &str {
    r["name"].as_str().unwrap_or("")
}

/// Callback families that come as `<Family>Started` / `<Family>Finished`
/// pairs for one ID (corprof.idl).
pub const PAIRED_FAMILIES: &[&str] = &[
    "AppDomainCreation",
    "AppDomainShutdown",
    "AssemblyLoad",
    "AssemblyUnload",
    "ModuleLoad",
    "ModuleUnload",
    "ClassLoad",
    "ClassUnload",
    "JITCompilation",
    "JITCachedFunctionSearch",
];

/// Every `<Family>Finished` follows a `<Family>Started` for the same ID on
/// the same thread that is not finished yet, and no `Started` stays open at
/// the end (the runtime documents each pair as bracketing one operation on
/// the calling thread). One exception: a `JITCachedFunctionSearchStarted`
/// may instead be ended by the `JITCompilationStarted` of the same function
/// on the same thread, when the runtime rejects the cached code.
pub fn check_started_finished(records: &[Value]) -> Vec<String> {
    let mut violations = Vec::new();
    for family in PAIRED_FAMILIES {
        let started = format!("{family}Started");
        let finished = format!("{family}Finished");
        let mut open: HashMap<(u64, u64), usize> = HashMap::new();
        for (line, r) in records.iter().enumerate() {
            let e = event(r);
            // A cached-code search whose code the runtime then rejects (a
            // ready-to-run method whose fixups fail) ends without
            // JITCachedFunctionSearchFinished: the method is JIT-compiled
            // instead, on the same thread (seen on .NET 8.0.4).
            if *family == "JITCachedFunctionSearch" && e == "JITCompilationStarted" {
                if let Some(n) = id(r).and_then(|i| open.get_mut(&(i, thread(r)))) {
                    *n = n.saturating_sub(1);
                }
                continue;
            }
            if e != started && e != finished {
                continue;
            }
            let Some(i) = id(r) else {
                violations.push(format!("record {line}: {e} without an id"));
                continue;
            };
            let key = (i, thread(r));
            if e == started {
                *open.entry(key).or_default() += 1;
            } else {
                match open.get_mut(&key) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => violations.push(format!(
                        "record {line}: {finished} for id {i:#x} on thread {} without an open {started} on that thread",
                        key.1
                    )),
                }
            }
        }
        for ((i, t), n) in open {
            if n > 0 {
                violations.push(format!(
                    "{started} for id {i:#x} on thread {t} never finished"
                ));
            }
        }
    }
    violations
}

/// IDs are used only inside their validity window (BOTR *Profiling*,
/// "Lifetime & Stability"):
/// * a module ID from `ModuleLoadStarted` until `ModuleUnloadFinished`
///   (`ModuleAttachedToAssembly` and the load/unload callbacks in between);
/// * a class ID from `ClassLoadStarted` until `ClassUnloadFinished`;
/// * an assembly ID from `AssemblyLoadStarted` until `AssemblyUnloadFinished`
///   (also as the `assembly` of `ModuleAttachedToAssembly`);
/// * a thread ID from `ThreadCreated` until `ThreadDestroyed`
///   (`ThreadAssignedToOSThread`, `ThreadNameChanged`,
///   `RuntimeThreadSuspended`/`Resumed`);
/// * a GC handle ID from `HandleCreated` until `HandleDestroyed`.
///
/// An ID may be reused after its window closed (the runtime recycles
/// addresses), but only by a new opening callback. `ThreadNameChanged` may
/// also come before `ThreadCreated`: an unstarted thread can be named.
pub fn check_validity_windows(records: &[Value]) -> Vec<String> {
    struct Window {
        kind: &'static str,
        opens: &'static str,
        closes: &'static str,
        uses: &'static [&'static str],
        /// Uses also allowed before the opening callback (never after the closing one).
        early: &'static [&'static str],
    }
    const WINDOWS: &[Window] = &[
        Window {
            kind: "module",
            opens: "ModuleLoadStarted",
            closes: "ModuleUnloadFinished",
            uses: &[
                "ModuleLoadFinished",
                "ModuleAttachedToAssembly",
                "ModuleUnloadStarted",
            ],
            early: &[],
        },
        Window {
            kind: "class",
            opens: "ClassLoadStarted",
            closes: "ClassUnloadFinished",
            uses: &["ClassLoadFinished", "ClassUnloadStarted"],
            early: &[],
        },
        Window {
            kind: "assembly",
            opens: "AssemblyLoadStarted",
            closes: "AssemblyUnloadFinished",
            uses: &["AssemblyLoadFinished", "AssemblyUnloadStarted"],
            early: &[],
        },
        Window {
            kind: "thread",
            opens: "ThreadCreated",
            closes: "ThreadDestroyed",
            uses: &[
                "ThreadAssignedToOSThread",
                "ThreadNameChanged",
                "RuntimeThreadSuspended",
                "RuntimeThreadResumed",
            ],
            // A thread can be named before it starts: the runtime reports the
            // name of an unstarted thread with the ThreadID it will get, and
            // ThreadCreated only when it starts (seen on 3.1 and 8.0).
            early: &["ThreadNameChanged"],
        },
        Window {
            kind: "GC handle",
            opens: "HandleCreated",
            closes: "HandleDestroyed",
            uses: &[],
            early: &[],
        },
    ];
    let mut violations = Vec::new();
    for w in WINDOWS {
        let mut live: HashSet<u64> = HashSet::new();
        let mut seen: HashSet<u64> = HashSet::new();
        for (line, r) in records.iter().enumerate() {
            let e = event(r);
            let Some(i) = id(r) else { continue };
            if w.early.contains(&e) && !seen.contains(&i) {
                continue;
            }
            if e == w.opens {
                seen.insert(i);
                if !live.insert(i) {
                    violations.push(format!(
                        "record {line}: {e} for {} id {i:#x} that is already live",
                        w.kind
                    ));
                }
            } else if e == w.closes {
                if !live.remove(&i) {
                    violations.push(format!(
                        "record {line}: {e} for {} id {i:#x} outside its window",
                        w.kind
                    ));
                }
            } else if w.uses.contains(&e) && !live.contains(&i) {
                violations.push(format!(
                    "record {line}: {e} uses {} id {i:#x} outside its window ({} .. {})",
                    w.kind, w.opens, w.closes
                ));
            }
        }
    }
    // The assembly a module attaches to must be live too.
    let mut assemblies: HashSet<u64> = HashSet::new();
    for (line, r) in records.iter().enumerate() {
        match (event(r), id(r)) {
            ("AssemblyLoadStarted", Some(i)) => {
                assemblies.insert(i);
            }
            ("AssemblyUnloadFinished", Some(i)) => {
                assemblies.remove(&i);
            }
            ("ModuleAttachedToAssembly", _) => {
                let a = r["assembly"].as_u64().unwrap_or(0);
                if !assemblies.contains(&a) {
                    violations.push(format!(
                        "record {line}: ModuleAttachedToAssembly names assembly {a:#x} outside its window"
                    ));
                }
            }
            _ => {}
        }
    }
    violations
}

/// The runtime suspension protocol, per thread: `RuntimeSuspendStarted`,
/// then `RuntimeSuspendFinished` (or `RuntimeSuspendAborted`, which ends the
/// suspension), then `RuntimeResumeStarted` and `RuntimeResumeFinished`,
/// never nested. Returns the number of completed suspensions and the violations.
pub fn check_suspensions(records: &[Value]) -> (usize, Vec<String>) {
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum State {
        Running,
        Suspending,
        Suspended,
        Resuming,
    }
    let mut state: HashMap<u64, State> = HashMap::new();
    let mut completed = 0;
    let mut violations = Vec::new();
    for (line, r) in records.iter().enumerate() {
        let e = event(r);
        let s = state.entry(thread(r)).or_insert(State::Running);
        let next = match (e, *s) {
            ("RuntimeSuspendStarted", State::Running) => State::Suspending,
            ("RuntimeSuspendFinished", State::Suspending) => State::Suspended,
            ("RuntimeSuspendAborted", State::Suspending) => State::Running,
            ("RuntimeResumeStarted", State::Suspended) => State::Resuming,
            ("RuntimeResumeFinished", State::Resuming) => {
                completed += 1;
                State::Running
            }
            (
                "RuntimeSuspendStarted"
                | "RuntimeSuspendFinished"
                | "RuntimeSuspendAborted"
                | "RuntimeResumeStarted"
                | "RuntimeResumeFinished",
                st,
            ) => {
                violations.push(format!(
                    "record {line}: {e} on thread {} while {st:?}",
                    thread(r)
                ));
                continue;
            }
            _ => continue,
        };
        *s = next;
    }
    (completed, violations)
}

/// What the exception callbacks of a run add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExceptionAccount {
    /// `ExceptionThrown` callbacks (a rethrow counts: the runtime reports it).
    pub thrown: usize,
    /// `ExceptionCatcherEnter` callbacks: catch blocks entered.
    pub caught: usize,
    /// `ExceptionSearchFilterEnter` callbacks: filters run.
    pub filters: usize,
    /// `ExceptionUnwindFinallyEnter` callbacks: finally blocks run by an unwind.
    pub finallys: usize,
    /// Exceptions thrown while another one's handler (filter, finally or
    /// catch block) was running on the same thread.
    pub nested: usize,
    /// Exceptions whose catch block or finally was left by a newer exception
    /// (a rethrow, or an exception escaping a handler).
    pub abandoned: usize,
    /// Search or unwind frames reported twice in a row (the .NET 9 funclet
    /// duplicates, see [`ExceptionRules`]); always 0 under the strict rules
    /// (which take a repeat for another frame of the same method).
    pub duplicated_frames: usize,
}

/// What the exception checker tolerates, by runtime version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExceptionRules {
    /// The exception handling ported from NativeAOT (the default from .NET 9
    /// on) reported, for a frame running a funclet, the
    /// `ExceptionSearchFunctionEnter`/`Leave` or
    /// `ExceptionUnwindFunctionEnter`/`Leave` of the parent method once for
    /// the funclet and again for the method itself (dotnet/runtime issue
    /// 123351), until PR 123564 (merged January 2026, in .NET 11). Measured
    /// inside the runtimes (the scenario "version rules: a method whose finally
    /// throws is reported twice per pass ..." on apps/funclets.cs): 9.0.23
    /// reports a method whose finally throws on the method's normal way out
    /// twice in each pass; a finally throwing while another exception
    /// unwinds, or a catch block throwing, is reported once; 3.1.3, 8.0.34,
    /// 10.0.15 and 11.0.0 report every frame once. So on .NET 9 the second
    /// report of the frame just left, for the same exception and pass, is
    /// counted in [`ExceptionAccount::duplicated_frames`] instead of being
    /// taken for another frame.
    pub duplicated_funclet_frames: bool,
}

impl ExceptionRules {
    /// The rules of .NET 8 and older and of .NET 10 and later: no duplicates.
    pub const STRICT: ExceptionRules = ExceptionRules {
        duplicated_funclet_frames: false,
    };

    /// The rules of a .NET runtime of this major version (`3` for .NET Core
    /// 3.1): duplicates tolerated and counted on .NET 9 (10.0.15 reports
    /// none, measured).
    pub fn for_major(major: u32) -> ExceptionRules {
        ExceptionRules {
            duplicated_funclet_frames: major == 9,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// First pass: looking for a handler, frame by frame.
    Search,
    /// Second pass: unwinding frames up to the catcher.
    Unwind,
    /// The catch block runs.
    Catching,
}

#[derive(Debug, Clone)]
struct InFlight {
    class: String,
    pass: Pass,
    search_frame: Option<String>,
    in_filter: bool,
    catcher: Option<String>,
    unwind_frame: Option<String>,
    in_finally: bool,
    /// Set when a newer exception unwound the frame running this one's handler.
    abandoned: bool,
    /// The frame this exception's last callback left (`SearchFunctionLeave`
    /// / `UnwindFunctionLeave`), while no other callback came since: a
    /// duplicate enter of it is tolerated under [`ExceptionRules`].
    just_left: Option<String>,
}

impl InFlight {
    fn handler_running(&self) -> bool {
        self.in_filter || self.in_finally || self.pass == Pass::Catching
    }

    /// The function whose filter, finally or catch block runs now.
    fn handler_frame(&self) -> Option<&str> {
        if self.in_filter {
            self.search_frame.as_deref()
        } else if self.in_finally {
            self.unwind_frame.as_deref()
        } else if self.pass == Pass::Catching {
            self.catcher.as_deref()
        } else {
            None
        }
    }
}

/// Validates, thread by thread, the exception callbacks against the
/// runtime's two-pass model (corprof.idl, BOTR *Exception Handling*):
///
/// * `ExceptionThrown` starts an exception; a thread may have a second one
///   in flight only while the first runs a handler (filter, finally, catch);
/// * first pass: `ExceptionSearchFunctionEnter(f)` … `Leave` per frame, with
///   `ExceptionSearchFilterEnter(f)`/`Leave` for each filter of `f` and at most
///   one `ExceptionSearchCatcherFound(f)` inside the frame that catches;
/// * second pass, only after a catcher was found: `ExceptionUnwindFunctionEnter(f)`
///   … `Leave` per frame, with `ExceptionUnwindFinallyEnter(f)`/`Leave` per
///   finally block; the catching frame is entered and not left: there
///   `ExceptionCatcherEnter(f)` (the same `f` and exception class) and
///   `ExceptionCatcherLeave` end the exception;
/// * a newer exception that unwinds (enters and leaves) the frame whose
///   handler an older exception runs abandons the older one (a rethrow, or
///   an exception escaping a finally); it ends when the newer one does.
///
/// Frames are compared by function name, so the program under test must not
/// recurse through a frame that handles an exception. At the end no
/// exception may be left in flight.
///
/// These are the strict rules ([`ExceptionRules::STRICT`]);
/// [`check_exceptions_with`] takes the rules of the runtime version.
pub fn check_exceptions(records: &[Value]) -> (ExceptionAccount, Vec<String>) {
    check_exceptions_with(records, ExceptionRules::STRICT)
}

/// [`check_exceptions`] under `rules` (e.g. [`ExceptionRules::for_major`]
/// of the leg's runtime).
pub fn check_exceptions_with(
    records: &[Value],
    rules: ExceptionRules,
) -> (ExceptionAccount, Vec<String>) {
    let mut account = ExceptionAccount::default();
    let mut violations = Vec::new();
    let mut threads: HashMap<u64, Vec<InFlight>> = HashMap::new();
    for (line, r) in records.iter().enumerate() {
        let e = event(r);
        if !e.starts_with("Exception") {
            continue;
        }
        let t = thread(r);
        let stack = threads.entry(t).or_default();
        let mut fail =
            |what: String| violations.push(format!("record {line} (thread {t}): {e}: {what}"));
        if e == "ExceptionThrown" {
            account.thrown += 1;
            if let Some(top) = stack.last() {
                if top.handler_running() {
                    account.nested += 1;
                } else {
                    fail(format!(
                        "thrown while the exception in flight ({:?}) runs no handler",
                        top.pass
                    ));
                }
            }
            stack.push(InFlight {
                class: r["class"].as_str().unwrap_or("").to_string(),
                pass: Pass::Search,
                search_frame: None,
                in_filter: false,
                catcher: None,
                unwind_frame: None,
                in_finally: false,
                abandoned: false,
                just_left: None,
            });
            continue;
        }
        if matches!(e, "ExceptionOSHandlerEnter" | "ExceptionOSHandlerLeave") {
            continue;
        }
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            fail("no exception in flight on this thread".to_string());
            continue;
        };
        let f = name(r).to_string();
        let just_left = top.just_left.take();
        // The .NET 9/10 funclet duplicate: the frame just left entered again
        // in the same pass. It repeats a report; the state stays as the
        // first report left it, except that the frame is open again.
        if rules.duplicated_funclet_frames
            && just_left.as_deref() == Some(f.as_str())
            && matches!(
                e,
                "ExceptionSearchFunctionEnter" | "ExceptionUnwindFunctionEnter"
            )
        {
            account.duplicated_frames += 1;
            if e == "ExceptionSearchFunctionEnter" {
                top.search_frame = Some(f);
            } else {
                top.unwind_frame = Some(f);
            }
            continue;
        }
        match e {
            "ExceptionSearchFunctionEnter" => {
                if top.pass != Pass::Search || top.search_frame.is_some() || top.catcher.is_some() {
                    fail(format!(
                        "not expected now (pass {:?}, frame {:?}, catcher {:?})",
                        top.pass, top.search_frame, top.catcher
                    ));
                }
                top.search_frame = Some(f);
            }
            "ExceptionSearchFilterEnter" => {
                if top.pass != Pass::Search
                    || top.in_filter
                    || top.search_frame.as_deref() != Some(f.as_str())
                {
                    fail(format!(
                        "filter of {f} outside its search frame {:?}",
                        top.search_frame
                    ));
                }
                account.filters += 1;
                top.in_filter = true;
            }
            "ExceptionSearchFilterLeave" => {
                if !top.in_filter {
                    fail("no filter running".to_string());
                }
                top.in_filter = false;
            }
            "ExceptionSearchCatcherFound" => {
                // Under the duplicates, the repeated report of the catching
                // frame finds its catcher again.
                let again = rules.duplicated_funclet_frames && top.catcher.as_deref() == Some(&f);
                if top.pass != Pass::Search
                    || top.in_filter
                    || (top.catcher.is_some() && !again)
                    || top.search_frame.as_deref() != Some(f.as_str())
                {
                    fail(format!(
                        "catcher {f} found outside its search frame {:?} or twice",
                        top.search_frame
                    ));
                }
                top.catcher = Some(f);
            }
            "ExceptionSearchFunctionLeave" => {
                if top.pass != Pass::Search || top.search_frame.is_none() || top.in_filter {
                    fail("no search frame open (or a filter still runs)".to_string());
                }
                top.just_left = top.search_frame.take();
            }
            "ExceptionCLRCatcherFound" => {
                if top.pass != Pass::Search || top.search_frame.is_some() {
                    fail("not at the end of the first pass".to_string());
                }
                top.catcher = Some(String::new());
            }
            "ExceptionCLRCatcherExecute" => {
                if top.catcher.as_deref() != Some("") {
                    fail("no CLR catcher was found".to_string());
                }
                stack.pop();
            }
            "ExceptionUnwindFunctionEnter" => {
                if top.pass == Pass::Search {
                    if top.catcher.is_none() || top.search_frame.is_some() {
                        fail(format!("second pass before the first found a catcher (catcher {:?}, open frame {:?})", top.catcher, top.search_frame));
                    }
                    top.pass = Pass::Unwind;
                }
                if top.pass != Pass::Unwind || top.unwind_frame.is_some() {
                    fail(format!(
                        "not expected now (pass {:?}, open frame {:?})",
                        top.pass, top.unwind_frame
                    ));
                }
                top.unwind_frame = Some(f);
            }
            "ExceptionUnwindFinallyEnter" => {
                if top.pass != Pass::Unwind
                    || top.in_finally
                    || top.unwind_frame.as_deref() != Some(f.as_str())
                {
                    fail(format!(
                        "finally of {f} outside its unwind frame {:?}",
                        top.unwind_frame
                    ));
                }
                account.finallys += 1;
                top.in_finally = true;
            }
            "ExceptionUnwindFinallyLeave" => {
                if !top.in_finally {
                    fail("no finally running".to_string());
                }
                top.in_finally = false;
            }
            "ExceptionUnwindFunctionLeave" => {
                let Some(frame) = top.unwind_frame.take() else {
                    fail("no unwind frame open".to_string());
                    continue;
                };
                if top.in_finally {
                    fail(format!("{frame} left while its finally runs"));
                }
                top.just_left = Some(frame.clone());
                // Unwinding the frame an older exception handles in abandons it.
                for older in stack[..depth - 1].iter_mut().rev() {
                    if !older.abandoned && older.handler_frame() == Some(frame.as_str()) {
                        older.abandoned = true;
                        account.abandoned += 1;
                    }
                }
            }
            "ExceptionCatcherEnter" => {
                let class = r["class"].as_str().unwrap_or("");
                if top.pass != Pass::Unwind
                    || top.in_finally
                    || top.unwind_frame.as_deref() != Some(f.as_str())
                    || top.catcher.as_deref() != Some(f.as_str())
                {
                    fail(format!(
                        "catch in {f}, but the catcher found was {:?} and the frame unwound {:?}",
                        top.catcher, top.unwind_frame
                    ));
                }
                if class != top.class {
                    fail(format!("catches a {class}, but a {} was thrown", top.class));
                }
                account.caught += 1;
                top.unwind_frame = None;
                top.pass = Pass::Catching;
            }
            "ExceptionCatcherLeave" => {
                if top.pass != Pass::Catching {
                    fail(format!("no catch block running (pass {:?})", top.pass));
                }
                stack.pop();
                while stack.last().is_some_and(|o| o.abandoned) {
                    stack.pop();
                }
            }
            other => fail(format!("unknown exception callback {other}")),
        }
    }
    for (t, stack) in threads {
        for x in stack.iter().filter(|x| !x.abandoned) {
            violations.push(format!(
                "thread {t}: a {} is still in flight at the end ({:?})",
                x.class, x.pass
            ));
        }
    }
    (account, violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seq(events: &[(&str, &str)]) -> Vec<Value> {
        events
            .iter()
            .map(|(e, n)| json!({"event": e, "t": 1, "name": n, "class": "E"}))
            .collect()
    }

    /// A throw in `Throw`, caught in `Main`, through `Mid` with a finally.
    fn simple() -> Vec<(&'static str, &'static str)> {
        vec![
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "Throw"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Mid"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Main"),
            ("ExceptionSearchFilterEnter", "Main"),
            ("ExceptionSearchFilterLeave", ""),
            ("ExceptionSearchCatcherFound", "Main"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Throw"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Mid"),
            ("ExceptionUnwindFinallyEnter", "Mid"),
            ("ExceptionUnwindFinallyLeave", ""),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Main"),
            ("ExceptionCatcherEnter", "Main"),
            ("ExceptionCatcherLeave", ""),
        ]
    }

    #[test]
    fn accepts_the_two_passes() {
        let (account, v) = check_exceptions(&seq(&simple()));
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(
            account,
            ExceptionAccount {
                duplicated_frames: 0,
                thrown: 1,
                caught: 1,
                filters: 1,
                finallys: 1,
                nested: 0,
                abandoned: 0
            }
        );
    }

    /// `simple()` with the frames with funclets (`Main`'s filter and catch,
    /// `Mid`'s finally) reported twice in a row, the shape dotnet/runtime
    /// issue 123351 describes (9.0.23 was seen repeating only a method whose
    /// finally throws, [`measured_net9_repeat`]).
    fn with_funclet_duplicates() -> Vec<(&'static str, &'static str)> {
        vec![
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "Throw"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Mid"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Main"),
            ("ExceptionSearchFilterEnter", "Main"),
            ("ExceptionSearchFilterLeave", ""),
            ("ExceptionSearchCatcherFound", "Main"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Main"),
            ("ExceptionSearchCatcherFound", "Main"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Throw"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Mid"),
            ("ExceptionUnwindFinallyEnter", "Mid"),
            ("ExceptionUnwindFinallyLeave", ""),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Mid"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Main"),
            ("ExceptionCatcherEnter", "Main"),
            ("ExceptionCatcherLeave", ""),
        ]
    }

    /// One exception of apps/funclets.cs as .NET 9.0.23 reports it: thrown
    /// by a finally on its method's normal way out, that method's search
    /// and unwind frames reported twice each.
    fn measured_net9_repeat() -> Vec<(&'static str, &'static str)> {
        vec![
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "Throw"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "FromFinally"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "FromFinally"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Main"),
            ("ExceptionSearchCatcherFound", "Main"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Throw"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "FromFinally"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "FromFinally"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Main"),
            ("ExceptionCatcherEnter", "Main"),
            ("ExceptionCatcherLeave", ""),
        ]
    }

    #[test]
    fn the_measured_net9_repeat_is_counted_on_net9_only() {
        let records = seq(&measured_net9_repeat());
        let (account, v) = check_exceptions_with(&records, ExceptionRules::for_major(9));
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(account.duplicated_frames, 2);
        assert_eq!((account.thrown, account.caught), (1, 1));
        // Elsewhere a repeat is taken for another frame of the same method
        // (recursion), not counted.
        for major in [3, 8, 10, 11] {
            let (account, v) = check_exceptions_with(&records, ExceptionRules::for_major(major));
            assert!(v.is_empty(), ".NET {major}: {v:?}");
            assert_eq!(account.duplicated_frames, 0, ".NET {major}");
        }
    }

    #[test]
    fn net9_funclet_duplicates_are_tolerated_and_counted() {
        let records = seq(&with_funclet_duplicates());
        let (account, v) = check_exceptions_with(&records, ExceptionRules::for_major(9));
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(account.duplicated_frames, 2);
        assert_eq!(
            (account.thrown, account.caught, account.finallys),
            (1, 1, 1)
        );
        // Where each frame is reported once (8.0.34, 10.0.15, 11.0.0
        // measured) the repeated catcher is a violation.
        for major in [3, 8, 10, 11] {
            let (_, v) = check_exceptions_with(&records, ExceptionRules::for_major(major));
            assert!(v.iter().any(|x| x.contains("twice")), ".NET {major}: {v:?}");
        }
        // The tolerance is for a repeat of the frame just left only.
        let mut wrong = with_funclet_duplicates();
        wrong.insert(10, ("ExceptionSearchFunctionEnter", "Other"));
        wrong.insert(11, ("ExceptionSearchFunctionLeave", ""));
        let (_, v) = check_exceptions_with(&seq(&wrong), ExceptionRules::for_major(9));
        assert!(!v.is_empty());
    }

    #[test]
    fn rejects_unwind_before_a_catcher_and_wrong_catcher() {
        let mut s = simple();
        s.remove(8); // no CatcherFound
        let (_, v) = check_exceptions(&seq(&s));
        assert!(v.iter().any(|m| m.contains("second pass before")), "{v:?}");

        let mut s = simple();
        s[17] = ("ExceptionCatcherEnter", "Mid");
        let (_, v) = check_exceptions(&seq(&s));
        assert!(v.iter().any(|m| m.contains("catch in Mid")), "{v:?}");

        let mut s = simple();
        s.pop(); // never left the catch block
        let (_, v) = check_exceptions(&seq(&s));
        assert!(v.iter().any(|m| m.contains("still in flight")), "{v:?}");
    }

    #[test]
    fn rethrow_abandons_the_first_catch() {
        let s = vec![
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "Re"),
            ("ExceptionSearchCatcherFound", "Re"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Re"),
            ("ExceptionCatcherEnter", "Re"),
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "Re"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionSearchFunctionEnter", "Main"),
            ("ExceptionSearchCatcherFound", "Main"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Re"),
            ("ExceptionUnwindFunctionLeave", ""),
            ("ExceptionUnwindFunctionEnter", "Main"),
            ("ExceptionCatcherEnter", "Main"),
            ("ExceptionCatcherLeave", ""),
        ];
        let (account, v) = check_exceptions(&seq(&s));
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(
            (
                account.thrown,
                account.caught,
                account.nested,
                account.abandoned
            ),
            (2, 2, 1, 1)
        );
        // Without the second exception unwinding `Re`, the first stays open.
        let mut cut = s.clone();
        cut.drain(12..14);
        cut.insert(12, ("ExceptionUnwindFunctionEnter", "Main"));
        cut.truncate(15);
        let (_, v) = check_exceptions(&seq(&cut));
        assert!(!v.is_empty());
    }

    #[test]
    fn throw_outside_a_handler_is_rejected() {
        let s = vec![
            ("ExceptionThrown", ""),
            ("ExceptionSearchFunctionEnter", "A"),
            ("ExceptionSearchFunctionLeave", ""),
            ("ExceptionThrown", ""),
        ];
        let (_, v) = check_exceptions(&seq(&s));
        assert!(v.iter().any(|m| m.contains("runs no handler")), "{v:?}");
    }

    #[test]
    fn pairs_and_windows() {
        let ok = vec![
            json!({"event": "ClassLoadStarted", "t": 1, "id": 5}),
            json!({"event": "ClassLoadFinished", "t": 1, "id": 5}),
            json!({"event": "ClassUnloadStarted", "t": 2, "id": 5}),
            json!({"event": "ClassUnloadFinished", "t": 2, "id": 5}),
        ];
        assert!(check_started_finished(&ok).is_empty());
        assert!(check_validity_windows(&ok).is_empty());
        let wrong_thread = vec![
            json!({"event": "ClassLoadStarted", "t": 1, "id": 5}),
            json!({"event": "ClassLoadFinished", "t": 2, "id": 5}),
        ];
        assert_eq!(check_started_finished(&wrong_thread).len(), 2);
        let rejected = vec![
            json!({"event": "JITCachedFunctionSearchStarted", "t": 1, "id": 9}),
            json!({"event": "JITCompilationStarted", "t": 1, "id": 9}),
            json!({"event": "JITCompilationFinished", "t": 1, "id": 9}),
        ];
        assert!(check_started_finished(&rejected).is_empty());
        let never = vec![json!({"event": "JITCachedFunctionSearchStarted", "t": 1, "id": 9})];
        assert_eq!(check_started_finished(&never).len(), 1);
        let stale = vec![
            json!({"event": "ThreadCreated", "t": 1, "id": 7}),
            json!({"event": "ThreadDestroyed", "t": 1, "id": 7}),
            json!({"event": "ThreadNameChanged", "t": 1, "id": 7}),
        ];
        assert_eq!(check_validity_windows(&stale).len(), 1);
        let named_early = vec![
            json!({"event": "ThreadNameChanged", "t": 1, "id": 7}),
            json!({"event": "ThreadCreated", "t": 2, "id": 7}),
            json!({"event": "ThreadAssignedToOSThread", "t": 2, "id": 7}),
        ];
        assert!(check_validity_windows(&named_early).is_empty());
    }

    #[test]
    fn suspensions_follow_the_protocol() {
        let r = |e: &str| json!({"event": e, "t": 1});
        let ok = vec![
            r("RuntimeSuspendStarted"),
            r("RuntimeSuspendFinished"),
            r("RuntimeResumeStarted"),
            r("RuntimeResumeFinished"),
        ];
        assert_eq!(check_suspensions(&ok), (1, vec![]));
        let bad = vec![r("RuntimeSuspendStarted"), r("RuntimeResumeStarted")];
        assert_eq!(check_suspensions(&bad).1.len(), 1);
    }
}
