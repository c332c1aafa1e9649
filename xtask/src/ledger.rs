//! `cargo xtask ledger [--check | propose [--apply] [PATH...]]`: the soundness
//! ledger, generated from the code into `book/src/soundness-ledger.md`.
//!
//! The rules live in one file, `xtask/ledger/rules.toml`: each has a short
//! stable name (`id-scope`, `buffer-protocol`, ...), the runtime rule it
//! encodes and where the runtime states it, how the SDK enforces it (`type`,
//! `lifetime`, `run-time` or `local`, the last for facts the block itself
//! establishes), and the tests that pin it (`ui:NAME` for
//! `clrprof/tests/ui/NAME.rs`, `unit:FILE::FN` for a `#[test]` fn,
//! `runtime:FILE::FN` for a real-runtime scenario `Scenario::new(.., FN)`).
//!
//! # The tag convention (for everyone who writes `unsafe`)
//!
//! Every `unsafe { .. }` block and `unsafe impl` in `clrprof/src`,
//! `clrprof-instrumentation/src`, `clrprof-mux/src`, `clrprof-sampler/src`
//! and `clrprof-sys/src` has a `// SAFETY:` comment whose
//! text starts with the rules it relies on in brackets:
//!
//! ```text
//! // SAFETY: [id-scope, buffer-protocol] `module` is valid (typed ID); `buf` has `cap` WCHARs.
//! let hr = unsafe { info.GetModuleInfo(module.as_sys(), ...) };
//! ```
//!
//! The comment is found the way clippy's `undocumented_unsafe_blocks` finds
//! it: in the comment lines directly above the statement (or struct field,
//! or match arm) that holds the block, or between that statement's first
//! line and the block. `--check` (what `cargo xtask test` runs) fails when a
//! block or impl has no tagged comment (outside the files listed in
//! `xtask/ledger/pending.txt`, which are reported as pending), when a tag
//! names no rule, when a rule names a test that does not exist, or when the
//! committed page differs from what the code generates now.
//!
//! Beside the rules, three sections come from the code itself: provenance
//! (`crate::provenance`: things that must belong together), re-entrancy
//! (`crate::reentrancy`: every lock held while code runs that may call
//! back, every thread-local, each marked `// reentrancy: ENTRY` or
//! `none: WHY`) and signal context (`crate::signals`: every function a
//! signal handler reaches, each marked `// signal-context: handler` or
//! `async-signal-safe`); `--check` fails on an unmarked case of any.
//!
//! `propose` prints, for each untagged SAFETY comment, the rules its words
//! suggest (each rule's `keywords` in rules.toml); `--apply` writes them
//! into the files. A proposal is a starting point: review the diff.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The source trees the ledger covers (relative to the workspace root).
pub const SCANNED: &[&str] = &[
    "clrprof/src",
    "clrprof-instrumentation/src",
    "clrprof-mux/src",
    "clrprof-sampler/src",
    "clrprof-sys/src",
];
/// The rules file, the pending list and the generated page.
pub const RULES: &str = "xtask/ledger/rules.toml";
pub const PENDING: &str = "xtask/ledger/pending.txt";
pub const PAGE: &str = "book/src/soundness-ledger.md";

/// The rule that names an `unsafe fn`'s own precondition; refused in safe fns.
const CALLER_CONTRACT: &str = "caller-contract";

/// The ways a rule can be enforced.
const ENFORCEMENT_KINDS: &[&str] = &["type", "lifetime", "run-time", "local"];

pub fn main(args: &[String]) -> crate::Result {
    let root = crate::workspace::root();
    match args.first().map(String::as_str) {
        None => {
            let report = generate(&root)?;
            let path = root.join(PAGE);
            std::fs::write(&path, &report.markdown)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            print_summary(&report);
            if !report.problems.is_empty() {
                return Err(format!(
                    "ledger (wrote {} anyway):\n  {}",
                    path.display(),
                    report.problems.join("\n  ")
                )
                .into());
            }
            println!("ledger: wrote {}", path.display());
            Ok(())
        }
        Some("--check") if args.len() == 1 => {
            let report = generate(&root)?;
            print_summary(&report);
            check_current(&root, &report)?;
            println!("ledger: {PAGE} is current");
            Ok(())
        }
        Some("propose") => propose(&root, &args[1..]),
        Some("-h" | "--help") => {
            println!(
                "usage: cargo xtask ledger [--check]\n       cargo xtask ledger propose [--apply] [PATH...]\n\n\
                 Generates {PAGE} from the code and {RULES}: every safe function that calls the\n\
                 runtime, reads its memory or hands out a typed ID, with the rules it relies on.\n\
                 --check: fail if an unsafe block or impl has no tagged SAFETY comment (outside the\n\
                 files of {PENDING}), a tag names no rule, a rule names a missing test, a signal\n\
                 handler reaches an unmarked function, or the page is stale (writes nothing).\n\
                 propose: suggest rules for untagged SAFETY comments by keywords (--apply writes\n\
                 them into the files; review the diff)."
            );
            Ok(())
        }
        Some(other) => Err(format!("ledger: unknown argument `{other}`").into()),
    }
}

fn print_summary(r: &Report) {
    println!(
        "ledger: {} unsafe blocks and {} unsafe impls in {} files, {} tagged, {} pending in {} files; {} rules",
        r.blocks, r.impls, r.files, r.tagged, r.pending, r.pending_files.len(), r.rules
    );
    for (file, n) in &r.pending_files {
        println!("ledger: pending: {file} ({n} untagged)");
    }
    for note in &r.notes {
        println!("ledger: note: {note}");
    }
}

/// Fails when a check fails or the committed page is stale.
pub fn check_current(root: &Path, report: &Report) -> crate::Result {
    let mut problems = report.problems.clone();
    let path = root.join(PAGE);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != report.markdown {
        problems.push(format!(
            "{} is stale: run `cargo xtask ledger` and commit the result",
            path.display()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("ledger:\n  {}", problems.join("\n  ")).into())
    }
}

// ---------------------------------------------------------------------------
// Rules

/// One rule of `rules.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub name: String,
    /// One line: what the SDK relies on.
    pub title: String,
    /// The runtime's rule, in our words.
    pub runtime: String,
    /// Where the runtime states it.
    pub source: String,
    /// `kind: how`, kind one of [`ENFORCEMENT_KINDS`].
    pub enforced: Vec<String>,
    /// `ui:NAME`, `unit:FILE::FN`, `runtime:FILE::FN`.
    pub tests: Vec<String>,
    /// Words of a SAFETY comment that suggest this rule (`propose`).
    #[serde(default)]
    pub keywords: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    rule: Vec<Rule>,
    /// The provenance entries (`crate::provenance`).
    #[serde(default)]
    provenance: Vec<crate::provenance::Entry>,
    /// The re-entrancy entries (`crate::reentrancy`).
    #[serde(default)]
    reentrancy: Vec<crate::reentrancy::Entry>,
}

