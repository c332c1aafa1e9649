//! The soundness ledger's provenance section: safe functions that take two
//! or more things that must belong together (a wrapped body and the method
//! whose ReJIT control it is installed through, a frame and the buffer being
//! named, an ID and the runtime it came from, ...), and how each relation is
//! enforced.
//!
//! # How a function is found
//!
//! Every safe `pub fn` (outside tests and trait impls) of the scanned crates
//! is read with `syn`; each of its values (the receiver's type and every
//! parameter, tuples and slices of several counted apart) is classed by the
//! names in its type:
//!
//! - *runtime*: [`RUNTIME`] (the scope or handle that calls the runtime);
//! - *scoped ID*: [`SCOPED_IDS`] (a typed ID bound to a scope's lifetime);
//! - *partner*: [`PARTNERS`] (raw IDs, metadata tokens, and SDK values made
//!   for one runtime object: controls, bodies, buffers, shapes, handles).
//!
//! A function with two or more such values is *flagged*, unless all of them
//! are the runtime and scoped IDs: those pairs are one relation (an ID and
//! the runtime it came from), enforced by lifetime for every Info method,
//! and counted under [`SCOPED`]. A flagged function must carry a marker in
//! the comment lines directly above it (or above its `impl` block, for every
//! function of the block):
//!
//! ```text
//! // provenance: wrapped-body-method
//! // provenance: none: the ID is only compared, never handed to the runtime
//! ```
//!
//! naming an entry of `xtask/ledger/rules.toml` (`[[provenance]]`: the pair,
//! how it is enforced, by `type`, `lifetime`, `checked` (an error, or a
//! harmless answer, before the runtime is called) or `runtime-checked` (the
//! runtime validates the value against its partner), and the tests that
//! pin it), or saying why the values need not belong together. `ledger
//! --check` fails for a flagged function without a marker, a marker that
//! names no entry, an entry with no test or a test that does not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use syn::visit::Visit;

/// Types whose values call the runtime.
pub const RUNTIME: &[&str] = &[
    "ProfilerInfo",
    "RuntimeHandle",
    "RuntimeSuspension",
    "SamplingThread",
];

/// Typed IDs bound to a scope.
pub const SCOPED_IDS: &[&str] = &[
    "FunctionId",
    "ClassId",
    "ModuleId",
    "AssemblyId",
    "AppDomainId",
    "ThreadId",
    "ObjectId",
    "GcHandleId",
    "ReJitId",
    "ContextId",
];

/// Values made for one runtime object, or that name one: raw IDs (any
/// `Raw*Id`), metadata tokens (any `Md*`), and these.
pub const PARTNERS: &[&str] = &[
    "FunctionControl",
    "WrappedBody",
    "FrameNamer",
    "FrameRef",
    "StackSample",
    "FrameBuffer",
    "ThreadList",
    "ThreadGate",
    "UnloadFence",
    "MethodShape",
    "Arguments",
    "ArgumentInfo",
    "ReturnValue",
    "ReturnInfo",
    "GcHandle",
    "IlBuffer",
    "MethodMalloc",
    "MetaDataImport",
    "MetaDataEmit",
    "RuntimeTagged",
    "FrameInfo",
    "SnapshotFrameInfo",
    "FrameHandle",
    "NameCache",
    "Hooked",
    "Session",
    "Provider",
    "ProviderRef",
    "Event",
    "ManagedHandlers",
];

/// The name of the implicit entry: scoped IDs with the runtime of their scope.
pub const SCOPED: &str = "id-scope-runtime";

/// The implicit entry of the scoped-only functions that take an object
/// reference: an object and the GC epoch (the no-GC scope) it was read in.
pub const OBJECT: &str = "object-epoch";

/// Enforcement kinds of an entry.
const KINDS: &[&str] = &["type", "lifetime", "checked", "runtime-checked"];

/// One `[[provenance]]` entry of rules.toml.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// The two (or more) things, in a few words.
    pub pair: String,
    /// What a wrong partner would do if nothing checked it.
    pub risk: String,
    /// `kind: how`, kind one of [`KINDS`].
    pub enforced: Vec<String>,
    /// As for rules: `ui:`, `unit:`, `runtime:`.
    pub tests: Vec<String>,
}

