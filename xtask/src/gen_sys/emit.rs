//! Emits Rust declarations for parsed items.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::lex::Tok;
use super::model::*;
use super::parse::{parse_int, PResult};

/// COM interfaces from other SDK headers (objidl.h, oaidl.h) that metadata
/// methods mention; they are passed as untyped interface pointers.
const FOREIGN_INTERFACES: &[&str] = &["IStream", "ITypeInfo", "ITypeLib", "IEnumUnknown"];

/// Everything the emitter needs to know about names declared anywhere.
#[derive(Default)]
pub struct Env {
    /// Interface names (including `IUnknown`).
    pub interfaces: BTreeSet<String>,
    /// Function typedefs: name -> declared as a pointer (`(*Name)`).
    pub fn_types: BTreeMap<String, bool>,
    /// Structs and unions by name.
    pub structs: BTreeMap<String, StructDef>,
    /// Enum member values, for evaluating expressions that refer to them.
    pub consts: BTreeMap<String, i128>,
}

impl Env {
    pub fn add(&mut self, items: &[Item]) -> PResult<()> {
        self.interfaces.insert("IUnknown".into());
        for it in items {
            match it {
                Item::Interface(i) => {
                    self.interfaces.insert(i.name.clone());
                }
                Item::FnType(f) => {
                    self.fn_types.insert(f.name.clone(), f.is_pointer);
                }
                Item::Struct(s) => {
                    self.structs.insert(s.name.clone(), s.clone());
                }
                Item::Enum(e) => {
                    let mut next = 0i128;
                    for (name, expr) in &e.members {
                        let v = if expr.is_empty() {
                            next
                        } else {
                            eval(expr, &self.consts)
                                .map_err(|err| format!("{}::{name}: {err}", e.name))?
                        };
                        self.consts.insert(name.clone(), v);
                        next = v + 1;
                    }
                }
                Item::Alias(_) => {}
            }
        }
        Ok(())
    }

    /// The Rust spelling of a base type name.
    fn base(&self, base: &str) -> String {
        match base {
            "void" => "c_void",
            // oaidl.h's VARIANT is passed only by pointer; it stays opaque.
            "VARIANT" => "c_void",
            "int" | "signed int" | "long" | "signed long" => "i32",
            "unsigned int" | "unsigned" | "unsigned long" => "u32",
            "short" => "i16",
            "unsigned short" => "u16",
            "char" => "i8",
            "unsigned char" => "u8",
            "float" => "f32",
            "double" => "f64",
            "uint32_t" => "u32",
            "int32_t" => "i32",
            "uint8_t" => "u8",
            "uint16_t" => "u16",
            "uint64_t" => "u64",
            "int64_t" => "i64",
            other => other,
        }
        .to_string()
    }

    /// Maps a parameter or field type to Rust, following the conventions of
    /// the crate (see clrprof-sys/README.md).
    pub fn rust_type(
        &self,
        ty: &CType,
        array: &ArraySuffix,
        is_in: bool,
        is_out: bool,
    ) -> PResult<String> {
        let depth = ty.ptrs + usize::from(*array == ArraySuffix::Unsized);
        let base = &ty.base;
        if FOREIGN_INTERFACES.contains(&base.as_str()) {
            return match depth {
                1 => Ok("*mut c_void".into()),
                2 => Ok("*mut *mut c_void".into()),
                _ => Err(format!("interface {base} with {depth} pointers")),
            };
        }
        if self.interfaces.contains(base) {
            return match depth {
                1 => Ok("*mut c_void".into()),
                2 => Ok(format!("*mut Option<{base}>")),
                _ => Err(format!("interface {base} with {depth} pointers")),
            };
        }
        if let Some(&is_pointer) = self.fn_types.get(base) {
            let fn_depth = depth + usize::from(is_pointer);
            return match fn_depth {
                0 | 1 => Ok(format!("Option<{base}>")),
                2 => Ok(format!("*mut Option<{base}>")),
                _ => Err(format!("function type {base} with {depth} pointers")),
            };
        }
        let mut s = self.base(base);
        if depth == 0 {
            if let ArraySuffix::Fixed(n) = array {
                return Ok(format!("[{s}; {n}]"));
            }
            return Ok(s);
        }
        let read_only_array = *array == ArraySuffix::Unsized && is_in && !is_out && depth == 1;
        s = if ty.const_base || read_only_array {
            format!("*const {s}")
        } else {
            format!("*mut {s}")
        };
        for _ in 1..depth {
            s = format!("*mut {s}");
        }
        if let ArraySuffix::Fixed(n) = array {
            s = format!("[{s}; {n}]");
        }
        Ok(s)
    }

    /// A parameter name as a Rust binding. A name that is also a constant
    /// in scope (cor.h's `tdImport`, `mdtExportedType`) would be read as a
    /// constant pattern, so it gets a trailing underscore.
    pub fn param_ident(&self, name: &str) -> String {
        if self.consts.contains_key(name) {
            format!("{name}_")
        } else {
            rust_ident(name)
        }
    }