/// The `[[provenance]]` entries of rules.toml.
pub fn parse_entries(text: &str) -> crate::Result<Vec<crate::provenance::Entry>> {
    let f: RulesFile = toml::from_str(text).map_err(|e| format!("{RULES}: {e}"))?;
    Ok(f.provenance)
}

/// The `[[reentrancy]]` entries of rules.toml.
pub fn parse_reentrancy(text: &str) -> crate::Result<Vec<crate::reentrancy::Entry>> {
    let f: RulesFile = toml::from_str(text).map_err(|e| format!("{RULES}: {e}"))?;
    Ok(f.reentrancy)
}

pub fn parse_rules(text: &str) -> crate::Result<Vec<Rule>> {
    let f: RulesFile = toml::from_str(text).map_err(|e| format!("{RULES}: {e}"))?;
    Ok(f.rule)
}

/// Problems of the rules themselves: names, enforcement kinds, tests that do not exist.
fn check_rules(rules: &[Rule], tests: &TestIndex) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for r in rules {
        if !is_rule_name(&r.name) {
            problems.push(format!(
                "{RULES}: `{}` is not a rule name (a-z, 0-9, -)",
                r.name
            ));
        }
        if !seen.insert(r.name.clone()) {
            problems.push(format!("{RULES}: rule `{}` is defined twice", r.name));
        }
        if r.enforced.is_empty() {
            problems.push(format!(
                "{RULES}: rule `{}` says nothing enforces it",
                r.name
            ));
        }
        for e in &r.enforced {
            let kind = e.split_once(':').map(|(k, _)| k.trim()).unwrap_or("");
            if !ENFORCEMENT_KINDS.contains(&kind) {
                problems.push(format!(
                    "{RULES}: rule `{}`: enforcement `{e}` does not start with one of {}",
                    r.name,
                    ENFORCEMENT_KINDS.join(", ")
                ));
            }
        }
        if r.tests.is_empty() {
            problems.push(format!("{RULES}: rule `{}` names no test", r.name));
        }
        for t in &r.tests {
            if let Err(e) = tests.resolve(t) {
                problems.push(format!("{RULES}: rule `{}`: {e}", r.name));
            }
        }
    }
    problems
}

fn is_rule_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

// ---------------------------------------------------------------------------
// Tests the rules name

/// Every test a rule can name: trybuild cases, `#[test]` fns, scenarios.
#[derive(Debug, Default)]
pub struct TestIndex {
    /// `clrprof/tests/ui/NAME.rs` with its `.stderr`.
    ui: BTreeSet<String>,
    /// (file, fn) of every `#[test]` fn.
    unit: BTreeSet<(String, String)>,
    /// (file, fn) → scenario title.
    scenarios: BTreeMap<(String, String), String>,
}

impl TestIndex {
    fn build(root: &Path) -> TestIndex {
        let mut index = TestIndex::default();
        for ui in [
            "clrprof/tests/ui",
            "clrprof-instrumentation/tests/ui",
            "clrprof-sampler/tests/ui",
        ] {
            for p in crate::workspace::rust_files(&root.join(ui)) {
                if p.with_extension("stderr").is_file() {
                    if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                        index.ui.insert(stem.to_string());
                    }
                }
            }
        }
        for dir in [
            "clrprof/src",
            "clrprof/tests",
            "clrprof-instrumentation/src",
            "clrprof-instrumentation/tests",
            "clrprof-mux/src",
            "clrprof-mux/tests",
            "clrprof-sampler/src",
            "clrprof-sampler/tests",
            "clrprof-sys/src",
            "clrprof-sys/tests",
            "clrprof-macros/src",
            "tests/runtime",
            "tests/src",
            "xtask/src",
        ] {
            for p in crate::workspace::rust_files(&root.join(dir)) {
                let rel = rel_path(root, &p);
                let Ok(text) = std::fs::read_to_string(&p) else {
                    continue;
                };
                index.add_file(&rel, &text);
            }
        }
        index
    }

    /// Adds the `#[test]` fns and `Scenario::new(title, fn)` calls of one file.
    fn add_file(&mut self, rel: &str, text: &str) {
        let Ok(file) = syn::parse_file(text) else {
            return;
        };
        let mut v = TestFinder { rel, index: self };
        v.visit_file(&file);
    }

    fn resolve(&self, t: &str) -> Result<String, String> {
        let (kind, what) = t
            .split_once(':')
            .ok_or_else(|| format!("test `{t}` is not `ui:`, `unit:` or `runtime:`"))?;
        match kind {
            "ui" => {
                if self.ui.contains(what) {
                    Ok(format!("trybuild `clrprof/tests/ui/{what}.rs`"))
                } else {
                    Err(format!(
                        "test `{t}`: no clrprof/tests/ui/{what}.rs with its .stderr"
                    ))
                }
            }
            "unit" => {
                let (file, f) = what
                    .rsplit_once("::")
                    .ok_or_else(|| format!("test `{t}` is not `unit:FILE::FN`"))?;
                if self.unit.contains(&(file.to_string(), f.to_string())) {
                    Ok(format!("unit test `{f}` ({file})"))
                } else {
                    Err(format!("test `{t}`: no #[test] fn `{f}` in {file}"))
                }
            }
            "runtime" => {
                let (file, f) = what
                    .rsplit_once("::")
                    .ok_or_else(|| format!("test `{t}` is not `runtime:FILE::FN`"))?;
                match self.scenarios.get(&(file.to_string(), f.to_string())) {
                    Some(title) => Ok(format!("scenario \"{title}\" ({file}, `{f}`)")),
                    None => Err(format!("test `{t}`: no `Scenario::new(.., {f})` in {file}")),
                }
            }
            _ => Err(format!("test `{t}` is not `ui:`, `unit:` or `runtime:`")),
        }
    }
}

struct TestFinder<'a> {
    rel: &'a str,
    index: &'a mut TestIndex,
}

fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .map(|l| l.tokens.to_string().split_whitespace().any(|w| w == "test"))
                .unwrap_or(false)
    })
}