/// What the scan found for one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub file: String,
    pub line: usize,
    /// `Type::method` or `function`.
    pub name: String,
    /// The partner values, by type name.
    pub values: Vec<String>,
    /// Flagged by the heuristic (else: marked by hand or scoped-only).
    pub flagged: bool,
    /// Only runtime and scoped IDs (the implicit entry).
    pub scoped_only: bool,
    pub marker: Marker,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    None,
    Entry(String),
    /// `none: why`.
    NotAPair(String),
}

fn parse_marker(line: &str) -> Option<Marker> {
    let t = line.trim_start();
    let rest = t
        .strip_prefix("//")?
        .trim_start()
        .strip_prefix("provenance:")?;
    let rest = rest.trim();
    Some(match rest.strip_prefix("none:") {
        Some(why) => Marker::NotAPair(why.trim().to_string()),
        None => Marker::Entry(rest.to_string()),
    })
}

/// The marker in the comment, doc and attribute lines directly above
/// 1-based `line` (the item's first line).
fn marker_above(lines: &[&str], line: usize) -> Marker {
    let mut l = line;
    while l > 1 {
        let above = lines.get(l - 2).copied().unwrap_or("").trim_start();
        if !(above.starts_with("//") || above.starts_with("#[")) {
            break;
        }
        if let Some(m) = parse_marker(above) {
            return m;
        }
        l -= 1;
    }
    Marker::None
}

/// The classes of a type: every partner-bearing name in it, once per
/// occurrence (`&[(ModuleId, MdMethodDef)]` gives two).
fn classify(ty: &syn::Type, out: &mut Vec<String>) {
    struct Names<'a>(&'a mut Vec<String>);
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_path_segment(&mut self, s: &'ast syn::PathSegment) {
            let n = s.ident.to_string();
            if is_partner_name(&n) {
                self.0.push(n);
            }
            syn::visit::visit_path_segment(self, s);
        }
    }
    Names(out).visit_type(ty);
}

fn is_partner_name(n: &str) -> bool {
    RUNTIME.contains(&n)
        || SCOPED_IDS.contains(&n)
        || PARTNERS.contains(&n)
        || (n.starts_with("Raw") && n.ends_with("Id") && n.len() > 5)
        || (n.starts_with("Md") && n.len() > 2 && n[2..].starts_with(|c: char| c.is_uppercase()))
}

fn is_scoped_only(values: &[String]) -> bool {
    values
        .iter()
        .all(|v| RUNTIME.contains(&v.as_str()) || SCOPED_IDS.contains(&v.as_str()))
}

struct Scanner<'a> {
    file: &'a str,
    lines: &'a [&'a str],
    found: Vec<Found>,
    /// (self type, is trait impl, impl-level marker)
    impls: Vec<(String, bool, Marker)>,
    test_depth: usize,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .map(|l| l.tokens.to_string().split_whitespace().any(|w| w == "test"))
                .unwrap_or(false))
            || a.path().is_ident("test")
    })
}

fn self_type_name(t: &syn::Type) -> String {
    match t {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => self_type_name(&r.elem),
        _ => String::new(),
    }
}

impl Scanner<'_> {
    fn consider(
        &mut self,
        name: String,
        receiver: Option<&str>,
        sig: &syn::Signature,
        attrs: &[syn::Attribute],
        item_line: usize,
        impl_marker: &Marker,
    ) {
        if sig.unsafety.is_some() || self.test_depth > 0 || is_cfg_test(attrs) {
            return;
        }
        let mut values = Vec::new();
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(_) => {
                    if let Some(r) = receiver.filter(|r| is_partner_name(r)) {
                        values.push(r.to_string());
                    }
                }
                syn::FnArg::Typed(t) => classify(&t.ty, &mut values),
            }
        }
        // An `impl` block's marker is for its functions that take two or
        // more values; a function's own marker always counts.
        let marker = match marker_above(self.lines, item_line) {
            Marker::None if values.len() >= 2 => impl_marker.clone(),
            m => m,
        };
        let scoped_only = is_scoped_only(&values);
        let flagged = values.len() >= 2 && !scoped_only;
        if flagged || marker != Marker::None || (values.len() >= 2 && scoped_only) {
            self.found.push(Found {
                file: self.file.to_string(),
                line: item_line,
                name,
                values,
                flagged,
                scoped_only: scoped_only && marker == Marker::None,
                marker,
            });
        }
    }
}

