//! The soundness ledger's re-entrancy section: every SDK lock held while
//! code runs that may call back into the SDK (a user's closure or trait
//! method, a runtime call), every thread-local flag the SDK keeps, and how
//! each re-entry is kept harmless.
//!
//! The fourth review found two routes of this shape: `compilations::claim`
//! held the claim table's `Mutex` while the caller's closure ran, and the
//! closure's `is_replaced` locked it again (the application hung); and an
//! EventPipe write from the delivery callback of the profiler's own session
//! wrote again inside the write that delivered it, until the stack
//! overflowed.
//!
//! # How a site is found
//!
//! Every fn body of the scanned crates (outside tests) is read with `syn`:
//!
//! - a *lock* is a call of `.lock()` or `.try_lock()`, of `.read()` or
//!   `.write()` whose result is unwrapped, matched or `?`-ed, or of a fn of
//!   the scanned crates whose return type names a `Guard`. It is *held* to
//!   the end of the block when a `let` binds the guard itself (or to a
//!   `drop` of that name in the block), else to the end of the statement
//!   (a temporary, or an `if let` / `match` on it);
//! - a *call back* is a call that may run code that re-enters the SDK: a
//!   COM method (a PascalCase method name: the runtime's or metadata's
//!   vtables), a method of a trait users implement ([`USER_TRAITS`]), a
//!   method called on the runtime (a receiver named as in [`RUNTIME`]), an
//!   SDK method whose runtime call calls back on the thread
//!   ([`CALLS_BACK`]: `create_handle`, `force_gc`), or a call of a local
//!   binding or parameter (a closure).
//!
//! A lock held across a call back is a *site*; it must carry a marker in
//! the comment lines directly above its statement or above its fn:
//!
//! ```text
//! // reentrancy: claim-table
//! // reentrancy: none: the closure only compares two IDs
//! ```
//!
//! naming a `[[reentrancy]]` entry of `xtask/ledger/rules.toml` (what is
//! held, what runs meanwhile, what a re-entry would do, and how it is kept
//! harmless: `released` first, `guarded` (a re-entry finds a flag or a
//! `try_lock` and answers without waiting), `refused` (a checked error),
//! or `cannot` (what runs meanwhile cannot reach the lock, with the fact),
//! with the tests that pin it), or saying why the call cannot re-enter.
//! Every `thread_local!` static of the scanned crates carries a marker too
//! (above it or above its `thread_local!`): a flag is what the SDK keeps
//! per thread while it calls out. Any other item may carry one to list it
//! under its entry. `ledger --check` fails for an unmarked site or
//! thread-local, a marker that names no entry, and an entry with no test
//! or a test that does not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The crates audited.
pub const SCANNED: &[&str] = &[
    "clrprof/src",
    "clrprof-sampler/src",
    "clrprof-instrumentation/src",
    "clrprof-mux/src",
];

/// Traits whose methods users implement: calling one runs user code.
pub const USER_TRAITS: &[&str] = &[
    "Profiler",
    "Component",
    "EltHooks",
    "Flush",
    "CatchUpHandler",
    "MethodHandler",
    "StackSource",
];

/// Methods of the user traits whose names std types share (`Option::take`):
/// not counted as user code.
pub const STD_NAMES: &[&str] = &["take", "clone"];

/// Receivers (a variable's or a field's name) whose method calls reach the
/// runtime.
pub const RUNTIME: &[&str] = &["info", "rt", "runtime", "real"];

/// Methods of those receivers that do not call the runtime (a handle's
/// clone).
pub const NOT_RUNTIME: &[&str] = &["handle", "clone"];

/// SDK methods whose runtime call delivers a callback on the calling
/// thread before it returns, whatever their receiver's name:
/// `CreateHandle` delivers `HandleCreated`, `ForceGC` the collection's
/// callbacks.
pub const CALLS_BACK: &[&str] = &["create_handle", "force_gc"];

/// How an entry keeps a re-entry harmless.
const KINDS: &[&str] = &["released", "guarded", "refused", "cannot"];

/// One `[[reentrancy]]` entry of rules.toml.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    /// The lock or flag, in a few words.
    pub held: String,
    /// What runs while it is held (or set).
    pub calls: String,
    /// What a re-entry would do if nothing handled it.
    pub risk: String,
    /// `kind: how`, kind one of [`KINDS`].
    pub handled: Vec<String>,
    /// As for rules: `ui:`, `unit:`, `runtime:`.
    pub tests: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Marker {
    #[default]
    None,
    Entry(String),
    /// `none: why`.
    NotReentrant(String),
}