impl<'ast> Visit<'ast> for TestFinder<'_> {
    /// `vec![Scenario::new(..), ..]`: the arguments of a macro, when they parse as expressions.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        use syn::punctuated::Punctuated;
        if let Ok(args) =
            m.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for e in &args {
                self.visit_expr(e);
            }
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if has_attr(&f.attrs, "test") {
            self.index
                .unit
                .insert((self.rel.to_string(), f.sig.ident.to_string()));
        }
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() >= 2
                && segs[segs.len() - 2] == "Scenario"
                && segs[segs.len() - 1] == "new"
                && c.args.len() == 2
            {
                let title = match &c.args[0] {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => s.value(),
                    _ => String::new(),
                };
                if let syn::Expr::Path(f) = &c.args[1] {
                    if let Some(last) = f.path.segments.last() {
                        self.index
                            .scenarios
                            .insert((self.rel.to_string(), last.ident.to_string()), title);
                    }
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}

// ---------------------------------------------------------------------------
// Finding unsafe blocks and their SAFETY comments

/// What the comment above an `unsafe` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// No `SAFETY:` comment at all.
    Missing,
    /// A `SAFETY:` comment without `[rules]`, at this (1-based) line.
    Untagged(usize),
    /// The rules named, and the comment's line.
    Tagged(Vec<String>, usize),
}

/// One `unsafe` block or impl.
#[derive(Debug, Clone)]
pub struct Site {
    /// 1-based line of the `unsafe` keyword.
    pub line: usize,
    pub is_impl: bool,
    pub tag: Tag,
    /// Index into [`FileScan::fns`] of the fn (or macro) holding it.
    pub func: Option<usize>,
    /// For an impl: `Send for ProfilerInfo`.
    pub what: String,
    /// Calls `from_sys` / `assume_valid` (makes a typed ID from a raw one).
    pub makes_id: bool,
}

/// A fn (or `macro_rules!`) that holds unsafe blocks.
#[derive(Debug, Clone)]
pub struct FnInfo {
    /// `ProfilerInfo::module_info`, `do_stack_snapshot`, `id!`.
    pub name: String,
    /// `pub`, `pub(crate)`, `private`, `trait impl`, `macro`.
    pub vis: String,
    pub is_unsafe: bool,
    /// Inside `#[cfg(test)]` or a `#[test]` fn.
    pub is_test: bool,
}

/// The result of scanning one file.
#[derive(Debug, Default)]
pub struct FileScan {
    pub sites: Vec<Site>,
    pub fns: Vec<FnInfo>,
}

/// The text after `SAFETY:` names its rules as `[a, b]`.
pub fn parse_tag(comment: &str) -> Option<Vec<String>> {
    let rest = comment.split_once("SAFETY:")?.1.trim_start();
    let inner = rest.strip_prefix('[')?;
    let (list, _) = inner.split_once(']')?;
    Some(
        list.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("//") && !t.starts_with("///") && !t.starts_with("//!")
}

fn is_attr(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("#[") || t.starts_with("#![")
}

/// The top of the comment-and-attribute lines directly above 1-based `stmt`.
fn group_top(lines: &[&str], stmt: usize) -> usize {
    let mut top = stmt;
    while top > 1 {
        let above = lines.get(top - 2).copied().unwrap_or("");
        if is_comment(above) || is_attr(above) {
            top -= 1;
        } else {
            break;
        }
    }
    top
}

fn tag_of(comment: &str, line: usize) -> Tag {
    match parse_tag(comment) {
        Some(rules) => Tag::Tagged(rules, line),
        None => Tag::Untagged(line),
    }
}

/// The SAFETY comment for an `unsafe` at `line` (1-based), whose enclosing
/// statements start at `stmts` (innermost last), as clippy's
/// `undocumented_unsafe_blocks` looks for it: the nearest `SAFETY:` comment
/// line between the block and the comment lines directly above its
/// innermost statement; failing that, the comment lines directly above an
/// enclosing statement (`// SAFETY: ..` over `fill(|buf| unsafe { .. })`).
fn find_tag(lines: &[&str], stmts: &[usize], line: usize) -> Tag {
    let inner = stmts.last().copied().unwrap_or(line).clamp(1, line.max(1));
    let top = group_top(lines, inner);
    let mut l = line;
    while l >= top && l >= 1 {
        let text = lines.get(l - 1).copied().unwrap_or("");
        // The block's own line counts when the comment ends it
        // (`unsafe { // SAFETY: ..`).
        let comment = if l == line {
            text.find("// SAFETY:").map(|i| &text[i..])
        } else if is_comment(text) {
            Some(text.trim_start())
        } else {
            None
        };
        if let Some(c) = comment.filter(|c| c.contains("SAFETY:")) {
            return tag_of(c, l);
        }
        l -= 1;
    }
    for &outer in stmts.iter().rev().skip(1) {
        let outer = outer.clamp(1, line.max(1));
        let top = group_top(lines, outer);
        for l in (top..outer).rev() {
            let text = lines.get(l - 1).copied().unwrap_or("");
            if is_comment(text) && text.contains("SAFETY:") {
                return tag_of(text.trim_start(), l);
            }
        }
    }
    Tag::Missing
}

struct Scanner<'a> {
    lines: &'a [&'a str],
    scan: FileScan,
    fn_stack: Vec<usize>,
    stmt_stack: Vec<usize>,
    impl_stack: Vec<(String, bool)>,
    trait_vis: Vec<String>,
    test_depth: usize,
}

fn vis_str(v: &syn::Visibility) -> String {
    match v {
        syn::Visibility::Public(_) => "pub".into(),
        syn::Visibility::Restricted(r) => {
            format!(
                "pub({})",
                quote::ToTokens::to_token_stream(&r.path)
                    .to_string()
                    .replace(' ', "")
            )
        }
        syn::Visibility::Inherited => "private".into(),
    }
}

fn type_name(t: &syn::Type) -> String {
    match t {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        other => quote::ToTokens::to_token_stream(other)
            .to_string()
            .replace(' ', ""),
    }
}

fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

fn tokens_make_id(ts: &TokenStream) -> bool {
    ts.clone().into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == "from_sys" || i == "assume_valid",
        TokenTree::Group(g) => tokens_make_id(&g.stream()),
        _ => false,
    })
}

