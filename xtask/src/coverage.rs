//! `cargo xtask coverage [--check]`: the coverage table of the profiling API,
//! generated from the code into `book/src/coverage.md`.
//!
//! Every method of every `corprof.idl` interface (as `clrprof-sys/src/corprof.rs`
//! mirrors it: callbacks, Info 1–15, the enumerators, `IMethodMalloc`,
//! `ICorProfilerFunctionControl`, `ICorProfilerAssemblyReferenceProvider`)
//! must have a wrapper in the safe crate or a recorded reason in
//! [`NOT_WRAPPED`]. `--check` (what `cargo xtask test` and the xtask unit
//! test run) fails when a method has neither, when a method has both, when a
//! marker names no `corprof.idl` method, or when the committed
//! `book/src/coverage.md` differs from what the code generates now.
//!
//! # The marker convention (for everyone who adds a wrapper)
//!
//! A `fn` of the `clrprof` crate (outside `clrprof/src/testing`) wraps an IDL
//! method when **the first line of its `///` doc comment starts with the
//! method's IDL name in backticks**:
//!
//! ```text
//! /// `GetCodeInfo3` (Info4): the code chunks of one ReJIT version ...
//! pub fn code_info3(...)
//! ```
//!
//! - Every further backticked IDL name on that same first line is wrapped by
//!   the same `fn` too (`` `GetEventMask` (and `GetEventMask2` ...) ``).
//! - A name may be qualified, `` `ICorProfilerInfo4::GetCodeInfo3` ``; it
//!   must be where the plain name is ambiguous: a plain name means the one
//!   `ICorProfilerInfo*` method of that name if there is one, else the one
//!   method of that name in any interface (`SetILFunctionBody` is Info's;
//!   `ICorProfilerFunctionControl::SetILFunctionBody` needs the prefix).
//! - `*` in the interface part matches several interfaces:
//!   `` `ICorProfiler*Enum::Next` `` is the `Next` of all five enumerators.
//! - Callbacks are wrapped by the `Profiler` trait's methods, whose docs
//!   start with the callback's name the same way.
//!
//! A method without a wrapper gets a line in [`NOT_WRAPPED`] with the reason
//! (e.g. used inside an SDK part rather than exposed as a method).
//!
//! The tests column lists the unit tests (a `#[test]` fn in `clrprof/src` or
//! `clrprof/tests` whose body calls the wrapper, `.name(` or `::name(`; for
//! trait methods, one that implements it) and the real-runtime scenarios
//! (a `Scenario::new` in `tests/runtime/*.rs` that uses a fixture or example
//! crate whose source calls or implements the wrapper). The legs column
//! lists the legs whose runtime implements the interface, when a scenario
//! exercises the wrapper ([`RUNTIME_INTERFACES`], from the runtimes'
//! sources and binaries; see `book/src/info-versions.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Methods that have no wrapper of their own, with the reason.
/// Keys are `Interface::Method`; a `*` in the interface part matches several.
pub const NOT_WRAPPED: &[(&str, &str)] = &[
    (
        "ICorProfilerInfo::SetEnterLeaveFunctionHooks",
        "the .NET Framework 1.x hook shape; `clrprof::elt` installs the `3` hooks, which every CoreCLR supports",
    ),
    (
        "ICorProfilerInfo2::SetEnterLeaveFunctionHooks2",
        "the .NET Framework 2.0 hook shape; `clrprof::elt` installs the `3` hooks, which every CoreCLR supports",
    ),
    (
        "ICorProfilerInfo::SetFunctionIDMapper",
        "superseded by `SetFunctionIDMapper2`, which `clrprof::elt` installs",
    ),
    (
        "ICorProfilerInfo3::SetFunctionIDMapper2",
        "called by `clrprof::elt::install` with the SDK's own mapper, which routes each runtime's hooks to its profiler (ELT scenarios)",
    ),
    (
        "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3",
        "called by `clrprof::elt::install` (`EltOptions::fast_path`) with the SDK's trampolines: a hook is only sound as the SDK's entry point (ELT scenarios)",
    ),
    (
        "ICorProfilerInfo3::SetEnterLeaveFunctionHooks3WithInfo",
        "called by `clrprof::elt::install` (`EltOptions::with_info`) with the SDK's handlers (through a trampoline that keeps `xmm2`-`xmm7` for the enter hook of .NET Core 3.x on Linux x64): a hook is only sound as the SDK's entry point (ELT scenarios)",
    ),
    (
        "ICorProfilerCallback::RootReferences",
        "the .NET Framework 1.x form; every runtime that calls it also calls `RootReferences2` with the same roots and their kinds (`Profiler::root_references`)",
    ),
    // Issue 16 part B (branch info-b) wraps these; its wrappers' doc markers
    // make `cargo xtask coverage` ask for each line here to be dropped.
    (
        "ICorProfiler*Enum::Clone",
        "an enumerator is read once by its `ProfilerEnum` iterator; `ProfilerEnum::reset` starts it again",
    ),
];