/// What a found item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A lock held across calls back.
    Site,
    /// A `thread_local!` static.
    ThreadLocal,
    /// Any other item with a marker.
    Marked,
}

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub file: String,
    pub line: usize,
    pub kind: Kind,
    /// The fn (`Type::method`), or the static's name.
    pub name: String,
    /// For a site: the lock, as written.
    pub lock: String,
    /// For a site: the calls back while it is held, as written, with their line.
    pub calls: Vec<String>,
    pub marker: Marker,
}

fn parse_marker(line: &str) -> Option<Marker> {
    let rest = line
        .trim_start()
        .strip_prefix("//")?
        .trim_start()
        .strip_prefix("reentrancy:")?
        .trim();
    Some(match rest.strip_prefix("none:") {
        Some(why) => Marker::NotReentrant(why.trim().to_string()),
        None => Marker::Entry(rest.to_string()),
    })
}

/// The marker in the comment and attribute lines directly above 1-based
/// `line`.
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

/// A position in the file (line, column).
type Pos = (usize, usize);

fn start(s: proc_macro2::Span) -> Pos {
    let l = s.start();
    (l.line, l.column)
}

fn end(s: proc_macro2::Span) -> Pos {
    let l = s.end();
    (l.line, l.column)
}

/// Names that hint at the crates' own facts: fns returning guards, and
/// the methods of the user traits.
#[derive(Default)]
pub struct Names {
    pub guard_fns: BTreeSet<String>,
    pub user_methods: BTreeSet<String>,
}

impl Names {
    /// Reads them from every file of the scanned crates.
    pub fn collect(files: &[(String, String)]) -> Names {
        struct V<'a>(&'a mut Names);
        impl<'ast> Visit<'ast> for V<'_> {
            fn visit_signature(&mut self, s: &'ast syn::Signature) {
                if let syn::ReturnType::Type(_, t) = &s.output {
                    let text = quote::quote!(#t).to_string();
                    if text.contains("Guard") {
                        self.0.guard_fns.insert(s.ident.to_string());
                    }
                }
                syn::visit::visit_signature(self, s);
            }
            fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
                if USER_TRAITS.contains(&t.ident.to_string().as_str()) {
                    for item in &t.items {
                        if let syn::TraitItem::Fn(f) = item {
                            let n = f.sig.ident.to_string();
                            if !STD_NAMES.contains(&n.as_str()) {
                                self.0.user_methods.insert(n);
                            }
                        }
                    }
                }
                syn::visit::visit_item_trait(self, t);
            }
        }
        let mut names = Names::default();
        for (_, text) in files {
            if let Ok(f) = syn::parse_file(text) {
                V(&mut names).visit_file(&f);
            }
        }
        names
    }
}

/// A lock taken in a fn and how long it is held.
struct Lock {
    /// The statement that takes it (its first line carries the marker).
    stmt_line: usize,
    at: Pos,
    until: Pos,
    text: String,
}

/// A call back in a fn.
struct Call {
    at: Pos,
    text: String,
}