impl Scanner<'_> {
    fn push_fn(&mut self, name: String, vis: String, is_unsafe: bool, is_test: bool) {
        self.scan.fns.push(FnInfo {
            name,
            vis,
            is_unsafe,
            is_test: is_test || self.test_depth > 0,
        });
        self.fn_stack.push(self.scan.fns.len() - 1);
    }

    fn site(&mut self, line: usize, is_impl: bool, what: String, makes_id: bool, stmt: usize) {
        let mut stmts = self.stmt_stack.clone();
        if stmts.last() != Some(&stmt) {
            stmts.push(stmt);
        }
        let tag = find_tag(self.lines, &stmts, line);
        self.scan.sites.push(Site {
            line,
            is_impl,
            tag,
            func: self.fn_stack.last().copied(),
            what,
            makes_id,
        });
    }

    fn stmt_start(&self, fallback: usize) -> usize {
        self.stmt_stack.last().copied().unwrap_or(fallback)
    }

    /// `unsafe { .. }` and `unsafe impl` inside a macro's tokens (a
    /// `macro_rules!` body or an invocation's arguments). The statement
    /// starts after the previous `;` (or at the group's start).
    fn scan_tokens(&mut self, ts: &TokenStream, group_start: usize) {
        let tokens: Vec<TokenTree> = ts.clone().into_iter().collect();
        let mut stmt = group_start;
        let mut after_semi = true;
        for (i, tt) in tokens.iter().enumerate() {
            if after_semi {
                stmt = line_of(tt.span());
                after_semi = false;
            }
            match tt {
                TokenTree::Punct(p) if p.as_char() == ';' => after_semi = true,
                TokenTree::Ident(id) if id == "unsafe" => match tokens.get(i + 1) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                        let line = line_of(id.span());
                        self.site(
                            line,
                            false,
                            String::new(),
                            tokens_make_id(&g.stream()),
                            stmt,
                        );
                    }
                    Some(TokenTree::Ident(n)) if n == "impl" => {
                        let line = line_of(id.span());
                        self.site(line, true, "(in a macro)".into(), false, stmt);
                    }
                    _ => {}
                },
                TokenTree::Group(g) => {
                    let start = line_of(g.span_open());
                    self.scan_tokens(&g.stream(), start);
                    if g.delimiter() == Delimiter::Brace {
                        // A `{ .. }` ends a statement too (`fn f() { .. }`, `=> { .. }`).
                        after_semi = true;
                    }
                }
                _ => {}
            }
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
        let test = has_attr(&f.attrs, "test") || is_cfg_test(&f.attrs);
        self.push_fn(
            f.sig.ident.to_string(),
            vis_str(&f.vis),
            f.sig.unsafety.is_some(),
            test,
        );
        let saved = std::mem::take(&mut self.stmt_stack);
        syn::visit::visit_item_fn(self, f);
        self.stmt_stack = saved;
        self.fn_stack.pop();
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = type_name(&i.self_ty);
        let trait_name = i
            .trait_
            .as_ref()
            .and_then(|(_, p, _)| p.segments.last().map(|s| s.ident.to_string()));
        if let Some(u) = &i.unsafety {
            let start = i
                .attrs
                .first()
                .map(|a| line_of(a.span()))
                .unwrap_or_else(|| line_of(u.span));
            let what = match &trait_name {
                Some(t) => format!("{t} for {ty}"),
                None => ty.clone(),
            };
            self.site(line_of(u.span), true, what, false, start);
        }
        let test = is_cfg_test(&i.attrs);
        self.test_depth += usize::from(test);
        self.impl_stack.push((ty, trait_name.is_some()));
        syn::visit::visit_item_impl(self, i);
        self.impl_stack.pop();
        self.test_depth -= usize::from(test);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let (ty, is_trait) = self.impl_stack.last().cloned().unwrap_or_default();
        let vis = if is_trait {
            "trait impl".to_string()
        } else {
            vis_str(&f.vis)
        };
        let test = has_attr(&f.attrs, "test") || is_cfg_test(&f.attrs);
        self.push_fn(
            format!("{ty}::{}", f.sig.ident),
            vis,
            f.sig.unsafety.is_some(),
            test,
        );
        let saved = std::mem::take(&mut self.stmt_stack);
        syn::visit::visit_impl_item_fn(self, f);
        self.stmt_stack = saved;
        self.fn_stack.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(u) = &t.unsafety {
            // An `unsafe trait` is a declaration, not a use; its impls are sites.
            let _ = u;
        }
        self.impl_stack.push((t.ident.to_string(), false));
        self.trait_vis.push(vis_str(&t.vis));
        syn::visit::visit_item_trait(self, t);
        self.trait_vis.pop();
        self.impl_stack.pop();
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        let (ty, _) = self.impl_stack.last().cloned().unwrap_or_default();
        let vis = self
            .trait_vis
            .last()
            .cloned()
            .unwrap_or_else(|| "private".into());
        self.push_fn(
            format!("{ty}::{}", f.sig.ident),
            vis,
            f.sig.unsafety.is_some(),
            false,
        );
        let saved = std::mem::take(&mut self.stmt_stack);
        syn::visit::visit_trait_item_fn(self, f);
        self.stmt_stack = saved;
        self.fn_stack.pop();
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        let name = m
            .ident
            .as_ref()
            .map(|i| format!("{i}!"))
            .unwrap_or_else(|| "macro".into());
        let pushed = m.ident.is_some();
        if pushed {
            self.push_fn(name, "macro".into(), false, false);
        }
        let start = m
            .attrs
            .first()
            .map(|a| line_of(a.span()))
            .unwrap_or_else(|| line_of(m.mac.path.span()));
        self.stmt_stack.push(start);
        self.scan_tokens(&m.mac.tokens, start);
        self.stmt_stack.pop();
        if pushed {
            self.fn_stack.pop();
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let start = self.stmt_start(line_of(m.path.span()));
        self.scan_tokens(&m.tokens, start);
    }

    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        self.stmt_stack.push(line_of(s.span()));
        syn::visit::visit_stmt(self, s);
        self.stmt_stack.pop();
    }

    fn visit_field_value(&mut self, f: &'ast syn::FieldValue) {
        self.stmt_stack.push(line_of(f.span()));
        syn::visit::visit_field_value(self, f);
        self.stmt_stack.pop();
    }

    fn visit_arm(&mut self, a: &'ast syn::Arm) {
        self.stmt_stack.push(line_of(a.span()));
        syn::visit::visit_arm(self, a);
        self.stmt_stack.pop();
    }

    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        self.stmt_stack.push(line_of(c.span()));
        syn::visit::visit_item_const(self, c);
        self.stmt_stack.pop();
    }

    fn visit_item_static(&mut self, c: &'ast syn::ItemStatic) {
        self.stmt_stack.push(line_of(c.span()));
        syn::visit::visit_item_static(self, c);
        self.stmt_stack.pop();
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        let line = line_of(e.unsafe_token.span);
        let stmt = self.stmt_start(line);
        let makes_id = tokens_make_id(&quote::ToTokens::to_token_stream(&e.block));
        self.site(line, false, String::new(), makes_id, stmt);
        syn::visit::visit_expr_unsafe(self, e);
    }
}

/// Scans one file's text.
pub fn scan_file(text: &str) -> Result<FileScan, String> {
    let file = syn::parse_file(text).map_err(|e| e.to_string())?;
    let lines: Vec<&str> = text.lines().collect();
    let mut s = Scanner {
        lines: &lines,
        scan: FileScan::default(),
        fn_stack: Vec::new(),
        stmt_stack: Vec::new(),
        impl_stack: Vec::new(),
        trait_vis: Vec::new(),
        test_depth: 0,
    };
    // Inner `#![cfg(test)]` of a whole file (a `tests.rs` module).
    let file_is_test = is_cfg_test(&file.attrs);
    s.test_depth += usize::from(file_is_test);
    s.visit_file(&file);
    Ok(s.scan)
}