impl<'ast> Visit<'ast> for Scanner<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = is_cfg_test(&m.attrs);
        self.test_depth += usize::from(test);
        syn::visit::visit_item_mod(self, m);
        self.test_depth -= usize::from(test);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if matches!(f.vis, syn::Visibility::Public(_)) {
            let line = f.sig.fn_token.span.start().line;
            self.consider(
                f.sig.ident.to_string(),
                None,
                &f.sig,
                &f.attrs,
                line,
                &Marker::None,
            );
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let line = i.impl_token.span.start().line;
        let marker = marker_above(self.lines, line);
        let test = is_cfg_test(&i.attrs);
        self.test_depth += usize::from(test);
        self.impls
            .push((self_type_name(&i.self_ty), i.trait_.is_some(), marker));
        syn::visit::visit_item_impl(self, i);
        self.impls.pop();
        self.test_depth -= usize::from(test);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let Some((ty, is_trait, marker)) = self.impls.last().cloned() else {
            return;
        };
        if is_trait || !matches!(f.vis, syn::Visibility::Public(_)) {
            return;
        }
        let line = f.sig.fn_token.span.start().line;
        self.consider(
            format!("{ty}::{}", f.sig.ident),
            Some(&ty),
            &f.sig,
            &f.attrs,
            line,
            &marker,
        );
    }
}

