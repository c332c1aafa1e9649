//! The soundness ledger's signal-context section: every function a signal
//! handler of the scanned crates can reach, and why each is
//! async-signal-safe (no user code, no allocation, no lock, no panic).
//!
//! # Markers
//!
//! In the comment lines directly above a function (past its doc comment and
//! attributes):
//!
//! ```text
//! // signal-context: handler
//! // signal-context: async-signal-safe
//! // signal-context: async-signal-safe: WHY
//! ```
//!
//! `handler` marks a function installed as a signal handler; every function
//! it reaches in the scanned crates must be marked `async-signal-safe`
//! (either may give its reason after a colon). In the comment lines
//! directly above a statement:
//!
//! ```text
//! // signal-context: foreign: WHY
//! // signal-context: bounds: WHY
//! // signal-context: registers NAME
//! ```
//!
//! `foreign: WHY` accepts the statement's calls the checker cannot vouch
//! for (a function pointer read from a value: the handler installed before
//! ours); `bounds: WHY` its computed indexes; `registers NAME` names the
//! handler a registration installs when the checker cannot see it.
//!
//! # What is checked
//!
//! - **Registrations**: an assignment to a `sa_sigaction` or `sa_handler`
//!   field, such a field in a struct literal, and a call of `signal(SIG, H)`.
//!   The handler expression is followed through casts, references and a
//!   `let` of the same function; `SIG_DFL`, `SIG_IGN` and a field read (a
//!   saved disposition put back) install no handler. A registered function
//!   must be marked `handler`; a registration whose handler the checker
//!   cannot name needs `registers NAME`.
//! - **Calls inside a marked function** (closures included): a path call
//!   resolves to the scanned crates' functions by module (`crate::`,
//!   `super::`, `self::`, a module path; a single name in the caller's
//!   module, then each module around it, then its crate) or by type
//!   (`Type::f`, `Self::f`); each must be marked. A call of a path outside
//!   the crates must be on [`SAFE_PATHS`]; a method on [`SAFE_METHODS`] is
//!   accepted on any receiver, any other method resolves by name among the
//!   caller's crate's methods (each must be marked). A call through one of
//!   the function's parameters is checked where the argument is written (a
//!   closure literal there is visited; a function passed by path must be
//!   marked); a call through a `let` binding needs `foreign`. Tuple-struct
//!   and enum constructors are accepted.
//! - **Macros** other than [`SAFE_MACROS`] and **computed indexes** (out of
//!   bounds they panic) without `bounds` are refused; a constant index is
//!   checked by the compiler.
//!
//! The check reads syntax, not types: calls hidden in `Drop`, operator
//! traits and `Deref`, a crate method sharing a listed method's name, and
//! integer overflow (a panic in debug builds) are for the reviewer. The page
//! lists what it accepted, for that review.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// Functions outside the scanned crates that may run in a signal handler,
/// matched as the last segments of the written path (`ptr::null_mut`
/// matches `core::ptr::null_mut` and `std::ptr::null_mut`). The `libc`
/// functions are those POSIX.1 lists as async-signal-safe (signal-safety(7)),
/// plus the thread's `errno` location and thread id; `syscall` is the raw
/// system call (the SDK uses it for futex wakes and `rt_tgsigqueueinfo`, both
/// plain system calls).
pub const SAFE_PATHS: &[&str] = &[
    "libc::sigaction",
    "libc::raise",
    "libc::kill",
    "libc::pthread_kill",
    "libc::getpid",
    "libc::gettid",
    "libc::pthread_self",
    "libc::syscall",
    "libc::write",
    "libc::read",
    "libc::sigemptyset",
    "libc::sigfillset",
    "libc::sigaddset",
    "libc::sigdelset",
    "libc::sigismember",
    "libc::pthread_sigmask",
    "libc::sigprocmask",
    "libc::clock_gettime",
    "libc::sem_post",
    "libc::_exit",
    "libc::memcpy",
    "libc::memmove",
    "libc::memset",
    "libc::__errno_location",
    "libc::__error",
    "ptr::null",
    "ptr::null_mut",
    "ptr::read",
    "ptr::write",
    "ptr::read_volatile",
    "ptr::write_volatile",
    "ptr::copy",
    "ptr::copy_nonoverlapping",
    "mem::transmute",
    "mem::zeroed",
    "mem::size_of",
    "mem::align_of",
    "MaybeUninit::uninit",
    "slice::from_raw_parts",
    "slice::from_raw_parts_mut",
    "OnceLock::get",
    "UnsafeCell::get",
    "atomic::fence",
    "atomic::compiler_fence",
    "hint::spin_loop",
];

/// Methods that may run in a signal handler, on any receiver: atomics'
/// (lock-free on every target the SDK builds for), raw pointers' and
/// integers' own arithmetic, slices' and `Option`'s plain accessors (a
/// closure passed to `map` is checked where it is written). A method is
/// resolved by name, not type, so a method of the crates with a listed name
/// is not told apart: the page lists the externals of each function, for
/// the review. `get` is not listed (the crates' own `get`s lock); write
/// `OnceLock::get(&x)` or `UnsafeCell::get(&x)`.
pub const SAFE_METHODS: &[&str] = &[
    "load",
    "store",
    "swap",
    "compare_exchange",
    "compare_exchange_weak",
    "fetch_add",
    "fetch_sub",
    "fetch_and",
    "fetch_or",
    "fetch_xor",
    "fetch_max",
    "fetch_min",
    "as_ptr",
    "as_mut_ptr",
    "is_null",
    "cast",
    "cast_mut",
    "cast_const",
    "wrapping_add",
    "wrapping_sub",
    "wrapping_mul",
    "wrapping_offset",
    "checked_add",
    "checked_sub",
    "saturating_add",
    "saturating_sub",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "len",
    "is_empty",
    "min",
    "max",
    "first",
    "first_mut",
    "last",
    "last_mut",
    "get_mut",
    "split_at",
    "split_at_mut",
    "iter",
    "iter_mut",
    "copy_from_slice",
    "to_ne_bytes",
    "to_le_bytes",
    "to_be_bytes",
    "then_some",
    "map",
    "unwrap_or",
    "copied",
    "checked_mul",
    "saturating_mul",
    "count_ones",
    "leading_zeros",
    "trailing_zeros",
    "abs_diff",
];