// ---------------------------------------------------------------------------
// The report

/// What the generator found.
pub struct Report {
    pub markdown: String,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
    pub files: usize,
    pub blocks: usize,
    pub impls: usize,
    pub tagged: usize,
    pub pending: usize,
    /// Pending files with their count of untagged sites.
    pub pending_files: Vec<(String, usize)>,
    pub rules: usize,
}

/// Inputs of [`build_report`], so unit tests can feed their own.
pub struct Inputs {
    pub rules: Vec<Rule>,
    /// The provenance entries.
    pub entries: Vec<crate::provenance::Entry>,
    /// The re-entrancy entries.
    pub reentrancy: Vec<crate::reentrancy::Entry>,
    pub tests: TestIndex,
    /// Paths relative to the root.
    pub pending: BTreeSet<String>,
    /// (relative path, text).
    pub files: Vec<(String, String)>,
}

pub fn read_pending(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn rel_path(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn source_files(root: &Path) -> crate::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for dir in SCANNED {
        for p in crate::workspace::rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            files.push((rel_path(root, &p), text));
        }
    }
    Ok(files)
}

pub fn generate(root: &Path) -> crate::Result<Report> {
    let rules_path = root.join(RULES);
    let rules_text = std::fs::read_to_string(&rules_path)
        .map_err(|e| format!("{}: {e}", rules_path.display()))?;
    let rules = parse_rules(&rules_text)?;
    let entries = parse_entries(&rules_text)?;
    let reentrancy = parse_reentrancy(&rules_text)?;
    let pending = read_pending(&std::fs::read_to_string(root.join(PENDING)).unwrap_or_default());
    Ok(build_report(Inputs {
        rules,
        entries,
        reentrancy,
        tests: TestIndex::build(root),
        pending,
        files: source_files(root)?,
    }))
}

/// One listed function.
struct Listed {
    file: String,
    name: String,
    vis: String,
    blocks: usize,
    makes_id: bool,
    rules: BTreeSet<String>,
    untagged: usize,
}

pub fn build_report(inputs: Inputs) -> Report {
    let Inputs {
        rules,
        entries,
        reentrancy,
        tests,
        pending,
        files,
    } = inputs;
    let mut problems = check_rules(&rules, &tests);
    let mut notes = Vec::new();
    let known: BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    let mut uses: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
    let mut listed: Vec<Listed> = Vec::new();
    let mut impls: Vec<(String, String, Vec<String>)> = Vec::new();
    let (mut n_blocks, mut n_impls, mut tagged, mut n_pending) = (0, 0, 0, 0);
    let mut pending_files = Vec::new();
    let mut seen_pending = BTreeSet::new();
    let mut n_files = 0;

    for (rel, text) in &files {
        let scan = match scan_file(text) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{rel}: cannot parse: {e}"));
                continue;
            }
        };
        if scan.sites.is_empty() {
            continue;
        }
        n_files += 1;
        let is_pending = pending.contains(rel);
        if is_pending {
            seen_pending.insert(rel.clone());
        }
        let mut untagged_here = 0;
        let mut per_fn: BTreeMap<usize, Listed> = BTreeMap::new();
        for site in &scan.sites {
            if site.is_impl {
                n_impls += 1;
            } else {
                n_blocks += 1;
            }
            let what = if site.is_impl {
                format!("unsafe impl {}", site.what)
            } else {
                "unsafe block".to_string()
            };
            let site_rules: Vec<String> = match &site.tag {
                Tag::Tagged(r, comment_line) => {
                    if r.is_empty() {
                        problems.push(format!(
                            "{rel}:{comment_line}: the SAFETY comment of the {what} at line {} names no rule",
                            site.line
                        ));
                    }
                    for name in r {
                        if !known.contains(name.as_str()) {
                            problems.push(format!(
                                "{rel}:{comment_line}: SAFETY names `{name}`, which is no rule of {RULES}"
                            ));
                        }
                    }
                    tagged += 1;
                    r.clone()
                }
                Tag::Untagged(comment_line) => {
                    untagged_here += 1;
                    if !is_pending {
                        problems.push(format!(
                            "{rel}:{comment_line}: the SAFETY comment of the {what} at line {} names no rule: write `// SAFETY: [rule, ..] ..` (rules: {RULES})",
                            site.line
                        ));
                    }
                    Vec::new()
                }
                Tag::Missing => {
                    untagged_here += 1;
                    if !is_pending {
                        problems.push(format!(
                            "{rel}:{}: {what} without a `// SAFETY: [rule] ..` comment",
                            site.line
                        ));
                    }
                    Vec::new()
                }
            };
            let func = site.func.map(|i| &scan.fns[i]);
            if site_rules.iter().any(|r| r == CALLER_CONTRACT)
                && !func.is_some_and(|f| f.is_unsafe || f.vis == "macro")
            {
                problems.push(format!(
                    "{rel}:{}: `{CALLER_CONTRACT}` in a safe fn pushes the obligation onto a caller who cannot see it: name the rule that holds here",
                    site.line
                ));
            }
            let label = if site.is_impl {
                format!("unsafe impl {}", site.what)
            } else {
                func.map(|f| f.name.clone())
                    .unwrap_or_else(|| "(item)".into())
            };
            for r in &site_rules {
                let e = uses.entry(r.clone()).or_default();
                e.0 += 1;
                e.1.insert(format!("{rel}: {label}"));
            }
            if site.is_impl {
                impls.push((rel.clone(), site.what.clone(), site_rules));
                continue;
            }
            let Some(fi) = site.func else { continue };
            let f = &scan.fns[fi];
            // A `tests.rs` module file is declared `#[cfg(test)] mod tests;`
            // in its parent, which this file's scan cannot see.
            if f.is_unsafe || f.is_test || rel.ends_with("/tests.rs") {
                continue;
            }
            let entry = per_fn.entry(fi).or_insert_with(|| Listed {
                file: rel.clone(),
                name: f.name.clone(),
                vis: f.vis.clone(),
                blocks: 0,
                makes_id: false,
                rules: BTreeSet::new(),
                untagged: 0,
            });
            entry.blocks += 1;
            entry.makes_id |= site.makes_id;
            entry.rules.extend(site_rules);
            if !matches!(site.tag, Tag::Tagged(..)) {
                entry.untagged += 1;
            }
        }
        listed.extend(per_fn.into_values());
        if is_pending {
            n_pending += untagged_here;
            if untagged_here == 0 {
                notes.push(format!("{rel} is fully tagged: remove it from {PENDING}"));
            } else {
                pending_files.push((rel.clone(), untagged_here));
            }
        }
    }
    for p in &pending {
        if !seen_pending.contains(p) {
            notes.push(format!("{PENDING} lists {p}, which has no unsafe code"));
        }
    }
    for r in &rules {
        if !uses.contains_key(&r.name) {
            notes.push(format!(
                "rule `{}` is relied on by no SAFETY comment yet",
                r.name
            ));
        }
    }

    let mut found = Vec::new();
    for (rel, text) in &files {
        match crate::provenance::scan(rel, text) {
            Ok(f) => found.extend(f),
            Err(e) => problems.push(format!("{rel}: cannot parse: {e}")),
        }
    }
    let section = crate::provenance::section(RULES, &entries, &found, &|t| tests.resolve(t));
    problems.extend(section.problems);
    notes.extend(section.notes);
    let mut markdown = render(
        &rules,
        &tests,
        &uses,
        &listed,
        &impls,
        &pending_files,
        (n_files, n_blocks, n_impls, tagged, n_pending),
    );
    let reentrant = reentrancy_section(&reentrancy, &files, &tests);
    problems.extend(reentrant.problems);
    notes.extend(reentrant.notes);
    // The provenance and re-entrancy sections go after the rules, before
    // the functions.
    let sections = format!("{}{}", section.markdown, reentrant.markdown);
    match markdown.find("## Functions\n") {
        Some(at) => markdown.insert_str(at, &sections),
        None => markdown.push_str(&sections),
    }
    insert_signal_context(&files, &mut markdown, &mut problems, &mut notes);
    Report {
        markdown,
        problems,
        notes,
        files: n_files,
        blocks: n_blocks,
        impls: n_impls,
        tagged,
        pending: n_pending,
        pending_files,
        rules: rules.len(),
    }
}