/// Scans one file.
pub fn scan(file: &str, text: &str) -> Result<Vec<Found>, String> {
    if file.ends_with("/tests.rs") || file.contains("/testing/") {
        return Ok(Vec::new());
    }
    let parsed = syn::parse_file(text).map_err(|e| e.to_string())?;
    if is_cfg_test(&parsed.attrs) {
        return Ok(Vec::new());
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut s = Scanner {
        file,
        lines: &lines,
        found: Vec::new(),
        impls: Vec::new(),
        test_depth: 0,
    };
    s.visit_file(&parsed);
    Ok(s.found)
}

/// The section, its problems and its notes.
pub struct Section {
    pub markdown: String,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// Checks the entries and the functions found, and renders the section;
/// `rules` is the file the entries come from, named in the problems.
pub fn section(
    rules: &str,
    entries: &[Entry],
    found: &[Found],
    resolve: &dyn Fn(&str) -> Result<String, String>,
) -> Section {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let mut names = BTreeSet::new();
    for e in entries {
        if !names.insert(e.name.as_str()) {
            problems.push(format!(
                "{}: provenance entry `{}` is defined twice",
                rules, e.name
            ));
        }
        if e.enforced.is_empty() {
            problems.push(format!(
                "{}: provenance entry `{}` says nothing enforces it",
                rules, e.name
            ));
        }
        for how in &e.enforced {
            let kind = how.split_once(':').map(|(k, _)| k.trim()).unwrap_or("");
            if !KINDS.contains(&kind) {
                problems.push(format!(
                    "{}: provenance entry `{}`: `{how}` does not start with one of {}",
                    rules,
                    e.name,
                    KINDS.join(", ")
                ));
            }
        }
        if e.tests.is_empty() {
            problems.push(format!(
                "{}: provenance entry `{}` names no test",
                rules, e.name
            ));
        }
        for t in &e.tests {
            if let Err(err) = resolve(t) {
                problems.push(format!("{}: provenance entry `{}`: {err}", rules, e.name));
            }
        }
    }
    let mut by_entry: BTreeMap<&str, Vec<&Found>> = BTreeMap::new();
    let mut not_pairs = Vec::new();
    let mut scoped = 0;
    let mut objects = 0;
    for f in found {
        match &f.marker {
            Marker::Entry(n) => {
                if names.contains(n.as_str()) {
                    by_entry.entry(n.as_str()).or_default().push(f);
                } else {
                    problems.push(format!(
                        "{}:{}: `// provenance: {n}` names no [[provenance]] entry of {}",
                        f.file, f.line, rules
                    ));
                }
            }
            Marker::NotAPair(why) if why.is_empty() => problems.push(format!(
                "{}:{}: `// provenance: none:` says no why",
                f.file, f.line
            )),
            Marker::NotAPair(_) => not_pairs.push(f),
            Marker::None if f.flagged => problems.push(format!(
                "{}:{}: `{}` takes {} that may have to belong together: say how the relation is \
                 enforced with `// provenance: ENTRY` above it (an entry of {}) or why they need \
                 not with `// provenance: none: WHY`",
                f.file,
                f.line,
                f.name,
                f.values
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                rules
            )),
            Marker::None if f.values.iter().any(|v| v == "ObjectId") => objects += 1,
            Marker::None => scoped += 1,
        }
    }
    for e in entries {
        if e.name != SCOPED && e.name != OBJECT && !by_entry.contains_key(e.name.as_str()) {
            notes.push(format!(
                "provenance entry `{}` is named by no function yet",
                e.name
            ));
        }
    }

    let mut md = String::new();
    let _ = writeln!(md, "## Provenance\n");
    let _ = writeln!(
        md,
        "Safe functions that take two or more things that must belong together, and how each relation is \
         enforced: by *type* (safe code cannot make the wrong pair), by *lifetime* (the borrow checker \
         refuses it), *checked* (the SDK compares before calling the runtime: an error, or a harmless \
         answer) or *runtime-checked* (the runtime validates the value against its partner). A function \
         is found when its receiver and parameters hold two or more runtime handles, typed or raw IDs, \
         metadata tokens or SDK values made for one runtime object (`xtask/src/provenance.rs`); each \
         carries `// provenance: ENTRY` (or `none: WHY`) and `cargo xtask ledger --check` fails for one \
         that does not. {scoped} more functions take only typed scoped IDs with the runtime of their \
         scope (entry [`{SCOPED}`](#provenance-{SCOPED})), and {objects} more an object reference \
         among them (entry [`{OBJECT}`](#provenance-{OBJECT})).\n"
    );
    let _ = writeln!(md, "| pair | enforced by | functions |");
    let _ = writeln!(md, "|---|---|---|");
    for e in entries {
        let kinds: BTreeSet<&str> = e
            .enforced
            .iter()
            .filter_map(|h| h.split_once(':').map(|(k, _)| k.trim()))
            .collect();
        let n = by_entry.get(e.name.as_str()).map_or(0, Vec::len)
            + match e.name.as_str() {
                SCOPED => scoped,
                OBJECT => objects,
                _ => 0,
            };
        let _ = writeln!(
            md,
            "| [{}](#provenance-{}) | {} | {n} |",
            e.pair.replace('|', "\\|"),
            e.name,
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    md.push('\n');
    for e in entries {
        let _ = writeln!(md, "<a id=\"provenance-{}\"></a>\n", e.name);
        let _ = writeln!(md, "### `{}`: {}\n", e.name, e.pair.trim());
        let _ = writeln!(md, "**If the partner were wrong.** {}\n", e.risk.trim());
        let _ = writeln!(md, "**Enforced by.**\n");
        for h in &e.enforced {
            let (k, how) = h.split_once(':').unwrap_or(("", h));
            let _ = writeln!(md, "- *{}*: {}", k.trim(), how.trim());
        }
        let _ = writeln!(md, "\n**Pinned by.**\n");
        for t in &e.tests {
            let shown = resolve(t).unwrap_or_else(|err| format!("MISSING: {err}"));
            let _ = writeln!(md, "- {shown}");
        }
        if e.name == SCOPED || e.name == OBJECT {
            let (n, what) = if e.name == SCOPED {
                (scoped, "typed scoped IDs, no object reference")
            } else {
                (objects, "typed scoped IDs, an object reference among them")
            };
            let _ = writeln!(
                md,
                "\n**Functions.** Every safe function whose values are only a runtime scope or handle and \
                 {what} ({n} of them).\n"
            );
            continue;
        }
        let _ = writeln!(md, "\n**Functions.**\n");
        for f in by_entry.get(e.name.as_str()).into_iter().flatten() {
            let _ = writeln!(
                md,
                "- `{}` ({}): {}",
                f.name,
                f.file,
                f.values
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        md.push('\n');
    }
    let _ = writeln!(md, "### Not pairs\n");
    let _ = writeln!(
        md,
        "Functions the search finds whose values need not belong together, and why.\n"
    );
    let _ = writeln!(md, "| function | file | why |");
    let _ = writeln!(md, "|---|---|---|");
    for f in &not_pairs {
        if let Marker::NotAPair(why) = &f.marker {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} |",
                f.name,
                f.file,
                why.replace('|', "\\|")
            );
        }
    }
    md.push('\n');
    Section {
        markdown: md,
        problems,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules file the problems name.
    const RULES: &str = "xtask/ledger/rules.toml";

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            pair: "a body and its method".into(),
            risk: "r".into(),
            enforced: vec!["checked: compared".into()],
            tests: vec!["unit:x.rs::t".into()],
        }
    }

    fn ok(_: &str) -> Result<String, String> {
        Ok("a test".into())
    }

    const SRC: &str = "pub struct FunctionControl;
pub struct WrappedBody;
impl WrappedBody {
    /// Installs.
    // provenance: body-method
    pub fn install_in_rejit(&self, control: &FunctionControl) {}
    pub fn bytes(&self) -> &[u8] { &[] }
    pub fn install(&self, info: &ProfilerInfo) {}
    pub(crate) fn hidden(&self, c: &FunctionControl) {}
    pub unsafe fn raw(&self, c: &FunctionControl) {}
}
impl ProfilerInfo<'_> {
    pub fn class_info(&self, class: ClassId<'_>) {}
    pub fn rejit(&self, methods: &[(ModuleId<'_>, MdMethodDef)]) {}
}
// provenance: none: only compared
impl FrameBuffer {
    pub fn push(&mut self, f: RawFunctionId) {}
}
#[cfg(test)]
mod tests {
    pub fn t(a: &FunctionControl, b: &WrappedBody) {}
}
";

    #[test]
    fn pairs_are_found_and_must_be_marked() {
        let found = scan("clrprof/src/a.rs", SRC).unwrap();
        let names: Vec<(&str, bool)> = found.iter().map(|f| (f.name.as_str(), f.flagged)).collect();
        assert_eq!(
            names,
            vec![
                ("WrappedBody::install_in_rejit", true),
                ("WrappedBody::install", true),
                ("ProfilerInfo::class_info", false),
                ("ProfilerInfo::rejit", true),
                ("FrameBuffer::push", true),
            ]
        );
        assert_eq!(
            found[0].marker,
            Marker::Entry("body-method".into()),
            "the marker above, past the doc comment"
        );
        assert_eq!(found[4].marker, Marker::NotAPair("only compared".into()));
        assert_eq!(
            found[3].values,
            vec!["ProfilerInfo", "ModuleId", "MdMethodDef"],
            "a slice of pairs counts each"
        );
        let s = section(RULES, &[entry("body-method")], &found, &ok);
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(s.problems[0].starts_with(
            "clrprof/src/a.rs:8: `WrappedBody::install` takes `WrappedBody`, `ProfilerInfo` that may have to belong together"
        ));
        assert!(s.problems[1].starts_with("clrprof/src/a.rs:14: `ProfilerInfo::rejit`"));
        assert!(s.markdown.contains("- `WrappedBody::install_in_rejit` (clrprof/src/a.rs): `WrappedBody`, `FunctionControl`"));
        assert!(s
            .markdown
            .contains("| `FrameBuffer::push` | clrprof/src/a.rs | only compared |"));
    }

    #[test]
    fn unknown_entries_and_bad_entries_are_problems() {
        let found = scan("clrprof/src/a.rs", SRC).unwrap();
        let mut bad = entry("other");
        bad.enforced = vec!["hope: it works".into()];
        bad.tests.clear();
        let s = section(RULES, &[bad], &found, &ok);
        assert!(s
            .problems
            .iter()
            .any(|p| p.contains("`hope: it works` does not start with one of")));
        assert!(s
            .problems
            .iter()
            .any(|p| p.contains("`other` names no test")));
        assert!(s
            .problems
            .iter()
            .any(|p| p.starts_with("clrprof/src/a.rs:6: `// provenance: body-method` names no")));
        assert!(s
            .notes
            .iter()
            .any(|n| n.contains("`other` is named by no function")));
    }
}