/// Macros that expand to no call.
pub const SAFE_MACROS: &[&str] = &["matches", "cfg", "addr_of", "addr_of_mut"];

const PREFIX: &str = "signal-context:";

/// A function's or a statement's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    None,
    Handler,
    Safe,
    Foreign(String),
    /// `bounds: WHY` above a statement that indexes with a computed index.
    Bounds(String),
    Registers(Vec<String>),
    /// A `signal-context:` comment this checker does not know.
    Unknown(String),
}

fn parse_marker(line: &str) -> Option<Marker> {
    let rest = line
        .trim_start()
        .strip_prefix("//")?
        .trim_start()
        .strip_prefix(PREFIX)?
        .trim();
    // `handler` and `async-signal-safe` may be followed by `: WHY`.
    let is = |keyword: &str| {
        rest == keyword
            || rest
                .strip_prefix(keyword)
                .is_some_and(|r| r.trim_start().starts_with(':'))
    };
    Some(if is("handler") {
        Marker::Handler
    } else if is("async-signal-safe") {
        Marker::Safe
    } else if let Some(why) = rest.strip_prefix("foreign:") {
        Marker::Foreign(why.trim().to_string())
    } else if let Some(why) = rest.strip_prefix("bounds:") {
        Marker::Bounds(why.trim().to_string())
    } else if let Some(names) = rest.strip_prefix("registers") {
        Marker::Registers(
            names
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
        )
    } else {
        Marker::Unknown(rest.to_string())
    })
}

/// The marker in the comment, doc and attribute lines directly above
/// 1-based `line`.
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

/// One function of the scanned crates.
pub struct Func {
    pub file: String,
    pub line: usize,
    /// The crate's directory (`clrprof`, `clrprof-sampler`, ...).
    pub krate: String,
    /// The module path inside the crate.
    pub module: Vec<String>,
    /// The `impl` block's type, for functions of one.
    pub self_ty: Option<String>,
    pub has_receiver: bool,
    pub name: String,
    pub marker: Marker,
    /// Parameter names (calls through them are calls through values).
    params: Vec<String>,
    body: syn::Block,
    /// The file's lines (for statement markers).
    lines: std::rc::Rc<Vec<String>>,
}

impl Func {
    fn label(&self) -> String {
        match &self.self_ty {
            Some(t) => format!("{t}::{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The module path and the name, for the page.
    fn path(&self) -> String {
        let mut p = self.module.join("::");
        if !p.is_empty() {
            p.push_str("::");
        }
        p + &self.label()
    }

    fn marked(&self) -> bool {
        matches!(self.marker, Marker::Handler | Marker::Safe)
    }
}

/// A registration of a signal handler.
pub struct Registration {
    pub file: String,
    pub line: usize,
    /// Indices of the functions it installs; empty: unresolved.
    targets: Vec<usize>,
    /// Names from a `registers` marker.
    named: Vec<String>,
    /// In which function.
    caller: usize,
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

fn type_name(t: &syn::Type) -> String {
    match t {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => String::new(),
    }
}

fn pat_names(p: &syn::Pat, out: &mut Vec<String>) {
    match p {
        syn::Pat::Ident(i) => out.push(i.ident.to_string()),
        syn::Pat::Type(t) => pat_names(&t.pat, out),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|e| pat_names(e, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|e| pat_names(e, out)),
        syn::Pat::Reference(r) => pat_names(&r.pat, out),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pat_names(&f.pat, out)),
        _ => {}
    }
}

/// The crate directory and module path of a file (`clrprof/src/exit/signals.rs`
/// → `clrprof`, `[exit, signals]`).
fn crate_module(file: &str) -> (String, Vec<String>) {
    let (krate, rest) = match file.split_once("/src/") {
        Some((k, r)) => (k.to_string(), r),
        None => (String::new(), file),
    };
    let mut module: Vec<String> = rest
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        module.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        module.pop();
    }
    (krate, module)
}

struct Collector<'a> {
    file: &'a str,
    krate: String,
    lines: std::rc::Rc<Vec<String>>,
    module: Vec<String>,
    impls: Vec<Option<String>>,
    funcs: Vec<Func>,
}

impl Collector<'_> {
    fn push(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let line = sig.fn_token.span.start().line;
        let lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        let mut params = Vec::new();
        let mut has_receiver = false;
        for i in &sig.inputs {
            match i {
                syn::FnArg::Receiver(_) => has_receiver = true,
                syn::FnArg::Typed(t) => pat_names(&t.pat, &mut params),
            }
        }
        self.funcs.push(Func {
            file: self.file.to_string(),
            line,
            krate: self.krate.clone(),
            module: self.module.clone(),
            self_ty: self.impls.last().cloned().flatten(),
            has_receiver,
            name: sig.ident.to_string(),
            marker: marker_above(&lines, line),
            params,
            body: block.clone(),
            lines: self.lines.clone(),
        });
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_cfg_test(&m.attrs) {
            return;
        }
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        // A fn inside a fn is its own function, of no impl.
        self.impls.push(None);
        self.push(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
        self.impls.pop();
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_cfg_test(&i.attrs) {
            return;
        }
        self.impls.push(Some(type_name(&i.self_ty)));
        syn::visit::visit_item_impl(self, i);
        self.impls.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        self.push(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
}

/// Every function of the files (outside tests), with its marker.
pub fn collect(files: &[(String, String)]) -> (Vec<Func>, Vec<String>) {
    let mut funcs = Vec::new();
    let mut problems = Vec::new();
    for (file, text) in files {
        if file.ends_with("/tests.rs") {
            continue;
        }
        let parsed = match syn::parse_file(text) {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!("{file}: cannot parse: {e}"));
                continue;
            }
        };
        if is_cfg_test(&parsed.attrs) {
            continue;
        }
        let (krate, module) = crate_module(file);
        let mut c = Collector {
            file,
            krate,
            lines: std::rc::Rc::new(text.lines().map(str::to_string).collect()),
            module,
            impls: Vec::new(),
            funcs: Vec::new(),
        };
        c.visit_file(&parsed);
        funcs.extend(c.funcs);
    }
    (funcs, problems)
}

/// The index of functions by name.
struct Index<'a> {
    funcs: &'a [Func],
    by_name: BTreeMap<&'a str, Vec<usize>>,
}