/// The re-entrancy section (`crate::reentrancy`), over the files of its
/// crates.
fn reentrancy_section(
    entries: &[crate::reentrancy::Entry],
    files: &[(String, String)],
    tests: &TestIndex,
) -> crate::reentrancy::Section {
    let audited: Vec<(String, String)> = files
        .iter()
        .filter(|(rel, _)| {
            crate::reentrancy::SCANNED
                .iter()
                .any(|d| rel.starts_with(&format!("{d}/")))
        })
        .cloned()
        .collect();
    let names = crate::reentrancy::Names::collect(&audited);
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (rel, text) in &audited {
        match crate::reentrancy::scan(rel, text, &names) {
            Ok(f) => found.extend(f),
            Err(e) => problems.push(format!("{rel}: cannot parse: {e}")),
        }
    }
    let mut section = crate::reentrancy::section(RULES, entries, &found, &|t| tests.resolve(t));
    section.problems.splice(0..0, problems);
    section
}

/// The signal-context section (`crate::signals`), after provenance and
/// before the functions.
fn insert_signal_context(
    files: &[(String, String)],
    markdown: &mut String,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let signal = crate::signals::section(files);
    problems.extend(signal.problems);
    notes.extend(signal.notes);
    match markdown.find("## Functions\n") {
        Some(at) => markdown.insert_str(at, &signal.markdown),
        None => markdown.push_str(&signal.markdown),
    }
}