/// Whether `e` is a lock call (see the module docs).
fn lock_call(e: &syn::Expr, names: &Names, unwrapped: bool) -> Option<String> {
    match e {
        syn::Expr::MethodCall(m) => {
            let n = m.method.to_string();
            let is_lock = (m.args.is_empty()
                && (matches!(n.as_str(), "lock" | "try_lock")
                    || (matches!(n.as_str(), "read" | "write") && unwrapped)))
                || names.guard_fns.contains(&n);
            is_lock.then(|| {
                let r = &m.receiver;
                format!("{}.{n}()", quote::quote!(#r)).replace(' ', "")
            })
        }
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p) => {
                let last = p.path.segments.last()?.ident.to_string();
                names
                    .guard_fns
                    .contains(&last)
                    .then(|| format!("{}()", quote::quote!(#p)).replace(' ', ""))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The expression under the unwrapping of a guard: `x.lock().unwrap()`,
/// `.unwrap_or_else(..)`, `.expect(..)`, `.ok()`, `.map_err(..)`, `?`; and
/// whether it was unwrapped as a lock's result is (`unwrap`,
/// `unwrap_or_else`, `expect`, `ok`: a poisoned lock is no error to pass
/// on, so `?` and `map_err` mark a `read`/`write` of something else).
fn unwrap_core(e: &syn::Expr) -> (&syn::Expr, bool) {
    let mut e = e;
    let mut unwrapped = false;
    loop {
        match e {
            syn::Expr::Try(t) => e = &t.expr,
            syn::Expr::MethodCall(m) if m.method == "map_err" => e = &m.receiver,
            syn::Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "unwrap" | "unwrap_or_else" | "expect" | "ok"
                ) =>
            {
                e = &m.receiver;
                unwrapped = true;
            }
            syn::Expr::Paren(p) => e = &p.expr,
            _ => return (e, unwrapped),
        }
    }
}

/// Finds the lock calls of one statement, not inside its nested blocks:
/// where each is, what it is, and where a temporary guard of a plain `if`
/// or `while` condition is dropped (at the condition's end, before the
/// block).
struct LockFinder<'a> {
    names: &'a Names,
    found: Vec<(Pos, String, Option<Pos>)>,
}

impl LockFinder<'_> {
    /// An `if let` / `match` scrutinee: a guard there is matched on.
    fn scrutinee(&mut self, s: &syn::Expr) {
        let core = unwrap_core(s).0;
        match lock_call(core, self.names, true) {
            Some(text) => {
                self.found.push((start(core.span()), text, None));
                if let syn::Expr::MethodCall(m) = core {
                    self.visit_expr(&m.receiver);
                }
            }
            None => self.visit_expr(s),
        }
    }
}

impl<'ast> Visit<'ast> for LockFinder<'_> {
    fn visit_block(&mut self, _: &'ast syn::Block) {}
    fn visit_item(&mut self, _: &'ast syn::Item) {}
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        match e {
            // A plain condition's temporaries are dropped before its block.
            syn::Expr::If(syn::ExprIf { cond, .. })
            | syn::Expr::While(syn::ExprWhile { cond, .. })
                if !matches!(**cond, syn::Expr::Let(_)) =>
            {
                let before = self.found.len();
                self.visit_expr(cond);
                let until = end(cond.span());
                for f in &mut self.found[before..] {
                    f.2.get_or_insert(until);
                }
                if let syn::Expr::If(i) = e {
                    if let Some((_, other)) = &i.else_branch {
                        self.visit_expr(other);
                    }
                }
                return;
            }
            syn::Expr::Let(l) => return self.scrutinee(&l.expr),
            syn::Expr::Match(m) => {
                self.scrutinee(&m.expr);
                for arm in &m.arms {
                    self.visit_arm(arm);
                }
                return;
            }
            _ => {}
        }
        let (core, unwrapped) = unwrap_core(e);
        if let Some(text) = lock_call(core, self.names, unwrapped) {
            self.found.push((start(core.span()), text, None));
            // Its receiver (or arguments) may hold another.
            match core {
                syn::Expr::MethodCall(m) => {
                    self.visit_expr(&m.receiver);
                    for a in &m.args {
                        self.visit_expr(a);
                    }
                }
                syn::Expr::Call(c) => {
                    for a in &c.args {
                        self.visit_expr(a);
                    }
                }
                _ => {}
            }
            return;
        }
        syn::visit::visit_expr(self, e);
    }
}

/// Whether `let` statement `l` binds the guard itself.
fn binds_guard(l: &syn::Local, names: &Names) -> Option<String> {
    let init = l.init.as_ref()?;
    let (core, unwrapped) = unwrap_core(&init.expr);
    lock_call(core, names, unwrapped || init.diverge.is_some())
}

fn pat_ident(p: &syn::Pat) -> Option<String> {
    match p {
        syn::Pat::Ident(i) => Some(i.ident.to_string()),
        syn::Pat::Type(t) => pat_ident(&t.pat),
        syn::Pat::TupleStruct(t) => t.elems.first().and_then(pat_ident),
        _ => None,
    }
}

fn is_drop_of(s: &syn::Stmt, name: &str) -> bool {
    let syn::Stmt::Expr(syn::Expr::Call(c), _) = s else {
        return false;
    };
    let syn::Expr::Path(f) = &*c.func else {
        return false;
    };
    f.path.is_ident("drop")
        && c.args.len() == 1
        && matches!(&c.args[0], syn::Expr::Path(a) if a.path.is_ident(name))
}

/// The locks of one fn body and the calls back in it.
struct FnScan<'a> {
    names: &'a Names,
    /// Parameters and `let` bindings (a call of one is a closure call).
    locals: BTreeSet<String>,
    locks: Vec<Lock>,
    calls: Vec<Call>,
}

impl<'ast> Visit<'ast> for FnScan<'_> {
    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_block(&mut self, b: &'ast syn::Block) {
        let block_end = end(b.brace_token.span.close());
        for (i, stmt) in b.stmts.iter().enumerate() {
            let stmt_line = stmt.span().start().line;
            let stmt_end = end(stmt.span());
            if let syn::Stmt::Local(l) = stmt {
                if let Some(name) = pat_ident(&l.pat) {
                    self.locals.insert(name);
                }
            }
            let guard = match stmt {
                syn::Stmt::Local(l) => binds_guard(l, self.names).map(|t| (t, pat_ident(&l.pat))),
                _ => None,
            };
            let mut finder = LockFinder {
                names: self.names,
                found: Vec::new(),
            };
            finder.visit_stmt(stmt);
            for (at, text, cond_end) in finder.found {
                let until = match (&guard, stmt) {
                    _ if cond_end.is_some() => cond_end.unwrap_or(stmt_end),
                    (Some((g, name)), syn::Stmt::Local(l))
                        if *g == text
                            && l.init
                                .as_ref()
                                .is_some_and(|i| at == start(unwrap_core(&i.expr).0.span())) =>
                    {
                        let dropped = name.as_ref().and_then(|n| {
                            b.stmts[i + 1..]
                                .iter()
                                .find(|s| is_drop_of(s, n))
                                .map(|s| end(s.span()))
                        });
                        dropped.unwrap_or(block_end)
                    }
                    _ => stmt_end,
                };
                self.locks.push(Lock {
                    stmt_line,
                    at,
                    until,
                    text,
                });
            }
            self.visit_stmt(stmt);
        }
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        for p in &c.inputs {
            if let Some(n) = pat_ident(p) {
                self.locals.insert(n);
            }
        }
        syn::visit::visit_expr_closure(self, c);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        let n = m.method.to_string();
        let pascal = n.chars().next().is_some_and(|c| c.is_ascii_uppercase());
        let r = &m.receiver;
        let receiver = quote::quote!(#r).to_string().replace(' ', "");
        let on_runtime = !NOT_RUNTIME.contains(&n.as_str())
            && RUNTIME.iter().any(|r| {
                receiver == *r
                    || receiver.ends_with(&format!(".{r}"))
                    || receiver.ends_with(&format!(".{r}()"))
            });
        if pascal
            || on_runtime
            || CALLS_BACK.contains(&n.as_str())
            || self.names.user_methods.contains(&n)
        {
            self.calls.push(Call {
                at: start(m.method.span()),
                text: format!("{receiver}.{n}()"),
            });
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        let callee = match &*c.func {
            syn::Expr::Path(p) if p.path.segments.len() == 1 => {
                let n = p.path.segments[0].ident.to_string();
                self.locals.contains(&n).then_some(n)
            }
            syn::Expr::Paren(p) => {
                let inner = &p.expr;
                Some(format!("({})", quote::quote!(#inner)))
            }
            _ => None,
        };
        if let Some(n) = callee {
            self.calls.push(Call {
                at: start(c.func.span()),
                text: format!("{n}()"),
            });
        }
        syn::visit::visit_expr_call(self, c);
    }
}

struct Scanner<'a> {
    file: &'a str,
    lines: &'a [&'a str],
    names: &'a Names,
    found: Vec<Found>,
    /// (type name, marker of the impl block)
    impls: Vec<(String, Marker)>,
    test_depth: usize,
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
    fn item_marker(&self, line: usize) -> Marker {
        marker_above(self.lines, line)
    }

    fn scan_fn(
        &mut self,
        name: String,
        sig: &syn::Signature,
        body: &syn::Block,
        fn_line: usize,
        outer: &Marker,
    ) {
        let mut scan = FnScan {
            names: self.names,
            locals: BTreeSet::new(),
            locks: Vec::new(),
            calls: Vec::new(),
        };
        for input in &sig.inputs {
            if let syn::FnArg::Typed(t) = input {
                if let Some(n) = pat_ident(&t.pat) {
                    scan.locals.insert(n);
                }
            }
        }
        scan.visit_block(body);
        let fn_marker = match marker_above(self.lines, fn_line) {
            Marker::None => outer.clone(),
            m => m,
        };
        for lock in &scan.locks {
            let calls: Vec<String> = scan
                .calls
                .iter()
                .filter(|c| c.at > lock.at && c.at < lock.until)
                .map(|c| format!("`{}` (line {})", c.text, c.at.0))
                .collect();
            let own = marker_above(self.lines, lock.stmt_line);
            if calls.is_empty() && own == Marker::None {
                continue;
            }
            let marker = match own {
                Marker::None => fn_marker.clone(),
                m => m,
            };
            self.found.push(Found {
                file: self.file.to_string(),
                line: lock.stmt_line,
                kind: Kind::Site,
                name: name.clone(),
                lock: lock.text.replace(' ', ""),
                calls,
                marker,
            });
        }
        // A fn marked by hand without a site: listed under its entry.
        let own = marker_above(self.lines, fn_line);
        if own != Marker::None
            && !self
                .found
                .iter()
                .any(|f| f.kind == Kind::Site && f.name == name && f.file == self.file)
        {
            self.found.push(Found {
                file: self.file.to_string(),
                line: fn_line,
                kind: Kind::Marked,
                name,
                lock: String::new(),
                calls: Vec::new(),
                marker: own,
            });
        }
    }

    /// The statics of a `thread_local!`.
    fn thread_locals(&mut self, m: &syn::Macro, macro_line: usize) {
        let outer = self.item_marker(macro_line);
        let mut tokens = m.tokens.clone().into_iter().peekable();
        while let Some(t) = tokens.next() {
            if let proc_macro2::TokenTree::Ident(i) = &t {
                if i == "static" {
                    let line = i.span().start().line;
                    let name = match tokens.peek() {
                        Some(proc_macro2::TokenTree::Ident(n)) => n.to_string(),
                        _ => "?".into(),
                    };
                    // The marker above the static, past its attributes and
                    // doc comments, or above the macro.
                    let first = first_line_of_item(self.lines, line);
                    let marker = match marker_above(self.lines, first) {
                        Marker::None => outer.clone(),
                        m => m,
                    };
                    self.found.push(Found {
                        file: self.file.to_string(),
                        line,
                        kind: Kind::ThreadLocal,
                        name,
                        lock: String::new(),
                        calls: Vec::new(),
                        marker,
                    });
                }
            }
        }
    }
}

/// The first line of the item whose `static` is at `line`: the attribute
/// and `pub` lines right above it are part of it (inside `thread_local!`,
/// doc comments are lines of their own).
fn first_line_of_item(lines: &[&str], line: usize) -> usize {
    let mut l = line;
    while l > 1 {
        let above = lines.get(l - 2).copied().unwrap_or("").trim_start();
        if above.starts_with("#[") {
            l -= 1;
        } else {
            break;
        }
    }
    l
}

impl<'ast> Visit<'ast> for Scanner<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = is_cfg_test(&m.attrs);
        self.test_depth += usize::from(test);
        syn::visit::visit_item_mod(self, m);
        self.test_depth -= usize::from(test);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if self.test_depth > 0 || is_cfg_test(&f.attrs) {
            return;
        }
        let line = f.sig.fn_token.span.start().line;
        self.scan_fn(
            f.sig.ident.to_string(),
            &f.sig,
            &f.block,
            line,
            &Marker::None,
        );
        // Nested items (fns inside fns).
        syn::visit::visit_block(self, &f.block);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if self.test_depth > 0 || is_cfg_test(&i.attrs) {
            return;
        }
        let line = i.impl_token.span.start().line;
        let marker = marker_above(self.lines, line);
        self.impls.push((self_type_name(&i.self_ty), marker));
        syn::visit::visit_item_impl(self, i);
        self.impls.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        let (ty, marker) = self.impls.last().cloned().unwrap_or_default();
        let line = f.sig.fn_token.span.start().line;
        self.scan_fn(
            format!("{ty}::{}", f.sig.ident),
            &f.sig,
            &f.block,
            line,
            &marker,
        );
        syn::visit::visit_block(self, &f.block);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            let line = f.sig.fn_token.span.start().line;
            self.scan_fn(f.sig.ident.to_string(), &f.sig, body, line, &Marker::None);
        }
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        if self.test_depth == 0 && m.mac.path.is_ident("thread_local") {
            self.thread_locals(&m.mac, m.mac.path.span().start().line);
        }
    }

    fn visit_stmt_macro(&mut self, m: &'ast syn::StmtMacro) {
        if self.test_depth == 0 && m.mac.path.is_ident("thread_local") {
            self.thread_locals(&m.mac, m.mac.path.span().start().line);
        }
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        let line = s.static_token.span.start().line;
        if self.test_depth == 0 {
            let marker = marker_above(self.lines, line);
            if marker != Marker::None {
                self.found.push(Found {
                    file: self.file.to_string(),
                    line,
                    kind: Kind::Marked,
                    name: s.ident.to_string(),
                    lock: String::new(),
                    calls: Vec::new(),
                    marker,
                });
            }
        }
    }
}

/// Scans one file.
pub fn scan(file: &str, text: &str, names: &Names) -> Result<Vec<Found>, String> {
    if file.ends_with("/tests.rs") || file.ends_with("_tests.rs") || file.contains("/testing/") {
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
        names,
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

/// Checks the entries and what was found, and renders the section.
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
                "{rules}: reentrancy entry `{}` is defined twice",
                e.name
            ));
        }
        if e.handled.is_empty() {
            problems.push(format!(
                "{rules}: reentrancy entry `{}` says nothing handles a re-entry",
                e.name
            ));
        }
        for how in &e.handled {
            let kind = how.split_once(':').map(|(k, _)| k.trim()).unwrap_or("");
            if !KINDS.contains(&kind) {
                problems.push(format!(
                    "{rules}: reentrancy entry `{}`: `{how}` does not start with one of {}",
                    e.name,
                    KINDS.join(", ")
                ));
            }
        }
        if e.tests.is_empty() {
            problems.push(format!(
                "{rules}: reentrancy entry `{}` names no test",
                e.name
            ));
        }
        for t in &e.tests {
            if let Err(err) = resolve(t) {
                problems.push(format!("{rules}: reentrancy entry `{}`: {err}", e.name));
            }
        }
    }
    let mut by_entry: BTreeMap<&str, Vec<&Found>> = BTreeMap::new();
    let mut not_reentrant = Vec::new();
    for f in found {
        match &f.marker {
            Marker::Entry(n) if names.contains(n.as_str()) => {
                by_entry.entry(n.as_str()).or_default().push(f)
            }
            Marker::Entry(n) => problems.push(format!(
                "{}:{}: `// reentrancy: {n}` names no [[reentrancy]] entry of {rules}",
                f.file, f.line
            )),
            Marker::NotReentrant(why) if why.is_empty() => problems.push(format!(
                "{}:{}: `// reentrancy: none:` says no why",
                f.file, f.line
            )),
            Marker::NotReentrant(_) => not_reentrant.push(f),
            Marker::None => match f.kind {
                Kind::Site => problems.push(format!(
                    "{}:{}: `{}` holds `{}` across {}, which may call back into the SDK: say how \
                     a re-entry is kept harmless with `// reentrancy: ENTRY` above the statement \
                     or the fn (an entry of {rules}), or why none can happen with \
                     `// reentrancy: none: WHY`",
                    f.file,
                    f.line,
                    f.name,
                    f.lock,
                    f.calls.join(", ")
                )),
                Kind::ThreadLocal => problems.push(format!(
                    "{}:{}: thread-local `{}`: say what runs while this thread's value is set \
                     and how a re-entry is handled with `// reentrancy: ENTRY` above it (an entry \
                     of {rules}), or why it is no flag with `// reentrancy: none: WHY`",
                    f.file, f.line, f.name
                )),
                Kind::Marked => {}
            },
        }
    }
    for e in entries {
        if !by_entry.contains_key(e.name.as_str()) {
            notes.push(format!(
                "reentrancy entry `{}` is named by no site or item yet",
                e.name
            ));
        }
    }
    let sites = found.iter().filter(|f| f.kind == Kind::Site).count();
    let locals = found.iter().filter(|f| f.kind == Kind::ThreadLocal).count();

    let mut md = String::new();
    let _ = writeln!(md, "## Re-entrancy\n");
    let _ = writeln!(
        md,
        "Every SDK lock held while code runs that may call back into the SDK (a user's closure or \
         trait method, a COM call into the runtime or metadata, a method called on the runtime), \
         every thread-local value the SDK keeps, and how a re-entry is kept harmless: the lock is \
         *released* first, the re-entry is *guarded* (it finds a flag or a `try_lock` and answers \
         without waiting), *refused* with a checked error, or *cannot* happen (what runs meanwhile \
         cannot reach the lock). A lock is found when a fn of `{}` takes one and holds it across \
         such a call (`xtask/src/reentrancy.rs`): {sites} sites; {locals} thread-local statics. \
         Each carries `// reentrancy: ENTRY` (or `none: WHY`) and `cargo xtask ledger --check` \
         fails for one that does not.\n",
        SCANNED.join("`, `")
    );
    let _ = writeln!(md, "| held | handled | sites and items |");
    let _ = writeln!(md, "|---|---|---|");
    for e in entries {
        let kinds: BTreeSet<&str> = e
            .handled
            .iter()
            .filter_map(|h| h.split_once(':').map(|(k, _)| k.trim()))
            .collect();
        let n = by_entry.get(e.name.as_str()).map_or(0, Vec::len);
        let _ = writeln!(
            md,
            "| [{}](#reentrancy-{}) | {} | {n} |",
            e.held.replace('|', "\\|"),
            e.name,
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    md.push('\n');
    for e in entries {
        let _ = writeln!(md, "<a id=\"reentrancy-{}\"></a>\n", e.name);
        let _ = writeln!(md, "### `{}`: {}\n", e.name, e.held.trim());
        let _ = writeln!(md, "**What runs meanwhile.** {}\n", e.calls.trim());
        let _ = writeln!(md, "**If it re-entered.** {}\n", e.risk.trim());
        let _ = writeln!(md, "**Handled by.**\n");
        for h in &e.handled {
            let (k, how) = h.split_once(':').unwrap_or(("", h));
            let _ = writeln!(md, "- *{}*: {}", k.trim(), how.trim());
        }
        let _ = writeln!(md, "\n**Pinned by.**\n");
        for t in &e.tests {
            let shown = resolve(t).unwrap_or_else(|err| format!("MISSING: {err}"));
            let _ = writeln!(md, "- {shown}");
        }
        let _ = writeln!(md, "\n**Sites and items.**\n");
        for f in by_entry.get(e.name.as_str()).into_iter().flatten() {
            let _ = writeln!(md, "- {}", describe(f));
        }
        md.push('\n');
    }
    let _ = writeln!(md, "### Not re-entrant\n");
    let _ = writeln!(
        md,
        "Sites the search finds whose calls cannot re-enter, and thread-locals that are no flag, \
         with why.\n"
    );
    let _ = writeln!(md, "| site or item | why |");
    let _ = writeln!(md, "|---|---|");
    for f in &not_reentrant {
        if let Marker::NotReentrant(why) = &f.marker {
            let _ = writeln!(
                md,
                "| {} | {} |",
                describe(f).replace('|', "\\|"),
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

fn describe(f: &Found) -> String {
    match f.kind {
        Kind::Site => format!(
            "`{}` ({}): `{}` held across {}",
            f.name,
            f.file,
            f.lock,
            if f.calls.is_empty() {
                "nothing the search sees".to_string()
            } else {
                f.calls
                    .iter()
                    .map(|c| c.split(" (line").next().unwrap_or(c).to_string())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        Kind::ThreadLocal => format!("thread-local `{}` ({})", f.name, f.file),
        Kind::Marked => format!("`{}` ({})", f.name, f.file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "use std::sync::Mutex;
static TABLE: Mutex<u32> = Mutex::new(0);
fn table() -> std::sync::MutexGuard<'static, u32> { TABLE.lock().unwrap() }
pub fn claim(install: impl FnOnce() -> u32) -> u32 {
    let t = table();
    install() + *t
}
pub fn released(install: impl FnOnce() -> u32) -> u32 {
    {
        let t = table();
        let _ = *t;
    }
    install()
}
pub fn dropped(install: impl FnOnce() -> u32) -> u32 {
    let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    drop(t);
    install()
}
pub fn temporary(info: &Info) -> u32 {
    let n = *TABLE.lock().unwrap() + 1;
    info.class_info(n);
    // reentrancy: none: GetFunctionInfo cannot call back
    let v = TABLE.lock().unwrap().wrapping_add(info.function_info(n));
    v
}
pub fn runtime(i1: &ICorProfilerInfo) {
    if let Ok(g) = TABLE.try_lock() {
        unsafe { i1.SetEventMask(*g) };
    }
}
// reentrancy: claim-table
pub fn marked(p: &dyn Profiler) {
    let g = TABLE.lock().unwrap();
    p.jit_compilation_started(*g);
}
pub fn record(r: Record) { r.write(); }
thread_local! {
    /// A flag.
    // reentrancy: claim-table
    static INSIDE: Cell<u32> = const { Cell::new(0) };
    static OTHER: Cell<u32> = const { Cell::new(0) };
}
pub trait Profiler { fn jit_compilation_started(&self, n: u32) {} }
";

    fn names() -> Names {
        Names::collect(&[("a.rs".into(), SRC.into())])
    }

    #[test]
    fn locks_held_across_calls_back_are_found() {
        let found = scan("clrprof/src/a.rs", SRC, &names()).unwrap();
        let sites: Vec<(&str, usize, &Marker)> = found
            .iter()
            .filter(|f| f.kind == Kind::Site)
            .map(|f| (f.name.as_str(), f.line, &f.marker))
            .collect();
        assert_eq!(
            sites,
            vec![
                ("claim", 5, &Marker::None),
                (
                    "temporary",
                    24,
                    &Marker::NotReentrant("GetFunctionInfo cannot call back".into())
                ),
                ("runtime", 28, &Marker::None),
                ("marked", 34, &Marker::Entry("claim-table".into())),
            ],
            "{found:#?}"
        );
        assert_eq!(found[0].lock, "table()");
        assert_eq!(found[0].calls, vec!["`install()` (line 6)"]);
        let tls: Vec<(&str, &Marker)> = found
            .iter()
            .filter(|f| f.kind == Kind::ThreadLocal)
            .map(|f| (f.name.as_str(), &f.marker))
            .collect();
        assert_eq!(
            tls,
            vec![
                ("INSIDE", &Marker::Entry("claim-table".into())),
                ("OTHER", &Marker::None)
            ]
        );
    }

    #[test]
    fn a_handle_made_under_a_lock_is_a_site_whatever_its_receiver() {
        // `CreateHandle` delivers `HandleCreated` on the thread before it
        // returns: the live heap made its handles under its table's lock.
        let src = "use std::sync::Mutex;
static TABLE: Mutex<u32> = Mutex::new(0);
pub fn keep(sample: &Sample) {
    let g = TABLE.lock().unwrap();
    let _ = sample.create_handle(*g);
}
pub fn collect(handle: &RuntimeHandle) {
    let _ = *TABLE.lock().unwrap();
    handle.force_gc();
}
";
        let found = scan(
            "clrprof-sampler/src/b.rs",
            src,
            &Names::collect(&[("b.rs".into(), src.into())]),
        )
        .unwrap();
        let sites: Vec<(&str, &[String])> = found
            .iter()
            .filter(|f| f.kind == Kind::Site)
            .map(|f| (f.name.as_str(), f.calls.as_slice()))
            .collect();
        assert_eq!(
            sites,
            vec![(
                "keep",
                &["`sample.create_handle()` (line 5)".to_string()][..]
            )],
            "{found:#?}"
        );
    }

    #[test]
    fn unmarked_sites_and_unknown_entries_are_problems() {
        let found = scan("clrprof/src/a.rs", SRC, &names()).unwrap();
        let entry = Entry {
            name: "claim-table".into(),
            held: "the table".into(),
            calls: "the closure".into(),
            risk: "a hang".into(),
            handled: vec!["released: before the closure".into()],
            tests: vec!["unit:x.rs::t".into()],
        };
        let s = section("rules.toml", &[entry], &found, &|_| Ok("a test".into()));
        assert_eq!(s.problems.len(), 3, "{:#?}", s.problems);
        assert!(s.problems[0].starts_with(
            "clrprof/src/a.rs:5: `claim` holds `table()` across `install()` (line 6)"
        ));
        assert!(
            s.problems[1].starts_with("clrprof/src/a.rs:28: `runtime` holds `TABLE.try_lock()`")
        );
        assert!(s.problems[2].contains("thread-local `OTHER`"));
        assert!(s.markdown.contains("- `marked` (clrprof/src/a.rs): `TABLE.lock()` held across `p.jit_compilation_started()`"));
        assert!(s
            .markdown
            .contains("- thread-local `INSIDE` (clrprof/src/a.rs)"));
        let bad = section("rules.toml", &[], &found, &|_| Ok(String::new()));
        assert!(bad
            .problems
            .iter()
            .any(|p| p.contains("`// reentrancy: claim-table` names no [[reentrancy]] entry")));
    }
}