    /// Whether a struct can derive `Default` / `Debug`.
    fn derivable(&self, s: &StructDef) -> (bool, bool) {
        if s.is_union {
            return (false, false);
        }
        let mut default = true;
        let mut debug = true;
        for f in &s.fields {
            let rt = self
                .rust_type(&f.ty, &f.array, false, false)
                .unwrap_or_default();
            if rt.contains('*') || rt.starts_with("Option") || rt.contains("HANDLE") {
                default = false;
            }
            if let ArraySuffix::Fixed(n) = f.array {
                if n > 32 {
                    default = false;
                    debug = false;
                }
            }
            if f.ty.ptrs == 0 {
                if let Some(inner) = self.structs.get(&f.ty.base) {
                    let (d, g) = self.derivable(inner);
                    default &= d;
                    debug &= g;
                }
            }
        }
        (default, debug)
    }
}

/// Evaluates an enum value expression.
pub fn eval(toks: &[String], consts: &BTreeMap<String, i128>) -> PResult<i128> {
    struct P<'a> {
        t: &'a [String],
        i: usize,
        c: &'a BTreeMap<String, i128>,
    }
    impl P<'_> {
        fn peek(&self) -> Option<&str> {
            self.t.get(self.i).map(|s| s.as_str())
        }
        fn bin(&mut self, level: u8) -> PResult<i128> {
            if level == 0 {
                return self.unary();
            }
            let ops: &[&str] = match level {
                1 => &["|"],
                2 => &["^"],
                3 => &["&"],
                4 => &["<<", ">>"],
                _ => &["+", "-"],
            };
            let mut v = self.bin(if level == 5 { 0 } else { level + 1 })?;
            while let Some(op) = self.peek() {
                if !ops.contains(&op) {
                    break;
                }
                let op = op.to_string();
                self.i += 1;
                let r = self.bin(if level == 5 { 0 } else { level + 1 })?;
                v = match op.as_str() {
                    "|" => v | r,
                    "^" => v ^ r,
                    "&" => v & r,
                    "<<" => v << r,
                    ">>" => v >> r,
                    "+" => v + r,
                    _ => v - r,
                };
            }
            Ok(v)
        }
        fn unary(&mut self) -> PResult<i128> {
            let t = self.peek().ok_or("empty expression")?.to_string();
            self.i += 1;
            match t.as_str() {
                "-" => Ok(-self.unary()?),
                "~" => Ok(!self.unary()? & 0xFFFF_FFFF),
                "(" => {
                    let v = self.bin(1)?;
                    if self.peek() != Some(")") {
                        return Err("missing `)`".into());
                    }
                    self.i += 1;
                    Ok(v)
                }
                s if s.starts_with(|c: char| c.is_ascii_digit()) => parse_int(s),
                s => self.c.get(s).copied().ok_or(format!("unknown name `{s}`")),
            }
        }
    }
    let mut p = P {
        t: toks,
        i: 0,
        c: consts,
    };
    let v = p.bin(1)?;
    if p.i != toks.len() {
        return Err(format!("trailing tokens in {toks:?}"));
    }
    Ok(v)
}