impl<'a> Index<'a> {
    fn new(funcs: &'a [Func]) -> Index<'a> {
        let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, f) in funcs.iter().enumerate() {
            by_name.entry(f.name.as_str()).or_default().push(i);
        }
        Index { funcs, by_name }
    }

    fn named(&self, name: &str) -> impl Iterator<Item = usize> + '_ {
        self.by_name.get(name).into_iter().flatten().copied()
    }

    /// The functions a path call from `caller` may name.
    fn resolve_path(&self, caller: usize, segs: &[String]) -> Vec<usize> {
        let Some((name, qual)) = segs.split_last() else {
            return Vec::new();
        };
        let me = &self.funcs[caller];
        let crate_ident = |k: &str| k.replace('-', "_");
        match qual {
            [] => {
                // The caller's module, then each module around it (a glob
                // `use super::*` is the usual import), then the crate.
                for depth in (0..=me.module.len()).rev() {
                    let module = &me.module[..depth];
                    let here: Vec<usize> = self
                        .named(name)
                        .filter(|&i| {
                            let f = &self.funcs[i];
                            f.self_ty.is_none() && f.krate == me.krate && f.module == module
                        })
                        .collect();
                    if !here.is_empty() {
                        return here;
                    }
                }
                self.named(name)
                    .filter(|&i| self.funcs[i].self_ty.is_none() && self.funcs[i].krate == me.krate)
                    .collect()
            }
            [.., ty] if ty == "Self" || ty.starts_with(|c: char| c.is_uppercase()) => {
                let ty = if ty == "Self" {
                    me.self_ty.clone().unwrap_or_default()
                } else {
                    ty.clone()
                };
                self.named(name)
                    .filter(|&i| self.funcs[i].self_ty.as_deref() == Some(ty.as_str()))
                    .collect()
            }
            _ => {
                // A module path: absolute (`crate::`, a crate's name),
                // relative (`super::`, `self::`) or a suffix of one.
                let (krate, module, exact): (Option<String>, Vec<String>, bool) =
                    match qual[0].as_str() {
                        "crate" => (Some(me.krate.clone()), qual[1..].to_vec(), true),
                        "self" | "super" => {
                            let mut m = me.module.clone();
                            let mut rest = qual;
                            while let Some((first, r)) = rest.split_first() {
                                match first.as_str() {
                                    "self" => {}
                                    "super" => {
                                        m.pop();
                                    }
                                    _ => break,
                                }
                                rest = r;
                            }
                            m.extend(rest.iter().cloned());
                            (Some(me.krate.clone()), m, true)
                        }
                        first => match self.funcs.iter().find(|f| crate_ident(&f.krate) == first) {
                            Some(f) => (Some(f.krate.clone()), qual[1..].to_vec(), true),
                            None => (None, qual.to_vec(), false),
                        },
                    };
                self.named(name)
                    .filter(|&i| {
                        let f = &self.funcs[i];
                        f.self_ty.is_none()
                            && krate.as_ref().is_none_or(|k| &f.krate == k)
                            && if exact {
                                f.module == module
                            } else {
                                f.module.ends_with(&module)
                            }
                    })
                    .collect()
            }
        }
    }

    /// The methods a method call from `caller` may name: the caller's
    /// crate's functions of that name with a receiver.
    fn resolve_method(&self, caller: usize, name: &str) -> Vec<usize> {
        let krate = &self.funcs[caller].krate;
        self.named(name)
            .filter(|&i| self.funcs[i].has_receiver && &self.funcs[i].krate == krate)
            .collect()
    }
}

fn path_segs(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

fn is_safe_path(segs: &[String]) -> bool {
    SAFE_PATHS.iter().any(|entry| {
        let e: Vec<&str> = entry.split("::").collect();
        segs.len() >= e.len()
            && segs[segs.len() - e.len()..]
                .iter()
                .zip(&e)
                .all(|(a, b)| a == b)
    })
}

/// A use of something from inside a marked function.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Use {
    /// A path call, resolved or not.
    Path {
        segs: Vec<String>,
        line: usize,
        stmt: usize,
    },
    Method {
        name: String,
        line: usize,
        stmt: usize,
    },
    /// A call through a local value (or an expression).
    Value {
        what: String,
        line: usize,
        stmt: usize,
    },
    Macro {
        name: String,
        line: usize,
    },
    Index {
        line: usize,
        stmt: usize,
    },
    /// A path passed as an argument (a function the callee may call).
    Passed {
        segs: Vec<String>,
        line: usize,
    },
}