/// Which interface versions each leg's runtime implements: `(leg, highest
/// ICorProfilerInfoN, highest ICorProfilerCallbackN it calls)`. From the
/// runtimes' sources and binaries (book/src/info-versions.md).
pub const RUNTIME_INTERFACES: &[(&str, u32, u32)] = &[
    ("linux-x64-3.1", 11, 9),
    ("linux-x64-8.0", 14, 11),
    ("linux-x64-9.0", 15, 11),
    ("linux-x64-10.0", 15, 11),
    ("linux-x64-11.0", 15, 11),
    ("win-x64-8.0", 14, 11),
    ("win-x64-10.0", 15, 11),
];

/// Interfaces without a version number of their own, and the Info or
/// Callback interface that hands them out (for the legs column).
const HANDED_OUT_BY: &[(&str, &str)] = &[
    ("ICorProfilerObjectEnum", "ICorProfilerInfo2"),
    ("ICorProfilerFunctionEnum", "ICorProfilerInfo3"),
    ("ICorProfilerModuleEnum", "ICorProfilerInfo3"),
    ("IMethodMalloc", "ICorProfilerInfo"),
    ("ICorProfilerFunctionControl", "ICorProfilerCallback4"),
    ("ICorProfilerThreadEnum", "ICorProfilerInfo4"),
    ("ICorProfilerMethodEnum", "ICorProfilerInfo6"),
    (
        "ICorProfilerAssemblyReferenceProvider",
        "ICorProfilerCallback6",
    ),
];

pub fn main(args: &[String]) -> crate::Result {
    let mut check = false;
    for a in args {
        match a.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask coverage [--check]\n\n\
                     Generates book/src/coverage.md from the code: every corprof.idl method with\n\
                     its wrapper, tests and legs, or its recorded reason. --check: fail if a method\n\
                     is unaccounted for or the committed file is stale (writes nothing)."
                );
                return Ok(());
            }
            other => return Err(format!("coverage: unknown argument `{other}`").into()),
        }
    }
    let root = crate::workspace::root();
    let report = generate(&root)?;
    let path = root.join("book").join("src").join("coverage.md");
    if check {
        check_current(&root, &report)?;
        println!(
            "coverage: {} of {} methods wrapped, {} with a recorded reason; {} is current",
            report.wrapped,
            report.total,
            report.reasoned,
            path.display()
        );
        return Ok(());
    }
    std::fs::write(&path, &report.markdown).map_err(|e| format!("{}: {e}", path.display()))?;
    if !report.problems.is_empty() {
        return Err(format!(
            "coverage (wrote {} anyway):\n  {}",
            path.display(),
            report.problems.join("\n  ")
        )
        .into());
    }
    println!(
        "coverage: {} of {} methods wrapped, {} with a recorded reason; wrote {}",
        report.wrapped,
        report.total,
        report.reasoned,
        path.display()
    );
    Ok(())
}

/// Fails when a method is unaccounted for or `book/src/coverage.md` is stale.
pub fn check_current(root: &Path, report: &Report) -> crate::Result {
    let mut problems = report.problems.clone();
    let path = root.join("book").join("src").join("coverage.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != report.markdown {
        problems.push(format!(
            "{} is stale: run `cargo xtask coverage` and commit the result",
            path.display()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("coverage:\n  {}", problems.join("\n  ")).into())
    }
}

/// One IDL method.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Method {
    interface: String,
    name: String,
}