/// Renders an enum value: the written expression when it is a plain
/// `A | B | 0x10` combination, otherwise the evaluated number.
fn enum_value_text(expr: &[String], value: i128, negative_allowed: bool) -> String {
    let simple = !expr.is_empty()
        && expr.iter().enumerate().all(|(i, t)| {
            if i % 2 == 1 {
                t == "|"
            } else {
                t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            }
        });
    if simple {
        return expr
            .iter()
            .filter(|t| *t != "|")
            .map(|t| {
                if let Some(h) = t.strip_prefix("0X") {
                    format!("0x{h}")
                } else if t.starts_with(|c: char| c.is_ascii_digit()) {
                    t.trim_end_matches(['u', 'U', 'l', 'L']).to_string()
                } else {
                    t.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" | ");
    }
    if value < 0 && !negative_allowed {
        return format!("{:#x}", value as u32);
    }
    if value > 0xFFFF {
        format!("{value:#x}")
    } else {
        value.to_string()
    }
}

fn doc(out: &mut String, text: &str) {
    let _ = writeln!(out, "/// {text}");
}

pub fn rust_ident(name: &str) -> String {
    match name {
        "type" | "ref" | "in" | "fn" | "mod" | "impl" | "match" | "box" | "where" | "use"
        | "move" | "loop" | "struct" | "enum" | "trait" | "self" | "super" | "crate" | "static"
        | "const" | "let" | "mut" | "pub" | "return" | "async" | "await" | "dyn" | "abstract"
        | "final" | "override" | "macro" | "priv" | "virtual" | "yield" | "try" | "gen"
        | "unsafe" | "extern" | "as" | "break" | "continue" | "else" | "false" | "true" | "for"
        | "if" | "while" | "unsized" | "typeof" | "do" => {
            format!("r#{name}")
        }
        _ => name.to_string(),
    }
}

/// Emits Rust for `items`. `source` names the header in the docs.
pub fn emit_items(env: &Env, items: &[Item], source: &str) -> PResult<String> {
    let mut out = String::new();
    for it in items {
        match it {
            Item::Alias(a) => {
                doc(&mut out, &format!("Mirrors `{}` ({source}).", a.name));
                let t = env.rust_type(&a.ty, &ArraySuffix::None, false, false)?;
                let _ = writeln!(out, "pub type {} = {t};\n", a.name);
            }
            Item::Enum(e) => {
                let mut values = Vec::new();
                let mut next = 0i128;
                for (name, expr) in &e.members {
                    let v = if expr.is_empty() {
                        next
                    } else {
                        eval(expr, &env.consts)?
                    };
                    values.push((name, expr, v));
                    next = v + 1;
                }
                let negative = values.iter().any(|(_, _, v)| *v < 0);
                let repr = if negative { "i32" } else { "u32" };
                doc(
                    &mut out,
                    &format!("Mirrors the enum `{}` ({source}).", e.name),
                );
                let _ = writeln!(out, "pub type {} = {repr};", e.name);
                for (name, expr, v) in values {
                    doc(
                        &mut out,
                        &format!("Mirrors `{name}`, a value of `{}` ({source}).", e.name),
                    );
                    let _ = writeln!(
                        out,
                        "pub const {name}: {} = {};",
                        e.name,
                        enum_value_text(expr, v, negative)
                    );
                }
                out.push('\n');
            }
            Item::Struct(s) => {
                let kind = if s.is_union { "union" } else { "struct" };
                doc(
                    &mut out,
                    &format!("Mirrors the {kind} `{}` ({source}).", s.name),
                );
                let (default, debug) = env.derivable(s);
                let mut derives = vec!["Clone", "Copy"];
                if debug {
                    derives.push("Debug");
                }
                if default {
                    derives.push("Default");
                }
                let _ = writeln!(out, "#[repr(C)]\n#[derive({})]", derives.join(", "));
                let _ = writeln!(out, "pub {kind} {} {{", s.name);
                for f in &s.fields {
                    doc(&mut out, &format!("Mirrors `{}::{}`.", s.name, f.name));
                    let t = env.rust_type(&f.ty, &f.array, false, false)?;
                    let _ = writeln!(out, "pub {}: {t},", rust_ident(&f.name));
                }
                out.push_str("}\n\n");
            }
            Item::FnType(f) => {
                doc(
                    &mut out,
                    &format!("Mirrors the function type `{}` ({source}).", f.name),
                );
                let params = f
                    .params
                    .iter()
                    .map(|p| {
                        Ok(format!(
                            "{}: {}",
                            env.param_ident(&p.name),
                            env.rust_type(&p.ty, &p.array, p.is_in, p.is_out)?
                        ))
                    })
                    .collect::<PResult<Vec<_>>>()?;
                let ret = ret_text(env, &f.ret)?;
                let _ = writeln!(
                    out,
                    "pub type {} = unsafe extern \"system\" fn({}){ret};\n",
                    f.name,
                    params.join(", ")
                );
            }
            Item::Interface(i) => {
                doc(
                    &mut out,
                    &format!(
                        "Mirrors the interface `{}` ({source}), IID `{{{}}}`.",
                        i.name, i.iid
                    ),
                );
                let _ = writeln!(out, "#[windows_core::interface(\"{}\")]", i.iid);
                let _ = writeln!(out, "pub unsafe trait {}: {} {{", i.name, i.base);
                for m in &i.methods {
                    doc(
                        &mut out,
                        &format!("Mirrors `{}::{}` ({source}).", i.name, m.name),
                    );
                    let mut params = vec!["&self".to_string()];
                    for p in &m.params {
                        params.push(format!(
                            "{}: {}",
                            env.param_ident(&p.name),
                            env.rust_type(&p.ty, &p.array, p.is_in, p.is_out)?
                        ));
                    }
                    let ret = ret_text(env, &m.ret)?;
                    let _ = writeln!(out, "pub fn {}({}){ret};", m.name, params.join(", "));
                }
                out.push_str("}\n\n");
            }
        }
    }
    Ok(out)
}

fn ret_text(env: &Env, ret: &CType) -> PResult<String> {
    if ret.base == "void" && ret.ptrs == 0 {
        Ok(String::new())
    } else {
        Ok(format!(
            " -> {}",
            env.rust_type(ret, &ArraySuffix::None, false, false)?
        ))
    }
}

/// Tokens as strings (used when a caller wants to reuse [`eval`]).
#[allow(dead_code)]
pub fn texts(toks: &[Tok]) -> Vec<String> {
    toks.iter().map(|t| t.text().to_string()).collect()
}