fn rule_links(rules: &BTreeSet<String>) -> String {
    rules
        .iter()
        .map(|r| format!("[`{r}`](#{r})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn escape_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[allow(clippy::type_complexity)]
fn render(
    rules: &[Rule],
    tests: &TestIndex,
    uses: &BTreeMap<String, (usize, BTreeSet<String>)>,
    listed: &[Listed],
    impls: &[(String, String, Vec<String>)],
    pending_files: &[(String, usize)],
    counts: (usize, usize, usize, usize, usize),
) -> String {
    let (n_files, n_blocks, n_impls, tagged, n_pending) = counts;
    let mut md = String::new();
    let _ = writeln!(md, "# Soundness ledger\n");
    let _ = writeln!(
        md,
        "<!-- Generated by `cargo xtask ledger` from the code and {RULES}; do not edit by hand. -->\n"
    );
    let _ = writeln!(
        md,
        "How to read this page: [Soundness](soundness.md). {n_blocks} `unsafe` blocks and {n_impls} `unsafe impl`s \
         in {n_files} files of `{}`; {tagged} name their rules, {n_pending} are pending (in files listed in \
         `{PENDING}`, to be tagged).\n",
        SCANNED.join("`, `")
    );

    let _ = writeln!(md, "## Rules\n");
    let _ = writeln!(
        md,
        "| rule | what the SDK relies on | enforced by | sites |"
    );
    let _ = writeln!(md, "|---|---|---|---|");
    for r in rules {
        let kinds: BTreeSet<&str> = r
            .enforced
            .iter()
            .filter_map(|e| e.split_once(':').map(|(k, _)| k.trim()))
            .collect();
        let sites = uses.get(&r.name).map(|u| u.0).unwrap_or(0);
        let _ = writeln!(
            md,
            "| [`{0}`](#{0}) | {1} | {2} | {sites} |",
            r.name,
            escape_cell(&r.title),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    md.push('\n');
    for r in rules {
        let _ = writeln!(md, "### `{}`\n", r.name);
        let _ = writeln!(md, "{}\n", r.title.trim());
        let _ = writeln!(md, "**The runtime's rule.** {}\n", r.runtime.trim());
        let _ = writeln!(md, "**Where it says so.** {}\n", r.source.trim());
        let _ = writeln!(md, "**Enforced by.**\n");
        for e in &r.enforced {
            let (k, how) = e.split_once(':').unwrap_or(("", e));
            let _ = writeln!(md, "- *{}*: {}", k.trim(), how.trim());
        }
        let _ = writeln!(md, "\n**Pinned by.**\n");
        for t in &r.tests {
            let shown = tests.resolve(t).unwrap_or_else(|e| format!("MISSING: {e}"));
            let _ = writeln!(md, "- {shown}");
        }
        let n = uses
            .get(&r.name)
            .map(|u| (u.0, u.1.len()))
            .unwrap_or((0, 0));
        let _ = writeln!(
            md,
            "\n**Relied on by** {} `unsafe` sites in {} functions and impls.\n",
            n.0, n.1
        );
    }

    let _ = writeln!(md, "## Functions\n");
    let _ = writeln!(
        md,
        "Every safe function (outside tests) that holds an `unsafe` block: it calls the runtime, reads memory the \
         runtime owns, or makes a typed ID from a raw one (*typed ID*: the block calls `from_sys` or \
         `assume_valid`). *pending*: blocks not tagged yet.\n"
    );
    let mut by_file: BTreeMap<&str, Vec<&Listed>> = BTreeMap::new();
    for l in listed {
        by_file.entry(&l.file).or_default().push(l);
    }
    for (file, fns) in by_file {
        let _ = writeln!(md, "### {file}\n");
        let _ = writeln!(md, "| function | visibility | blocks | typed ID | rules |");
        let _ = writeln!(md, "|---|---|---|---|---|");
        for l in fns {
            let mut rules = rule_links(&l.rules);
            if l.untagged > 0 {
                if !rules.is_empty() {
                    rules.push_str(", ");
                }
                let _ = write!(rules, "*pending* ({})", l.untagged);
            }
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} |",
                l.name,
                l.vis,
                l.blocks,
                if l.makes_id { "yes" } else { "" },
                rules
            );
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Unsafe impls\n");
    let _ = writeln!(md, "| file | impl | rules |");
    let _ = writeln!(md, "|---|---|---|");
    for (file, what, rules) in impls {
        let set: BTreeSet<String> = rules.iter().cloned().collect();
        let shown = if set.is_empty() {
            "*pending*".to_string()
        } else {
            rule_links(&set)
        };
        let _ = writeln!(md, "| {file} | `unsafe impl {what}` | {shown} |");
    }
    md.push('\n');

    let _ = writeln!(md, "## Pending\n");
    if pending_files.is_empty() {
        let _ = writeln!(md, "Nothing: every `unsafe` names its rules.");
    } else {
        let _ = writeln!(
            md,
            "Files listed in `{PENDING}` whose `unsafe` code does not name its rules yet (the check reports them \
             and passes; every other file must be fully tagged).\n"
        );
        let _ = writeln!(md, "| file | untagged |");
        let _ = writeln!(md, "|---|---|");
        for (f, n) in pending_files {
            let _ = writeln!(md, "| {f} | {n} |");
        }
    }
    md
}

// ---------------------------------------------------------------------------
// propose

/// The rules whose keywords occur in `comment` (case-insensitive), best first.
pub fn suggest(rules: &[Rule], comment: &str) -> Vec<String> {
    let lower = comment.to_lowercase();
    let mut scored: Vec<(usize, usize, &str)> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let hits = r
                .keywords
                .iter()
                .filter(|k| lower.contains(&k.to_lowercase()))
                .count();
            (hits > 0).then_some((hits, i, r.name.as_str()))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, _, n)| n.to_string())
        .collect()
}

/// The full text of the comment group starting at 1-based `line`.
fn comment_text(lines: &[&str], line: usize) -> String {
    let mut out = String::new();
    let mut l = line;
    while let Some(t) = lines.get(l - 1) {
        if l != line && (!is_comment(t) || t.contains("SAFETY:")) {
            break;
        }
        let c = match t.find("//") {
            Some(i) => &t[i + 2..],
            None => break,
        };
        out.push_str(c.trim());
        out.push(' ');
        l += 1;
    }
    out
}

fn propose(root: &Path, args: &[String]) -> crate::Result {
    let apply = args.iter().any(|a| a == "--apply");
    let paths: Vec<&String> = args.iter().filter(|a| *a != "--apply").collect();
    let rules_path = root.join(RULES);
    let rules = parse_rules(
        &std::fs::read_to_string(&rules_path)
            .map_err(|e| format!("{}: {e}", rules_path.display()))?,
    )?;
    let mut total = 0;
    for (rel, text) in source_files(root)? {
        if !paths.is_empty() && !paths.iter().any(|p| rel.starts_with(p.as_str())) {
            continue;
        }
        let scan = scan_file(&text).map_err(|e| format!("{rel}: {e}"))?;
        let lines: Vec<&str> = text.lines().collect();
        let mut edits: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let mut last: Option<Vec<String>> = None;
        for site in &scan.sites {
            match &site.tag {
                Tag::Untagged(l) => {
                    if edits.contains_key(l) {
                        continue;
                    }
                    let c = comment_text(&lines, *l);
                    let mut s = suggest(&rules, &c);
                    // "as above": the rules of the previous comment of this file.
                    let lower = c.trim_start_matches("SAFETY:").trim().to_lowercase();
                    if ["as above", "see above", "as for ", "as in "]
                        .iter()
                        .any(|p| lower.starts_with(p))
                    {
                        if let Some(prev) = last.clone() {
                            s = prev;
                        }
                    }
                    if !s.is_empty() {
                        last = Some(s.clone());
                    }
                    println!(
                        "{rel}:{l}: [{}] {}",
                        if s.is_empty() {
                            "?".to_string()
                        } else {
                            s.join(", ")
                        },
                        c.trim()
                    );
                    edits.insert(*l, s);
                    total += 1;
                }
                Tag::Missing => {
                    println!("{rel}:{}: no SAFETY comment: write one", site.line);
                    total += 1;
                }
                Tag::Tagged(r, _) => last = Some(r.clone()),
            }
        }
        if apply && edits.values().any(|s| !s.is_empty()) {
            let mut out = String::with_capacity(text.len() + edits.len() * 24);
            for (i, line) in text.split_inclusive('\n').enumerate() {
                match edits.get(&(i + 1)) {
                    Some(s) if !s.is_empty() => {
                        out.push_str(&line.replacen(
                            "SAFETY:",
                            &format!("SAFETY: [{}]", s.join(", ")),
                            1,
                        ));
                    }
                    _ => out.push_str(line),
                }
            }
            let path = root.join(&rel);
            std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    println!(
        "ledger propose: {total} untagged site(s){}",
        if apply {
            "; proposals written: review the diff"
        } else {
            ""
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES_TOML: &str = r#"
[[rule]]
name = "id-scope"
title = "t"
runtime = "r"
source = "s"
enforced = ["lifetime: x"]
tests = ["unit:clrprof/src/ids.rs::ids_work"]
keywords = ["typed ID"]

[[rule]]
name = "buffer-protocol"
title = "t"
runtime = "r"
source = "s"
enforced = ["local: y"]
tests = ["ui:id_cannot_escape"]
keywords = ["cap", "buffer protocol"]
"#;

    fn index() -> TestIndex {
        let mut t = TestIndex::default();
        t.add_file(
            "clrprof/src/ids.rs",
            "#[cfg(test)] mod tests { #[test] fn ids_work() {} }",
        );
        t.ui.insert("id_cannot_escape".into());
        t
    }

    fn report(src: &str, pending: &[&str]) -> Report {
        build_report(Inputs {
            rules: parse_rules(RULES_TOML).unwrap(),
            entries: Vec::new(),
            reentrancy: Vec::new(),
            tests: index(),
            pending: pending.iter().map(|s| s.to_string()).collect(),
            files: vec![("clrprof/src/a.rs".into(), src.into())],
        })
    }

    const TAGGED: &str = "pub fn f(id: u32) -> u32 {
    // SAFETY: [id-scope, buffer-protocol] `id` is a typed ID; `buf` has `cap` slots.
    let x = unsafe { call(id) };
    let y = Wrapper {
        // SAFETY: [id-scope] derived.
        field: unsafe { FunctionId::from_sys(x) },
    };
    // SAFETY: [buffer-protocol] a multi-line
    // statement.
    fill(|buf| {
        g(buf);
        h(unsafe { read(buf) })
    });
    y
}
// SAFETY: [id-scope] the type holds nothing thread-bound.
unsafe impl Send for Wrapper {}
";

    #[test]
    fn tagged_blocks_pass() {
        let r = report(TAGGED, &[]);
        assert_eq!(r.problems, Vec::<String>::new());
        assert_eq!((r.blocks, r.impls, r.tagged), (3, 1, 4));
        assert!(r.markdown.contains("| `f` | pub | 3 | yes | [`buffer-protocol`](#buffer-protocol), [`id-scope`](#id-scope) |"), "{}", r.markdown);
        assert!(r.markdown.contains("`unsafe impl Send for Wrapper`"));
    }

    #[test]
    fn untagged_and_missing_blocks_are_detected() {
        let src = "fn f() {
    // SAFETY: no rule named here.
    let x = unsafe { call() };
    let y = unsafe { call() };
}
unsafe impl Sync for W {}
";
        let r = report(src, &[]);
        assert_eq!(r.problems.len(), 3, "{:?}", r.problems);
        assert!(r.problems[0].starts_with(
            "clrprof/src/a.rs:2: the SAFETY comment of the unsafe block at line 3 names no rule"
        ));
        assert!(r.problems[1].starts_with("clrprof/src/a.rs:4: unsafe block without"));
        assert!(r.problems[2].starts_with("clrprof/src/a.rs:6: unsafe impl Sync for W without"));
        // Pending: reported, not failed.
        let r = report(src, &["clrprof/src/a.rs"]);
        assert_eq!(r.problems, Vec::<String>::new());
        assert_eq!(r.pending, 3);
        assert_eq!(r.pending_files, vec![("clrprof/src/a.rs".to_string(), 3)]);
        assert!(r.markdown.contains("| clrprof/src/a.rs | 3 |"));
    }

    #[test]
    fn a_comment_of_another_statement_does_not_count() {
        let src = "fn f() {
    // SAFETY: [id-scope] for the first.
    let x = unsafe { call() };

    let y = 1;
    let z = unsafe { call() };
}
";
        let r = report(src, &[]);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].starts_with("clrprof/src/a.rs:6: unsafe block without"));
    }

    #[test]
    fn blocks_in_macros_are_found() {
        let src = "macro_rules! id {
    ($v:expr) => {
        // SAFETY: [id-scope] from a callback argument.
        unsafe { FunctionId::from_sys($v) }
    };
}
fn g() {
    vec![1, unsafe { call() }];
}
";
        let r = report(src, &[]);
        assert_eq!(r.blocks, 2);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].starts_with("clrprof/src/a.rs:8: unsafe block without"));
        assert!(r.markdown.contains("| `id!` | macro | 1 | yes |"));
    }

    #[test]
    fn unknown_rule_is_detected() {
        let src = "fn f() {
    // SAFETY: [id-scope, no-such-rule] text.
    unsafe { call() };
}
";
        let r = report(src, &[]);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].contains("`no-such-rule`, which is no rule"));
        // Pending files do not excuse an unknown rule.
        let r = report(src, &["clrprof/src/a.rs"]);
        assert_eq!(r.problems.len(), 1);
    }

    #[test]
    fn missing_test_is_detected() {
        let mut rules = parse_rules(RULES_TOML).unwrap();
        rules[0]
            .tests
            .push("unit:clrprof/src/ids.rs::no_such_test".into());
        rules[1].tests.push("ui:no_such_case".into());
        rules[1]
            .tests
            .push("runtime:tests/runtime/unload.rs::nothing".into());
        let r = build_report(Inputs {
            rules,
            entries: Vec::new(),
            reentrancy: Vec::new(),
            tests: index(),
            pending: BTreeSet::new(),
            files: vec![("clrprof/src/a.rs".into(), TAGGED.into())],
        });
        assert_eq!(r.problems.len(), 3, "{:?}", r.problems);
        assert!(r.problems[0].contains("no #[test] fn `no_such_test` in clrprof/src/ids.rs"));
        assert!(r.problems[1].contains("no clrprof/tests/ui/no_such_case.rs"));
        assert!(
            r.problems[2].contains("no `Scenario::new(.., nothing)` in tests/runtime/unload.rs")
        );
    }

    #[test]
    fn caller_contract_only_in_unsafe_fns() {
        let mut rules = parse_rules(RULES_TOML).unwrap();
        let mut cc = rules[0].clone();
        cc.name = CALLER_CONTRACT.into();
        rules.push(cc);
        let src = "pub unsafe fn ok(p: *const u8) -> u8 {
    // SAFETY: [caller-contract] `p` is readable (this fn's precondition).
    unsafe { *p }
}
pub fn not_ok(p: *const u8) -> u8 {
    // SAFETY: [caller-contract] guaranteed by the caller.
    unsafe { *p }
}
";
        let r = build_report(Inputs {
            rules,
            entries: Vec::new(),
            reentrancy: Vec::new(),
            tests: index(),
            pending: BTreeSet::new(),
            files: vec![("clrprof/src/a.rs".into(), src.into())],
        });
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].starts_with("clrprof/src/a.rs:7: `caller-contract` in a safe fn"));
    }

    #[test]
    fn scenarios_are_found() {
        let mut t = TestIndex::default();
        t.add_file(
            "tests/runtime/x.rs",
            "pub fn scenarios() -> Vec<Scenario> { vec![Scenario::new(\"x: the title\", the_fn)] }",
        );
        assert_eq!(
            t.resolve("runtime:tests/runtime/x.rs::the_fn").unwrap(),
            "scenario \"x: the title\" (tests/runtime/x.rs, `the_fn`)"
        );
    }

    #[test]
    fn stale_page_is_detected() {
        let dir = std::env::temp_dir().join(format!("xtask-ledger-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("book/src")).unwrap();
        let r = report(TAGGED, &[]);
        std::fs::write(dir.join(PAGE), "old").unwrap();
        let e = check_current(&dir, &r).unwrap_err().to_string();
        assert!(e.contains("is stale"), "{e}");
        std::fs::write(dir.join(PAGE), &r.markdown).unwrap();
        assert!(check_current(&dir, &r).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn proposals_follow_keywords() {
        let rules = parse_rules(RULES_TOML).unwrap();
        assert_eq!(
            suggest(&rules, "`buf` has `cap` WCHARs (buffer protocol); typed ID"),
            vec!["buffer-protocol".to_string(), "id-scope".to_string()]
        );
        assert!(suggest(&rules, "nothing matches").is_empty());
    }

    /// The committed page is what the code generates, and every check passes
    /// (what `cargo xtask test` runs).
    #[test]
    fn ledger_is_current() {
        let root = crate::workspace::root();
        let report = generate(&root).unwrap();
        check_current(&root, &report).unwrap();
    }
}