/// What the generator found.
pub struct Report {
    /// The text of `book/src/coverage.md`.
    pub markdown: String,
    /// Methods with a wrapper.
    pub wrapped: usize,
    /// Methods with a recorded reason instead.
    pub reasoned: usize,
    /// Every method.
    pub total: usize,
    /// Unaccounted methods, markers naming nothing, reasons for wrapped methods.
    pub problems: Vec<String>,
}

/// A wrapper: where it is and what it is called.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Wrapper {
    /// `ProfilerInfo::code_info3`, `info::jit::helper`, `Profiler::shutdown`.
    display: String,
    /// The bare fn name.
    fn_name: String,
    /// Implemented (trait method) rather than called.
    is_trait_method: bool,
}

/// Reads the interfaces and methods `corprof.rs` mirrors from corprof.idl, in order.
fn idl_methods(root: &Path) -> crate::Result<Vec<Method>> {
    let path = root.join("clrprof-sys/src/corprof.rs");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("/// Mirrors `") else {
            continue;
        };
        let Some((qualified, tail)) = rest.split_once('`') else {
            continue;
        };
        if !tail.trim().starts_with("(corprof.idl)") {
            continue;
        }
        if let Some((interface, name)) = qualified.split_once("::") {
            if interface.starts_with("ICor") || interface.starts_with("IMethod") {
                out.push(Method {
                    interface: interface.to_string(),
                    name: name.to_string(),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no corprof.idl methods found in {}", path.display()).into());
    }
    Ok(out)
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The name of a `fn` declared on this line, if it declares one.
fn fn_name_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let mut rest = t;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
        "extern \"system\" ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    for prefix in ["const ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The type or trait a top-level `impl`/`trait` line is about.
fn container_of(line: &str) -> Option<(String, bool)> {
    let t = line.trim_end_matches('{').trim();
    let is_trait = t.starts_with("pub trait ")
        || t.starts_with("trait ")
        || t.starts_with("pub unsafe trait ");
    let rest = if is_trait {
        t.split_once("trait ")?.1
    } else if let Some(r) = t.strip_prefix("impl") {
        let mut r = r.trim_start();
        if r.starts_with('<') {
            // Skip the impl's generic parameters.
            let mut depth = 0usize;
            let mut cut = r.len();
            for (i, c) in r.char_indices() {
                match c {
                    '<' => depth += 1,
                    '>' => {
                        depth -= 1;
                        if depth == 0 {
                            cut = i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            r = r[cut..].trim_start();
        }
        match r.split_once(" for ") {
            Some((_, ty)) => ty,
            None => r,
        }
    } else {
        return None;
    };
    let name: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let name = name
        .trim_end_matches(':')
        .rsplit("::")
        .next()
        .unwrap_or("")
        .to_string();
    (!name.is_empty()).then_some((name, is_trait))
}

/// The backticked words that open a doc line: the first one, and every
/// further one up to the first `:` or `.` outside backticks (so
/// "`SetEventMask` / `SetEventMask2`." names two, "`ModuleLoadStarted`. ...
/// until `ModuleLoadFinished`" names one).
fn leading_markers(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 1 {
            out.push(part);
        } else if i > 0 && part.contains([':', '.']) {
            break;
        }
    }
    out
}

/// Resolves a marker (`Name`, `Iface::Name`, `ICorProfiler*Enum::Name`) to methods.
fn resolve(marker: &str, methods: &[Method]) -> Vec<Method> {
    match marker.split_once("::") {
        Some((iface, name)) => methods
            .iter()
            .filter(|m| m.name == name && glob(iface, &m.interface))
            .cloned()
            .collect(),
        None => {
            let all: Vec<&Method> = methods.iter().filter(|m| m.name == marker).collect();
            let info: Vec<&Method> = all
                .iter()
                .copied()
                .filter(|m| m.interface.starts_with("ICorProfilerInfo"))
                .collect();
            if info.len() == 1 {
                vec![info[0].clone()]
            } else if all.len() == 1 {
                vec![all[0].clone()]
            } else {
                Vec::new()
            }
        }
    }
}

/// `pattern` with at most one `*` matching any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((a, b)) => text.len() >= a.len() + b.len() && text.starts_with(a) && text.ends_with(b),
    }
}

fn is_idl_word(w: &str) -> bool {
    let name = w.rsplit("::").next().unwrap_or(w);
    !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Finds the wrappers in the safe crate by their doc markers.
fn find_wrappers(
    root: &Path,
    methods: &[Method],
    problems: &mut Vec<String>,
) -> BTreeMap<Method, BTreeSet<Wrapper>> {
    let src = root.join("clrprof/src");
    let mut found: BTreeMap<Method, BTreeSet<Wrapper>> = BTreeMap::new();
    for file in crate::workspace::rust_files(&src) {
        let rel = file.strip_prefix(&src).unwrap_or(&file);
        if rel.starts_with("testing") {
            continue;
        }
        let module = module_path(rel);
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut container: Option<(String, bool)> = None;
        let mut in_tests = false;
        for (i, line) in lines.iter().enumerate() {
            if indent_of(line) == 0 {
                if line.starts_with('}') {
                    container = None;
                    in_tests = false;
                } else if line.starts_with("#[cfg(test)]") {
                    in_tests = true;
                } else if let Some(c) = container_of(line) {
                    container = Some(c);
                }
            }
            if in_tests {
                continue;
            }
            let Some(name) = fn_name_of(line) else {
                continue;
            };
            // The doc comment above the fn (attributes may sit between).
            let mut j = i;
            let mut first_doc: Option<&str> = None;
            while j > 0 {
                j -= 1;
                let t = lines[j].trim_start();
                if let Some(doc) = t.strip_prefix("///") {
                    first_doc = Some(doc.trim());
                } else if t.starts_with("#[") || t.starts_with("#!") {
                    continue;
                } else {
                    break;
                }
            }
            let Some(doc) = first_doc else { continue };
            if !doc.starts_with('`') {
                continue;
            }
            let words = leading_markers(doc);
            let Some(first) = words.first() else { continue };
            if !is_idl_word(first) {
                continue;
            }
            let (display, is_trait_method) = match &container {
                Some((ty, is_trait)) => (format!("{ty}::{name}"), *is_trait),
                None if module.is_empty() => (name.to_string(), false),
                None => (format!("{module}::{name}"), false),
            };
            let wrapper = Wrapper {
                display,
                fn_name: name.to_string(),
                is_trait_method,
            };
            for w in &words {
                if !is_idl_word(w) {
                    continue;
                }
                let hits = resolve(w, methods);
                if hits.is_empty() {
                    // Names of other APIs (cor.h, the OS) are fine; a name
                    // qualified with a corprof.idl interface, or a plain
                    // name several interfaces share, must resolve.
                    let qualified = w.starts_with("ICorProfiler") || w.starts_with("IMethodMalloc");
                    let shared = methods.iter().filter(|m| m.name == *w).count() > 1;
                    if qualified || shared {
                        problems.push(format!(
                            "{}:{}: doc marker `{w}` names no corprof.idl method{}",
                            file.strip_prefix(root).unwrap_or(&file).display(),
                            i + 1,
                            if shared {
                                " unambiguously: qualify it"
                            } else {
                                ""
                            }
                        ));
                    }
                    continue;
                }
                for m in hits {
                    found.entry(m).or_default().insert(wrapper.clone());
                }
            }
        }
    }
    found
}

/// `info/code_versions.rs` → `info::code_versions`; `lib.rs` → ``.
fn module_path(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// A `#[test]` fn: where, its name, its body.
struct UnitTest {
    label: String,
    body: String,
}

fn unit_tests(root: &Path) -> Vec<UnitTest> {
    let mut out = Vec::new();
    for dir in [
        "clrprof/src",
        "clrprof/tests",
        "clrprof-instrumentation/src",
    ] {
        for file in crate::workspace::rust_files(&root.join(dir)) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            let file_label = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let mut i = 0;
            while i < lines.len() {
                if lines[i].trim() != "#[test]" {
                    i += 1;
                    continue;
                }
                let indent = indent_of(lines[i]);
                let mut j = i + 1;
                while j < lines.len() && fn_name_of(lines[j]).is_none() {
                    j += 1;
                }
                let Some(name) = lines.get(j).and_then(|l| fn_name_of(l)) else {
                    break;
                };
                let close = format!("{}}}", " ".repeat(indent));
                let mut k = j + 1;
                while k < lines.len() && lines[k] != close {
                    k += 1;
                }
                out.push(UnitTest {
                    label: format!("`{name}` ({file_label})"),
                    body: lines[j..k.min(lines.len())].join("\n"),
                });
                i = k;
            }
        }
    }
    out
}

/// Whether `text` calls (or, for a trait method, implements) `fn_name`.
fn uses(text: &str, w: &Wrapper) -> bool {
    if w.is_trait_method {
        text.contains(&format!("fn {}(", w.fn_name))
    } else {
        text.contains(&format!(".{}(", w.fn_name)) || text.contains(&format!("::{}(", w.fn_name))
    }
}

/// A profiler crate (fixture or example): its source, split by profiler
/// class (`#[profiler(clsid = "...")]`); the part before the first class is
/// shared by all.
struct ProfilerCrate {
    name: String,
    shared: String,
    classes: Vec<(String, String)>,
}

impl ProfilerCrate {
    /// Whether the classes a scenario (its text) loads call `w`.
    fn used_by(&self, scenario: &str, w: &Wrapper) -> bool {
        if !scenario.contains(&format!("\"{}\"", self.name)) {
            return false;
        }
        if uses(&self.shared, w) {
            return true;
        }
        let upper = scenario.to_ascii_uppercase();
        let picked: Vec<&(String, String)> = if self.classes.len() <= 1 {
            self.classes.iter().collect()
        } else {
            self.classes
                .iter()
                .filter(|(clsid, _)| upper.contains(&clsid.to_ascii_uppercase()))
                .collect()
        };
        picked.iter().any(|(_, text)| uses(text, w))
    }
}

fn profiler_crates(root: &Path) -> Vec<ProfilerCrate> {
    let mut out = Vec::new();
    for group in ["tests/fixtures", "examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
                continue;
            };
            let Some(name) = manifest.lines().find_map(|l| {
                let v = l
                    .trim()
                    .strip_prefix("name")?
                    .trim_start()
                    .strip_prefix('=')?;
                Some(v.trim().trim_matches('"').to_string())
            }) else {
                continue;
            };
            let source: String = crate::workspace::rust_files(&dir.join("src"))
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .collect::<Vec<_>>()
                .join("\n");
            const MARK: &str = "#[profiler(clsid = \"";
            let mut parts = source.split(MARK);
            let shared = parts.next().unwrap_or("").to_string();
            let classes = parts
                .map(|p| {
                    let clsid = p.split('"').next().unwrap_or("").to_string();
                    (clsid, p.to_string())
                })
                .collect();
            out.push(ProfilerCrate {
                name,
                shared,
                classes,
            });
        }
    }
    out
}

/// A real-runtime scenario: its name and the source text that defines it.
struct ScenarioText {
    name: String,
    text: String,
}

/// Whether `text` mentions the identifier `ident` (not as part of another).
fn mentions(text: &str, ident: &str) -> bool {
    let ok = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    text.match_indices(ident).any(|(i, _)| {
        ok(text[..i].chars().next_back()) && ok(text[i + ident.len()..].chars().next())
    })
}

/// A scenario's text: its `Scenario::new` chunk, the bodies of the file's
/// top-level functions it names (two levels deep), and the values of the
/// file's string constants any of that names.
fn scenarios(root: &Path) -> Vec<ScenarioText> {
    let mut out = Vec::new();
    for file in crate::workspace::rust_files(&root.join("tests/runtime")) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut fns: Vec<(String, String)> = Vec::new();
        let mut consts: Vec<(String, String)> = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if let Some(rest) = line
                .strip_prefix("const ")
                .or_else(|| line.strip_prefix("pub const "))
            {
                if let (Some((name, _)), Some(value)) =
                    (rest.split_once(':'), line.split('"').nth(1))
                {
                    consts.push((name.trim().to_string(), value.to_string()));
                }
            }
            if indent_of(line) == 0 && !line.starts_with("//") {
                if let Some(name) = fn_name_of(line) {
                    let mut k = i + 1;
                    while k < lines.len() && lines[k] != "}" {
                        k += 1;
                    }
                    fns.push((name.to_string(), lines[i..k.min(lines.len())].join("\n")));
                    i = k;
                    continue;
                }
            }
            i += 1;
        }
        let starts: Vec<usize> = text
            .match_indices("Scenario::new(")
            .map(|(i, _)| i)
            .collect();
        for (n, &s) in starts.iter().enumerate() {
            let end = starts.get(n + 1).copied().unwrap_or(text.len());
            let chunk = &text[s..end];
            let Some(q) = chunk.find('"') else { continue };
            let Some(len) = chunk[q + 1..].find('"') else {
                continue;
            };
            let name = chunk[q + 1..q + 1 + len].to_string();
            let mut all = chunk.to_string();
            for _ in 0..2 {
                let more: Vec<&str> = fns
                    .iter()
                    .filter(|(f, body)| mentions(&all, f) && !all.contains(body.as_str()))
                    .map(|(_, body)| body.as_str())
                    .collect();
                for body in more {
                    all.push('\n');
                    all.push_str(body);
                }
            }
            for (c, value) in &consts {
                if mentions(&all, c) {
                    all.push_str(&format!("\n\"{value}\""));
                }
            }
            out.push(ScenarioText { name, text: all });
        }
    }
    out
}

/// The version number of an `ICorProfilerInfoN`/`ICorProfilerCallbackN` name.
fn version_of(interface: &str, prefix: &str) -> Option<u32> {
    let rest = interface.strip_prefix(prefix)?;
    if rest.is_empty() {
        Some(1)
    } else {
        rest.parse().ok()
    }
}

/// The legs whose runtime implements `interface`, as a short text.
fn legs_for(interface: &str) -> String {
    let iface = HANDED_OUT_BY
        .iter()
        .find(|(i, _)| *i == interface)
        .map(|(_, by)| *by)
        .unwrap_or(interface);
    let legs: Vec<&str> = RUNTIME_INTERFACES
        .iter()
        .filter(|(_, info, callback)| {
            if let Some(n) = version_of(iface, "ICorProfilerInfo") {
                n <= *info
            } else if let Some(n) = version_of(iface, "ICorProfilerCallback") {
                n <= *callback
            } else {
                true
            }
        })
        .map(|(leg, _, _)| *leg)
        .collect();
    if legs.is_empty() {
        "none (no leg's runtime has it)".to_string()
    } else if legs.len() == RUNTIME_INTERFACES.len() {
        "every leg".to_string()
    } else {
        legs.join(", ")
    }
}

fn list(items: &[String], max: usize) -> String {
    if items.is_empty() {
        return "—".to_string();
    }
    let mut s = items
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > max {
        let _ = write!(s, "; and {} more", items.len() - max);
    }
    s
}

/// Builds the table and the list of problems.
pub fn generate(root: &Path) -> crate::Result<Report> {
    let methods = idl_methods(root)?;
    let mut problems = Vec::new();
    let wrappers = find_wrappers(root, &methods, &mut problems);
    let tests = unit_tests(root);
    let crates = profiler_crates(root);
    let scenarios = scenarios(root);

    let mut reasons: BTreeMap<Method, &str> = BTreeMap::new();
    for (key, reason) in NOT_WRAPPED {
        let hits = resolve(key, &methods);
        if hits.is_empty() {
            problems.push(format!(
                "NOT_WRAPPED entry `{key}` names no corprof.idl method"
            ));
        }
        for m in hits {
            reasons.insert(m, reason);
        }
    }

    let mut md = String::new();
    md.push_str(HEADER);
    let mut by_interface: Vec<(String, Vec<&Method>)> = Vec::new();
    for m in &methods {
        match by_interface.last_mut() {
            Some((i, v)) if *i == m.interface => v.push(m),
            _ => by_interface.push((m.interface.clone(), vec![m])),
        }
    }

    let (mut wrapped, mut reasoned) = (0usize, 0usize);
    let mut summary =
        String::from("| interface | methods | wrapped | recorded reason |\n|---|---|---|---|\n");
    let mut tables = String::new();
    for (interface, ms) in &by_interface {
        let (mut w_n, mut r_n) = (0usize, 0usize);
        let _ = writeln!(tables, "\n## `{interface}`\n");
        tables.push_str("| method | wrapper | unit tests | real-runtime scenarios | legs |\n|---|---|---|---|---|\n");
        for m in ms {
            let ws = wrappers.get(m);
            let reason = reasons.get(m);
            match (ws, reason) {
                (Some(ws), _) => {
                    if reason.is_some() {
                        problems.push(format!(
                            "{}::{} has a wrapper and a NOT_WRAPPED reason: drop the reason",
                            m.interface, m.name
                        ));
                    }
                    w_n += 1;
                    let names: Vec<String> =
                        ws.iter().map(|w| format!("`{}`", w.display)).collect();
                    let mut unit: Vec<String> = tests
                        .iter()
                        .filter(|t| ws.iter().any(|w| uses(&t.body, w)))
                        .map(|t| t.label.clone())
                        .collect();
                    unit.dedup();
                    let runs: Vec<String> = scenarios
                        .iter()
                        .filter(|s| {
                            crates
                                .iter()
                                .any(|c| ws.iter().any(|w| c.used_by(&s.text, w)))
                        })
                        .map(|s| format!("\"{}\"", s.name))
                        .collect();
                    let legs = if runs.is_empty() {
                        "—".to_string()
                    } else {
                        legs_for(&m.interface)
                    };
                    let _ = writeln!(
                        tables,
                        "| `{}` | {} | {} | {} | {} |",
                        m.name,
                        names.join(", "),
                        list(&unit, 3),
                        list(&runs, 3),
                        legs
                    );
                }
                (None, Some(reason)) => {
                    r_n += 1;
                    let _ = writeln!(tables, "| `{}` | not wrapped: {reason} | | | |", m.name);
                }
                (None, None) => {
                    problems.push(format!(
                        "{}::{} has neither a wrapper (doc marker) nor a NOT_WRAPPED reason",
                        m.interface, m.name
                    ));
                    let _ = writeln!(tables, "| `{}` | **unaccounted for** | | | |", m.name);
                }
            }
        }
        let _ = writeln!(summary, "| `{interface}` | {} | {w_n} | {r_n} |", ms.len());
        wrapped += w_n;
        reasoned += r_n;
    }
    let _ = writeln!(
        summary,
        "| **all** | {} | {wrapped} | {reasoned} |",
        methods.len()
    );
    md.push_str(&summary);
    md.push_str(&tables);
    Ok(Report {
        markdown: md,
        wrapped,
        reasoned,
        total: methods.len(),
        problems,
    })
}

const HEADER: &str = "# Coverage of the profiling API

<!-- Generated by `cargo xtask coverage` from the code; do not edit by hand.
     `cargo xtask test` (and `cargo test -p xtask`) fail when this file is stale
     or a corprof.idl method has neither a wrapper nor a recorded reason. -->

Every method of every `corprof.idl` interface (callbacks, `ICorProfilerInfo`
to `ICorProfilerInfo15`, the enumerators, `IMethodMalloc`,
`ICorProfilerFunctionControl`, `ICorProfilerAssemblyReferenceProvider`), with
the safe wrapper that covers it, the tests that exercise that wrapper and the
legs whose runtime has the interface, or the reason it has no wrapper.

**How a wrapper is found.** A `fn` of the `clrprof` crate wraps an IDL method
when the first line of its doc comment starts with the method's IDL name in
backticks (`` `GetCodeInfo3` ``, or qualified, `` `ICorProfilerInfo4::GetCodeInfo3` ``;
`` `ICorProfiler*Enum::Next` `` names the method of several interfaces). Every
further backticked IDL name on that first line is covered by the same `fn`.
A plain name means the `ICorProfilerInfo*` method of that name when there is
one. Callbacks are covered by the `Profiler` trait's methods, marked the same
way. A method without a wrapper has a line with its reason in
`NOT_WRAPPED` (`xtask/src/coverage.rs`).

**Tests.** Unit tests: `#[test]` functions of `clrprof/src`,
`clrprof-instrumentation/src` and
`clrprof/tests` whose body calls the wrapper (or implements it, for trait
methods), mostly against the fake runtime. Real-runtime scenarios: those of
`tests/runtime` that run a fixture or example profiler whose source calls or
implements the wrapper (a wrapper the SDK itself uses, e.g. inside the
sampler, lists only the scenarios whose profilers call it directly).
**Legs**: where a scenario exercises the wrapper, the
legs whose runtime implements the interface (see [Info versions per
runtime](info-versions.md)): `every leg` is linux-x64-3.1, 8.0, 9.0, 10.0
and 11.0 and win-x64-8.0 and 10.0. A scenario may still leave a leg out for a
known defect (the harness says which, e.g. repeated exceptions under Wine
with .NET 8).

";

#[cfg(test)]
mod tests {
    use super::*;

    fn m(i: &str, n: &str) -> Method {
        Method {
            interface: i.into(),
            name: n.into(),
        }
    }

    #[test]
    fn markers_resolve_plain_qualified_and_wildcard_names() {
        let methods = vec![
            m("ICorProfilerInfo", "SetILFunctionBody"),
            m("ICorProfilerFunctionControl", "SetILFunctionBody"),
            m("ICorProfilerObjectEnum", "Next"),
            m("ICorProfilerModuleEnum", "Next"),
            m("ICorProfilerCallback", "Shutdown"),
        ];
        assert_eq!(
            resolve("SetILFunctionBody", &methods),
            vec![methods[0].clone()]
        );
        assert_eq!(
            resolve("ICorProfilerFunctionControl::SetILFunctionBody", &methods),
            vec![methods[1].clone()]
        );
        assert_eq!(resolve("ICorProfiler*Enum::Next", &methods).len(), 2);
        assert!(resolve("Next", &methods).is_empty(), "ambiguous");
        assert_eq!(resolve("Shutdown", &methods), vec![methods[4].clone()]);
    }

    #[test]
    fn only_the_opening_markers_count() {
        assert_eq!(
            leading_markers("`SetEventMask` / `SetEventMask2`. A non-empty `x`"),
            vec!["SetEventMask", "SetEventMask2"]
        );
        assert_eq!(
            leading_markers("`GetEventMask` (and `GetEventMask2` when there is Info5)."),
            vec!["GetEventMask", "GetEventMask2"]
        );
        assert_eq!(
            leading_markers("`ModuleLoadStarted`. Incomplete until `ModuleLoadFinished`."),
            vec!["ModuleLoadStarted"]
        );
        assert_eq!(
            leading_markers("`ICorProfilerInfo4::GetCodeInfo3`: chunks"),
            vec!["ICorProfilerInfo4::GetCodeInfo3"]
        );
    }

    #[test]
    fn items_are_recognised() {
        assert_eq!(
            fn_name_of("    pub fn code_info3<'a>(&self"),
            Some("code_info3")
        );
        assert_eq!(fn_name_of("    pub(crate) unsafe fn x()"), Some("x"));
        assert_eq!(fn_name_of("    let fn_x = 1;"), None);
        assert_eq!(
            container_of("impl<'s> ProfilerInfo<'s> {"),
            Some(("ProfilerInfo".into(), false))
        );
        assert_eq!(
            container_of("impl crate::component::Component for NameCacheComponent {"),
            Some(("NameCacheComponent".into(), false))
        );
        assert_eq!(
            container_of("pub trait Profiler: Send + Sync + 'static {"),
            Some(("Profiler".into(), true))
        );
        assert_eq!(module_path(Path::new("info/mod.rs")), "info");
        assert_eq!(module_path(Path::new("info/jit.rs")), "info::jit");
    }

    /// The committed table is what the code generates, and every method is
    /// accounted for (the same check as `cargo xtask coverage --check`).
    #[test]
    fn coverage_table_is_current() {
        let root = crate::workspace::root();
        let report = generate(&root).expect("generate");
        if let Err(e) = check_current(&root, &report) {
            panic!("{e}");
        }
    }
}