struct Body {
    /// `let` bindings and closure parameters: a call through one needs
    /// `foreign`.
    locals: BTreeSet<String>,
    /// The function's parameters: a call through one is checked where the
    /// argument is written (a closure literal is visited there; a function
    /// passed by path must be marked, see [`Use::Passed`]).
    params: BTreeSet<String>,
    uses: Vec<Use>,
    stmt: usize,
}

/// Whether a name is written as a constant (`SIGINT`, `REG_RIP`).
fn is_constant_name(n: &str) -> bool {
    n.chars().any(|c| c.is_ascii_uppercase())
        && n.chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
}

impl Body {
    /// Functions passed by path as arguments may be called by the callee.
    fn passed(&mut self, args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>) {
        for a in args {
            let mut e = a;
            while let syn::Expr::Reference(r) = e {
                e = &r.expr;
            }
            if let syn::Expr::Path(p) = e {
                let segs = path_segs(&p.path);
                let local = segs.len() == 1
                    && (self.locals.contains(&segs[0]) || self.params.contains(&segs[0]));
                let constant = segs.last().is_some_and(|s| is_constant_name(s));
                if !local && !constant {
                    self.uses.push(Use::Passed {
                        segs,
                        line: p.span().start().line,
                    });
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Body {
    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        let outer = self.stmt;
        self.stmt = s.span().start().line;
        if let syn::Stmt::Local(l) = s {
            let mut names = Vec::new();
            pat_names(&l.pat, &mut names);
            self.locals.extend(names);
        }
        syn::visit::visit_stmt(self, s);
        self.stmt = outer;
    }

    fn visit_item(&mut self, _i: &'ast syn::Item) {
        // Items inside a body are functions of their own.
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        for p in &c.inputs {
            let mut names = Vec::new();
            pat_names(p, &mut names);
            self.locals.extend(names);
        }
        syn::visit::visit_expr_closure(self, c);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        let line = c.span().start().line;
        match &*c.func {
            syn::Expr::Path(p) => {
                let segs = path_segs(&p.path);
                if segs.len() == 1
                    && self.params.contains(&segs[0])
                    && !self.locals.contains(&segs[0])
                {
                    // Checked where the argument is written.
                } else if segs.len() == 1 && self.locals.contains(&segs[0]) {
                    self.uses.push(Use::Value {
                        what: segs[0].clone(),
                        line,
                        stmt: self.stmt,
                    });
                } else {
                    self.uses.push(Use::Path {
                        segs,
                        line,
                        stmt: self.stmt,
                    });
                }
            }
            other => self.uses.push(Use::Value {
                what: quote_expr(other),
                line,
                stmt: self.stmt,
            }),
        }
        self.passed(&c.args);
        // The callee expression was classified above; visit its arguments.
        for a in &c.args {
            self.visit_expr(a);
        }
        if !matches!(&*c.func, syn::Expr::Path(_)) {
            self.visit_expr(&c.func);
        }
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        self.passed(&m.args);
        self.uses.push(Use::Method {
            name: m.method.to_string(),
            line: m.method.span().start().line,
            stmt: self.stmt,
        });
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.uses.push(Use::Macro {
            name: m
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default(),
            line: m.span().start().line,
        });
    }

    fn visit_expr_index(&mut self, i: &'ast syn::ExprIndex) {
        // A constant index (a literal, a CONSTANT, `CONSTANT as usize`) of a
        // fixed-size array is checked by the compiler; any other (a range
        // included) may panic.
        fn constant(e: &syn::Expr) -> bool {
            match e {
                syn::Expr::Lit(_) => true,
                syn::Expr::Path(p) => p
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| is_constant_name(&s.ident.to_string())),
                syn::Expr::Cast(c) => constant(&c.expr),
                syn::Expr::Paren(p) => constant(&p.expr),
                _ => false,
            }
        }
        let constant = constant(&i.index);
        if !constant {
            self.uses.push(Use::Index {
                line: i.span().start().line,
                stmt: self.stmt,
            });
        }
        syn::visit::visit_expr_index(self, i);
    }
}

fn quote_expr(e: &syn::Expr) -> String {
    let s = quote::ToTokens::to_token_stream(e).to_string();
    s.chars().take(40).collect()
}

/// The `signal-context` marker of the statement starting at `stmt` (or of
/// the line `line`).
fn statement_marker(f: &Func, stmt: usize, line: usize) -> Marker {
    let lines: Vec<&str> = f.lines.iter().map(String::as_str).collect();
    for l in [stmt, line] {
        if l > 0 {
            let m = marker_above(&lines, l);
            if m != Marker::None {
                return m;
            }
        }
    }
    Marker::None
}

/// Registrations of signal handlers in `f`'s body.
struct Registrations<'a, 'i> {
    index: &'a Index<'i>,
    caller: usize,
    /// `let NAME = EXPR` of the body, for following a handler through one.
    lets: BTreeMap<String, syn::Expr>,
    found: Vec<Registration>,
    stmt: usize,
}

impl Registrations<'_, '_> {
    /// The functions `e` names as a handler: `Some(vec![])` when it names
    /// none (a default or saved disposition), `None` when it cannot tell.
    fn targets(&self, e: &syn::Expr, depth: usize) -> Option<Vec<usize>> {
        match e {
            syn::Expr::Cast(c) => self.targets(&c.expr, depth),
            syn::Expr::Paren(p) => self.targets(&p.expr, depth),
            syn::Expr::Group(g) => self.targets(&g.expr, depth),
            syn::Expr::Reference(r) => self.targets(&r.expr, depth),
            syn::Expr::Lit(_) => Some(Vec::new()),
            syn::Expr::Field(_) => Some(Vec::new()),
            syn::Expr::Call(c) => match (&*c.func, c.args.first()) {
                (syn::Expr::Path(p), Some(a)) if p.path.is_ident("Some") => self.targets(a, depth),
                _ => None,
            },
            syn::Expr::Path(p) => {
                let segs = path_segs(&p.path);
                let last = segs.last().map(String::as_str).unwrap_or("");
                if matches!(last, "SIG_DFL" | "SIG_IGN" | "SIG_ERR") || last == "None" {
                    return Some(Vec::new());
                }
                if segs.len() == 1 {
                    if let Some(init) = self.lets.get(&segs[0]) {
                        return if depth < 4 {
                            self.targets(init, depth + 1)
                        } else {
                            None
                        };
                    }
                    if self.index.funcs[self.caller].params.contains(&segs[0]) {
                        return None;
                    }
                }
                let t = self.index.resolve_path(self.caller, &segs);
                if t.is_empty() {
                    None
                } else {
                    Some(t)
                }
            }
            _ => None,
        }
    }

    fn add(&mut self, e: &syn::Expr, line: usize) {
        let f = &self.index.funcs[self.caller];
        let marker = statement_marker(f, self.stmt, line);
        let named = match marker {
            Marker::Registers(n) => n,
            _ => Vec::new(),
        };
        let targets = match self.targets(e, 0) {
            Some(t) if t.is_empty() && named.is_empty() => return,
            Some(t) => t,
            None => Vec::new(),
        };
        self.found.push(Registration {
            file: f.file.clone(),
            line,
            targets,
            named,
            caller: self.caller,
        });
    }
}

fn member_is_handler(m: &syn::Member) -> bool {
    matches!(m, syn::Member::Named(i) if i == "sa_sigaction" || i == "sa_handler")
}

impl<'ast> Visit<'ast> for Registrations<'_, '_> {
    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        let outer = self.stmt;
        self.stmt = s.span().start().line;
        if let syn::Stmt::Local(l) = s {
            let mut names = Vec::new();
            pat_names(&l.pat, &mut names);
            if let (Some(init), [name]) = (&l.init, names.as_slice()) {
                self.lets.insert(name.clone(), (*init.expr).clone());
            }
        }
        syn::visit::visit_stmt(self, s);
        self.stmt = outer;
    }

    fn visit_item(&mut self, _i: &'ast syn::Item) {}

    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        if let syn::Expr::Field(f) = &*a.left {
            if member_is_handler(&f.member) {
                self.add(&a.right, a.span().start().line);
            }
        }
        syn::visit::visit_expr_assign(self, a);
    }

    fn visit_field_value(&mut self, fv: &'ast syn::FieldValue) {
        if member_is_handler(&fv.member) {
            self.add(&fv.expr, fv.span().start().line);
        }
        syn::visit::visit_field_value(self, fv);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            if p.path.segments.last().is_some_and(|s| s.ident == "signal") && c.args.len() == 2 {
                if let Some(h) = c.args.iter().nth(1) {
                    self.add(h, c.span().start().line);
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}

/// The section, its problems and notes.
pub struct Section {
    pub markdown: String,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// What the walk found in one marked function.
#[derive(Default)]
struct Reached {
    /// From which handler it was first reached.
    root: Option<usize>,
    externals: BTreeSet<String>,
    foreign: Vec<(usize, String)>,
    bounds: Vec<(usize, String)>,
}

/// Checks the files and renders the section.
pub fn section(files: &[(String, String)]) -> Section {
    let (funcs, mut problems) = collect(files);
    let mut notes = Vec::new();
    let index = Index::new(&funcs);

    for f in &funcs {
        if let Marker::Unknown(what) = &f.marker {
            problems.push(format!(
                "{}:{}: `// {PREFIX} {what}` is no marker: write `// {PREFIX} async-signal-safe: {what}` \
                 (or `handler: {what}` above a registered handler); above a statement, `foreign: WHY`, \
                 `bounds: WHY` or `registers NAME`",
                f.file, f.line
            ));
        }
    }

    // Registrations, in every function.
    let mut registrations = Vec::new();
    for (i, f) in funcs.iter().enumerate() {
        let mut r = Registrations {
            index: &index,
            caller: i,
            lets: BTreeMap::new(),
            found: Vec::new(),
            stmt: 0,
        };
        r.visit_block(&f.body);
        registrations.extend(r.found);
    }
    let mut registered_at: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for r in &registrations {
        let mut targets = r.targets.clone();
        for n in &r.named {
            let found: Vec<usize> = index
                .named(n)
                .filter(|&i| funcs[i].marker == Marker::Handler)
                .collect();
            if found.is_empty() {
                problems.push(format!(
                    "{}:{}: `// {PREFIX} registers {n}` names no function marked `// {PREFIX} handler`",
                    r.file, r.line
                ));
            }
            targets.extend(found);
        }
        if targets.is_empty() {
            problems.push(format!(
                "{}:{}: `{}` installs a signal handler the checker cannot name: write \
                 `// {PREFIX} registers NAME` above the statement (NAME marked `// {PREFIX} handler`)",
                r.file,
                r.line,
                funcs[r.caller].label()
            ));
        }
        for t in targets {
            registered_at
                .entry(t)
                .or_default()
                .push(format!("{}:{}", r.file, r.line));
            if funcs[t].marker != Marker::Handler {
                problems.push(format!(
                    "{}:{}: `{}` is installed as a signal handler ({}:{}) but not marked: write \
                     `// {PREFIX} handler` above it, and keep everything it reaches async-signal-safe",
                    funcs[t].file,
                    funcs[t].line,
                    funcs[t].label(),
                    r.file,
                    r.line
                ));
            }
        }
    }

    // The walk from every handler.
    let roots: Vec<usize> = funcs
        .iter()
        .enumerate()
        .filter(|(i, f)| f.marker == Marker::Handler || registered_at.contains_key(i))
        .map(|(i, _)| i)
        .collect();
    let mut reached: BTreeMap<usize, Reached> = BTreeMap::new();
    let mut queue: VecDeque<(usize, usize)> = roots.iter().map(|&r| (r, r)).collect();
    while let Some((fi, root)) = queue.pop_front() {
        if reached.contains_key(&fi) {
            continue;
        }
        let f = &funcs[fi];
        let mut here = Reached {
            root: Some(root),
            ..Reached::default()
        };
        let mut body = Body {
            locals: BTreeSet::new(),
            params: f.params.iter().cloned().collect(),
            uses: Vec::new(),
            stmt: 0,
        };
        body.visit_block(&f.body);
        let at = |line: usize| format!("{}:{line}: `{}`", f.file, f.label());
        let from = if root == fi {
            String::new()
        } else {
            format!(" (reached from the handler `{}`)", funcs[root].label())
        };
        for u in &body.uses {
            match u {
                Use::Path { segs, line, stmt } => {
                    if let Marker::Foreign(why) = statement_marker(f, *stmt, *line) {
                        here.foreign.push((*line, why));
                        continue;
                    }
                    let targets = index.resolve_path(fi, segs);
                    let shown = segs.join("::");
                    if targets.is_empty() {
                        if is_safe_path(segs) {
                            here.externals.insert(shown);
                        } else if segs
                            .last()
                            .is_some_and(|s| s.starts_with(|c: char| c.is_uppercase()))
                        {
                            // A tuple struct or enum variant.
                        } else {
                            problems.push(format!(
                                "{}{from} calls `{shown}`, which is neither a marked function of the scanned \
                                 crates nor on the async-signal-safe list (SAFE_PATHS in xtask/src/signals.rs; \
                                 write an imported function with its module: `atomic::fence`)",
                                at(*line)
                            ));
                        }
                        continue;
                    }
                    for t in targets {
                        if funcs[t].marked() {
                            queue.push_back((t, root));
                        } else {
                            problems.push(format!(
                                "{}{from} calls `{shown}` ({}:{}), which is not marked \
                                 `// {PREFIX} async-signal-safe`: code a signal handler reaches must not \
                                 allocate, lock or run user code",
                                at(*line),
                                funcs[t].file,
                                funcs[t].line
                            ));
                        }
                    }
                }
                Use::Method { name, line, stmt } => {
                    if let Marker::Foreign(why) = statement_marker(f, *stmt, *line) {
                        here.foreign.push((*line, why));
                        continue;
                    }
                    if SAFE_METHODS.contains(&name.as_str()) {
                        here.externals.insert(format!(".{name}()"));
                        continue;
                    }
                    let targets = index.resolve_method(fi, name);
                    let unmarked: Vec<String> = targets
                        .iter()
                        .filter(|&&t| !funcs[t].marked())
                        .map(|&t| format!("{} ({}:{})", funcs[t].label(), funcs[t].file, funcs[t].line))
                        .collect();
                    if !unmarked.is_empty() {
                        problems.push(format!(
                            "{}{from} calls `.{name}()`, and these methods of that name are not marked \
                             `// {PREFIX} async-signal-safe`: {}; call the one meant by its path, or mark them",
                            at(*line),
                            unmarked.join(", ")
                        ));
                    } else if !targets.is_empty() {
                        for t in targets {
                            queue.push_back((t, root));
                        }
                    } else {
                        problems.push(format!(
                            "{}{from} calls `.{name}()`, which is neither a marked method of its crate nor on \
                             the async-signal-safe list (SAFE_METHODS in xtask/src/signals.rs)",
                            at(*line)
                        ));
                    }
                }
                Use::Value { what, line, stmt } => match statement_marker(f, *stmt, *line) {
                    Marker::Foreign(why) => here.foreign.push((*line, why)),
                    _ => problems.push(format!(
                        "{}{from} calls through `{what}` (a function pointer or closure): say why that \
                         is safe with `// {PREFIX} foreign: WHY` above the statement",
                        at(*line)
                    )),
                },
                Use::Macro { name, line } => {
                    if SAFE_MACROS.contains(&name.as_str()) {
                        here.externals.insert(format!("{name}!"));
                    } else {
                        problems.push(format!(
                            "{}{from} uses `{name}!`, refused in signal context (it may allocate, lock or panic)",
                            at(*line)
                        ));
                    }
                }
                Use::Index { line, stmt } => match statement_marker(f, *stmt, *line) {
                    Marker::Bounds(why) => here.bounds.push((*line, why)),
                    _ => problems.push(format!(
                        "{}{from} indexes with a computed `[..]`, which panics out of bounds (the panic \
                         machinery allocates and locks): use a checked form, or say why it is in bounds \
                         with `// {PREFIX} bounds: WHY` above the statement",
                        at(*line)
                    )),
                },
                Use::Passed { segs, line } => {
                    for t in index.resolve_path(fi, segs) {
                        if funcs[t].marked() {
                            queue.push_back((t, root));
                        } else {
                            problems.push(format!(
                                "{}{from} passes `{}` ({}:{}), which the callee may call, and it is not \
                                 marked `// {PREFIX} async-signal-safe`",
                                at(*line),
                                segs.join("::"),
                                funcs[t].file,
                                funcs[t].line
                            ));
                        }
                    }
                }
            }
        }
        reached.insert(fi, here);
    }
    for (i, f) in funcs.iter().enumerate() {
        if f.marker == Marker::Safe && !reached.contains_key(&i) {
            notes.push(format!(
                "{}:{}: `{}` is marked async-signal-safe but no signal handler reaches it",
                f.file,
                f.line,
                f.label()
            ));
        }
    }

    let mut md = String::new();
    let _ = writeln!(md, "## Signal context\n");
    let _ = writeln!(
        md,
        "Every signal handler the scanned crates install, and every function it reaches. A handler \
         interrupts its thread anywhere (inside `malloc`, inside a lock, inside a profiler's callback), \
         so what it runs must be async-signal-safe: no user code, no allocation, no lock, no panic. \
         Each function below carries `// {PREFIX} handler` or `// {PREFIX} async-signal-safe`, and \
         every call in it is to such a function, to one of the async-signal-safe externals listed, or \
         marked `// {PREFIX} foreign: WHY` (`xtask/src/signals.rs`; how to read it: the soundness \
         chapter's \"Signal context\"). `cargo xtask ledger --check` fails for a registered handler \
         that is not marked, a call to an unmarked function or to anything off the lists, a refused \
         macro and an index. Not seen by the check, for the reviewer: `Drop`, operator traits, \
         integer overflow.\n"
    );
    let _ = writeln!(md, "| handler | file | installed at |");
    let _ = writeln!(md, "|---|---|---|");
    for &r in &roots {
        let at = registered_at
            .get(&r)
            .map(|v| v.join(", "))
            .unwrap_or_else(|| "(marked; no registration seen)".into());
        let _ = writeln!(md, "| `{}` | {} | {at} |", funcs[r].path(), funcs[r].file);
    }
    let _ = writeln!(
        md,
        "\n**Functions reached**, with the externals each calls:\n"
    );
    for (i, r) in &reached {
        let f = &funcs[*i];
        let ext: Vec<String> = r.externals.iter().map(|e| format!("`{e}`")).collect();
        let via = match r.root {
            Some(root) if root != *i => format!(", from `{}`", funcs[root].path()),
            _ => String::new(),
        };
        let _ = writeln!(
            md,
            "- `{}` ({}{via}){}{}",
            f.path(),
            f.file,
            if ext.is_empty() { "" } else { ": " },
            ext.join(", ")
        );
    }
    let _ = writeln!(md, "\n**Foreign calls**, accepted with their reason:\n");
    let _ = writeln!(md, "| function | file | why |");
    let _ = writeln!(md, "|---|---|---|");
    for (i, r) in &reached {
        for (_, why) in &r.foreign {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} |",
                funcs[*i].path(),
                funcs[*i].file,
                why.replace('|', "\\|")
            );
        }
    }
    let _ = writeln!(md, "\n**Computed indexes**, accepted with their reason:\n");
    let _ = writeln!(md, "| function | file | why in bounds |");
    let _ = writeln!(md, "|---|---|---|");
    for (i, r) in &reached {
        for (_, why) in &r.bounds {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} |",
                funcs[*i].path(),
                funcs[*i].file,
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

    fn run(src: &str) -> Section {
        section(&[("clrprof/src/sig.rs".into(), src.into())])
    }

    const GOOD: &str = r#"
use core::sync::atomic::{AtomicU32, Ordering};
static WORD: AtomicU32 = AtomicU32::new(0);

/// Installs.
pub fn install() {
    let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
    let handler: extern "C" fn(i32) = on_signal;
    new.sa_sigaction = handler as usize;
    let old = new;
    new.sa_sigaction = old.sa_sigaction;
    new.sa_sigaction = libc::SIG_DFL;
    log::info!("installed");
}

/// The handler.
// signal-context: handler
extern "C" fn on_signal(sig: i32) {
    if matches!(sig, 2 | 15) {
        wake(sig);
    }
    let f: extern "C" fn(i32) = unsafe { core::mem::transmute(0usize) };
    // signal-context: foreign: the previous handler
    f(sig);
}

// signal-context: async-signal-safe
fn wake(sig: i32) {
    WORD.store(sig as u32, Ordering::Release);
    unsafe { libc::syscall(libc::SYS_futex, WORD.as_ptr(), 1, 1) };
    let _ = Some(1).is_some();
}
"#;

    #[test]
    fn a_marked_handler_and_what_it_reaches_pass() {
        let s = run(GOOD);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert!(
            s.markdown
                .contains("| `sig::on_signal` | clrprof/src/sig.rs | clrprof/src/sig.rs:9 |"),
            "{}",
            s.markdown
        );
        assert!(s.markdown.contains("- `sig::wake` (clrprof/src/sig.rs, from `sig::on_signal`): `.as_ptr()`, `.is_some()`, `.store()`, `libc::syscall`"), "{}", s.markdown);
        assert!(s
            .markdown
            .contains("| `sig::on_signal` | clrprof/src/sig.rs | the previous handler |"));
    }

    #[test]
    fn an_unmarked_handler_fails() {
        let src = GOOD.replace("// signal-context: handler\n", "");
        let s = run(&src);
        assert!(
            s.problems.iter().any(|p| p.starts_with(
                "clrprof/src/sig.rs:17: `on_signal` is installed as a signal handler (clrprof/src/sig.rs:9) but not marked"
            )),
            "{:?}",
            s.problems
        );
    }

    #[test]
    fn an_unmarked_callee_and_refused_things_fail() {
        let src = GOOD
            .replace("// signal-context: async-signal-safe\nfn wake", "fn wake")
            .replace(
                "    let f: extern",
                "    log::debug!(\"x\");\n    let v = [1u8];\n    let i = 0;\n    let _ = v[i];\n    let _ = v[0];\n    let _ = Box::new(1);\n    let _ = v.clone();\n    let f: extern",
            )
            .replace("    // signal-context: foreign: the previous handler\n", "");
        let s = run(&src);
        let want = [
            "`on_signal` calls `wake` (clrprof/src/sig.rs:33), which is not marked",
            "`on_signal` uses `debug!`",
            "`on_signal` indexes with a computed `[..]`",
            "`on_signal` calls `Box::new`, which is neither",
            "`on_signal` calls `.clone()`, which is neither",
            "`on_signal` calls through `f`",
        ];
        for w in want {
            assert!(
                s.problems.iter().any(|p| p.contains(w)),
                "{w}: {:?}",
                s.problems
            );
        }
        assert_eq!(s.problems.len(), want.len(), "{:?}", s.problems);
    }

    #[test]
    fn markers_may_give_a_reason_and_free_text_is_no_marker() {
        let src = "
// signal-context: handler: the SIGPROF handler
extern \"C\" fn on_prof(_sig: i32) { walk(); other(); }
// signal-context: async-signal-safe: reads words of the stack only
fn walk() {}
// signal-context: reads words of the stack only
fn other() {}
pub fn install() { unsafe { libc::signal(27, on_prof as usize) }; }
";
        let s = run(src);
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(s.problems[0].starts_with(
            "clrprof/src/sig.rs:7: `// signal-context: reads words of the stack only` is no marker: write \
             `// signal-context: async-signal-safe: reads words of the stack only`"
        ));
        assert!(s.problems[1].contains("calls `other` (clrprof/src/sig.rs:7), which is not marked"));
    }

    #[test]
    fn registrations_the_checker_cannot_name_need_registers() {
        let src = "
pub fn install(h: usize) {
    let mut a: libc::sigaction = unsafe { core::mem::zeroed() };
    a.sa_sigaction = h;
}
pub fn install2(h: extern \"C\" fn(i32)) {
    // signal-context: registers on_prof
    unsafe { libc::signal(27, h as usize) };
}
// signal-context: handler
extern \"C\" fn on_prof(_sig: i32) {}
";
        let s = run(src);
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
        assert!(s.problems[0].starts_with(
            "clrprof/src/sig.rs:4: `install` installs a signal handler the checker cannot name"
        ));
        assert!(
            s.markdown
                .contains("| `sig::on_prof` | clrprof/src/sig.rs | clrprof/src/sig.rs:8 |"),
            "{}",
            s.markdown
        );
    }

    #[test]
    fn methods_resolve_by_name_closures_by_where_they_are_written() {
        let src = "
struct Ring;
impl Ring {
    // signal-context: async-signal-safe
    fn push(&self, _v: u64) {}
    fn flush(&self) {}
    // signal-context: async-signal-safe
    fn produce(&self, fill: impl FnOnce(&mut [u64])) {
        let mut slot = [0u64; 4];
        fill(&mut slot);
    }
}
fn helper() {}
// signal-context: handler
extern \"C\" fn on_prof(_sig: i32) {
    let r = Ring;
    r.push(1);
    r.flush();
    WORD.store(1, Ordering::Relaxed);
    r.produce(|s| { let n = s.len(); s[n - 1] = 1; });
    let frames = [0u64; 8];
    let k = 3;
    // signal-context: bounds: k < 8, a constant
    let _ = frames[k];
    call_with(helper);
}
// signal-context: async-signal-safe
fn call_with(f: fn()) { f() }
";
        let s = run(src);
        let want = [
            "clrprof/src/sig.rs:18: `on_prof` calls `.flush()`",
            "clrprof/src/sig.rs:20: `on_prof` indexes with a computed `[..]`",
            "clrprof/src/sig.rs:25: `on_prof` passes `helper` (clrprof/src/sig.rs:13)",
        ];
        assert_eq!(s.problems.len(), want.len(), "{:?}", s.problems);
        for (p, w) in s.problems.iter().zip(want) {
            assert!(p.starts_with(w), "{w}: {p}");
        }
        assert!(
            s.markdown
                .contains("| `sig::on_prof` | clrprof/src/sig.rs | k < 8, a constant |"),
            "{}",
            s.markdown
        );
    }

    /// The SIGINT/SIGTERM handler as it was before the fourth review (main
    /// at 3711658, cut to its shape): registered, unmarked, and running
    /// `finish_process`.
    #[test]
    fn the_handler_that_ran_finish_fails() {
        let src = r#"
pub fn finish_process(reason: &'static str) {
    let slots: Vec<u8> = Vec::new();
    let _ = slots.clone();
}
extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, context: *mut c_void) {
    if sig == libc::SIGINT {
        finish_process("SIGINT");
    }
}
pub fn install_signal_handlers() {
    let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
    let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut c_void) = on_signal;
    new.sa_sigaction = handler as usize;
}
"#;
        let s = run(src);
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(s.problems[0].starts_with("clrprof/src/sig.rs:6: `on_signal` is installed as a signal handler (clrprof/src/sig.rs:14) but not marked"));
        assert!(s.problems[1].starts_with("clrprof/src/sig.rs:8: `on_signal` calls `finish_process` (clrprof/src/sig.rs:2), which is not marked"));
    }

    #[test]
    fn paths_resolve_by_module() {
        let files = vec![
            (
                "clrprof/src/exit.rs".to_string(),
                "// signal-context: async-signal-safe\nfn ready() -> bool { true }\nfn other() {}\n".to_string(),
            ),
            (
                "clrprof/src/exit/signals.rs".to_string(),
                "// signal-context: handler\nextern \"C\" fn h(_s: i32) { let _ = super::ready(); crate::exit::other(); }\n".to_string(),
            ),
        ];
        let s = section(&files);
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
        assert!(s.problems[0]
            .contains("calls `crate::exit::other` (clrprof/src/exit.rs:3), which is not marked"));
    }
}
