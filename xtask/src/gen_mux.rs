//! `cargo xtask gen-mux`: generates the forwarding layer of the profiler
//! multiplexer (`clrprof-mux/src/generated.rs`) from the interface
//! definitions of `clrprof-sys/src/corprof.rs`.
//!
//! Two things are generated, one entry per interface method:
//! - the vtable of the per-child `ICorProfilerInfo*` proxy (Info1 … Info15):
//!   every method forwards to the runtime's own object, except the ones in
//!   [`INFO_INTERCEPTED`], whose slots point to the hand-written functions
//!   of `clrprof-mux/src/proxy.rs` (`intercept::Name`);
//! - the multiplexer's `ICorProfilerCallback*_Impl` methods (Callback1 …
//!   Callback11): every callback fans out to the children whose event mask
//!   asks for it (`routes::Name`, hand-written in `clrprof-mux/src/routes.rs`)
//!   and whose callback interface has that version, except the ones in
//!   [`CALLBACK_SPECIAL`], which call the hand-written `self.on_Name(..)`.
//!
//! Usage: `cargo xtask gen-mux` (writes the file) or `cargo xtask gen-mux
//! --check` (fails when the committed file is not what the generator makes).

use std::fmt::Write as _;
use std::path::Path;

/// Info methods the multiplexer implements itself (per child), in
/// `clrprof-mux/src/proxy.rs`.
const INFO_INTERCEPTED: &[&str] = &[
    "GetEventMask",
    "SetEventMask",
    "GetEventMask2",
    "SetEventMask2",
    "SetEnterLeaveFunctionHooks",
    "SetEnterLeaveFunctionHooks2",
    "SetEnterLeaveFunctionHooks3",
    "SetEnterLeaveFunctionHooks3WithInfo",
    "SetFunctionIDMapper",
    "SetFunctionIDMapper2",
    "GetILFunctionBody",
    "SetILFunctionBody",
    "SetILInstrumentedCodeMap",
    "RequestReJIT",
    "RequestRevert",
    "RequestReJITWithInliners",
    "RequestProfilerDetach",
];

/// Callbacks the multiplexer handles by hand (`on_Name` in
/// `clrprof-mux/src/callback.rs`): lifecycle, and the callbacks whose
/// result the runtime reads.
const CALLBACK_SPECIAL: &[&str] = &[
    "Initialize",
    "InitializeForAttach",
    "Shutdown",
    "ProfilerDetachSucceeded",
    "JITCompilationStarted",
    "JITInlining",
    "JITCachedFunctionSearchStarted",
    "ObjectReferences",
    "GarbageCollectionStarted",
    "GetReJITParameters",
    "GetAssemblyReferences",
    "LoadAsNotificationOnly",
];

/// One method of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Method {
    name: String,
    /// `(name, type)` pairs after `&self`.
    params: Vec<(String, String)>,
    ret: String,
}

/// One interface: its name, version (1 for the unnumbered one) and methods.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Interface {
    name: String,
    version: u32,
    methods: Vec<Method>,
}

pub fn main(args: &[String]) -> crate::Result {
    let mut check = false;
    for a in args {
        match a.as_str() {
            "--check" => check = true,
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?;
    let source = std::fs::read_to_string(root.join("clrprof-sys/src/corprof.rs"))?;
    let generated = generate(&source)?;
    let target = root.join("clrprof-mux/src/generated.rs");
    if check {
        let current = std::fs::read_to_string(&target).unwrap_or_default();
        if current != generated {
            return Err(format!("{} is stale: run `cargo xtask gen-mux`", target.display()).into());
        }
        println!("{} is up to date", target.display());
        return Ok(());
    }
    std::fs::write(&target, generated)?;
    // Keep the committed file in rustfmt's form.
    let status = std::process::Command::new("rustfmt")
        .args(["--edition", "2021"])
        .arg(&target)
        .status()?;
    if !status.success() {
        return Err("rustfmt failed on the generated file".into());
    }
    println!("wrote {}", target.display());
    Ok(())
}

/// The generated file, rustfmt-formatted when rustfmt is available (so
/// `--check` compares like with like).
fn generate(source: &str) -> crate::Result<String> {
    let interfaces = parse_interfaces(source)?;
    let family = |prefix: &str, max: u32| -> crate::Result<Vec<Interface>> {
        (1..=max)
            .map(|v| {
                let name = if v == 1 {
                    prefix.to_string()
                } else {
                    format!("{prefix}{v}")
                };
                interfaces
                    .iter()
                    .find(|i| i.name == name)
                    .cloned()
                    .map(|mut i| {
                        i.version = v;
                        i
                    })
                    .ok_or_else(|| format!("corprof.rs has no interface {name}").into())
            })
            .collect()
    };
    let infos = family("ICorProfilerInfo", 15)?;
    let callbacks = family("ICorProfilerCallback", 11)?;
    for name in INFO_INTERCEPTED {
        if !infos
            .iter()
            .any(|i| i.methods.iter().any(|m| m.name == *name))
        {
            return Err(format!("intercepted Info method {name} does not exist").into());
        }
    }
    for name in CALLBACK_SPECIAL {
        if !callbacks
            .iter()
            .any(|i| i.methods.iter().any(|m| m.name == *name))
        {
            return Err(format!("special callback {name} does not exist").into());
        }
    }
    let mut out = String::new();
    out.push_str(
        "//! Generated by `cargo xtask gen-mux` from `clrprof-sys/src/corprof.rs`; do not edit.\n\
         //!\n\
         //! The per-child `ICorProfilerInfo*` proxy's vtable (forwarding to the\n\
         //! runtime's object, or to the hand-written `proxy::intercept` functions)\n\
         //! and the multiplexer's `ICorProfilerCallback*` methods (fanning out to the\n\
         //! children through `routes`, or to the hand-written `on_*` methods).\n\
         \n\
         #![allow(non_snake_case, clippy::too_many_arguments)]\n\
         \n\
         use crate::callback::{Multiplexer, Multiplexer_Impl};\n\
         use crate::proxy::{intercept, InfoProxy};\n\
         use crate::routes;\n\
         use clrprof::sys::*;\n\
         use core::ffi::c_void;\n\n",
    );
    emit_info(&mut out, &infos);
    emit_callbacks(&mut out, &callbacks);
    Ok(rustfmt(&out))
}

/// Formats with rustfmt when it is installed; the text unchanged otherwise.
fn rustfmt(text: &str) -> String {
    use std::io::Write;
    let child = std::process::Command::new("rustfmt")
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return text.to_string();
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    match child.wait_with_output() {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap_or_else(|_| text.into()),
        _ => text.to_string(),
    }
}

fn args_decl(m: &Method) -> String {
    m.params
        .iter()
        .map(|(n, t)| format!("{n}: {t}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn args_use(m: &Method) -> String {
    m.params
        .iter()
        .map(|(n, _)| n.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

fn vtbl_name(i: &Interface) -> String {
    format!("{}_Vtbl", i.name)
}

fn emit_info(out: &mut String, infos: &[Interface]) {
    out.push_str("/// Forwarding functions of the Info proxy, one per method the proxy does not intercept.\npub(crate) mod info {\n    use super::*;\n\n");
    for i in infos {
        for m in &i.methods {
            if INFO_INTERCEPTED.contains(&m.name.as_str()) {
                continue;
            }
            let decl = args_decl(m);
            let sep = if decl.is_empty() { "" } else { ", " };
            let _ = writeln!(
                out,
                "    /// Forwards `{iface}::{name}` to the runtime's object.\n    \
                 pub(crate) unsafe extern \"system\" fn {name}(this: *mut c_void{sep}{decl}) -> {ret} {{\n        \
                 // SAFETY: the runtime or a child calls a vtable method with the\n        \
                 // object it was read from, an InfoProxy (COM's calling rule).\n        \
                 match unsafe {{ InfoProxy::forward::<{vtbl}>(this, {version}) }} {{\n            \
                 // SAFETY: the runtime's object implements {iface} (its\n            \
                 // version is checked above), and the arguments are the caller's,\n            \
                 // passed on unchanged under the same IDL contract.\n            \
                 Some((real, vtbl)) => unsafe {{ (vtbl.{name})(real{sep}{args}) }},\n            \
                 None => E_NOTIMPL,\n        \
                 }}\n    }}\n",
                iface = i.name,
                name = m.name,
                ret = m.ret,
                vtbl = vtbl_name(i),
                version = i.version,
                args = args_use(m),
            );
        }
    }
    out.push_str("}\n\n");

    // The vtable, nested from Info1 (inside, with IUnknown) to Info15.
    let mut expr = String::from(
        "IUnknown_Vtbl { QueryInterface: intercept::QueryInterface, AddRef: intercept::AddRef, Release: intercept::Release }",
    );
    for i in infos {
        let mut fields = format!("base__: {expr}");
        for m in &i.methods {
            let target = if INFO_INTERCEPTED.contains(&m.name.as_str()) {
                format!("intercept::{}", m.name)
            } else {
                format!("info::{}", m.name)
            };
            let _ = write!(fields, ", {}: {target}", m.name);
        }
        expr = format!("{} {{ {fields} }}", vtbl_name(i));
    }
    let _ = writeln!(
        out,
        "/// The Info proxy's vtable: `ICorProfilerInfo15`'s layout, which starts\n\
         /// with the layout of every earlier version.\n\
         pub(crate) static INFO_VTBL: {} = {expr};\n",
        vtbl_name(&infos[infos.len() - 1])
    );
}

fn emit_callbacks(out: &mut String, callbacks: &[Interface]) {
    for i in callbacks {
        let _ = writeln!(out, "impl {}_Impl for Multiplexer_Impl {{", i.name);
        for m in &i.methods {
            let decl = args_decl(m);
            let sep = if decl.is_empty() { "" } else { ", " };
            let args = args_use(m);
            if CALLBACK_SPECIAL.contains(&m.name.as_str()) {
                let _ = writeln!(
                    out,
                    "    unsafe fn {name}(&self{sep}{decl}) -> {ret} {{\n        \
                     // SAFETY: the runtime's arguments, passed on under the same contract.\n        \
                     unsafe {{ Multiplexer::on_{name}(self{sep}{args}) }}\n    }}",
                    name = m.name,
                    ret = m.ret,
                );
            } else {
                let _ = writeln!(
                    out,
                    "    unsafe fn {name}(&self{sep}{decl}) -> {ret} {{\n        \
                     self.fan_out(routes::{name}, {version}, |child| {{\n            \
                     // SAFETY: `fan_out` passes only children whose callback object\n            \
                     // implements {iface} (version {version}); the arguments are the\n            \
                     // runtime's, valid for this callback, passed on unchanged.\n            \
                     unsafe {{ (child.vtbl::<{vtbl}>().{name})(child.this(){sep}{args}) }}\n        \
                     }})\n    }}",
                    name = m.name,
                    ret = m.ret,
                    version = i.version,
                    iface = i.name,
                    vtbl = vtbl_name(i),
                );
            }
        }
        out.push_str("}\n\n");
    }
}

/// Reads every `pub unsafe trait NAME: PARENT { pub fn ...; }` block.
fn parse_interfaces(source: &str) -> crate::Result<Vec<Interface>> {
    let mut out = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("pub unsafe trait ") else {
            continue;
        };
        let name = rest
            .split(|c: char| c == ':' || c.is_whitespace())
            .next()
            .ok_or("trait without a name")?
            .to_string();
        let mut body = String::new();
        for l in lines.by_ref() {
            if l == "}" {
                break;
            }
            let t = l.trim();
            if t.starts_with("///") || t.starts_with("//") {
                continue;
            }
            body.push(' ');
            body.push_str(t);
        }
        let methods = body
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| parse_method(s).map_err(|e| format!("{name}: {e}: {s}")))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(Interface {
            name,
            version: 0,
            methods,
        });
    }
    Ok(out)
}

/// `pub fn Name(&self, a: T, b: U) -> R`.
fn parse_method(s: &str) -> Result<Method, String> {
    let s = s.strip_prefix("pub fn ").ok_or("expected `pub fn`")?.trim();
    let open = s.find('(').ok_or("no `(`")?;
    let name = s[..open].trim().to_string();
    let mut depth = 0usize;
    let mut close = None;
    for (k, c) in s.char_indices().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(k);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or("unbalanced parameter list")?;
    let inner = &s[open + 1..close];
    let ret = s[close + 1..]
        .trim()
        .strip_prefix("->")
        .map(|r| r.trim().to_string())
        .ok_or("no return type")?;
    let mut params = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut pieces = Vec::new();
    for (k, c) in inner.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    pieces.push(&inner[start..]);
    let mut pieces = pieces.into_iter().map(str::trim).filter(|p| !p.is_empty());
    if pieces.next() != Some("&self") {
        return Err("first parameter is not `&self`".into());
    }
    for p in pieces {
        let (n, t) = p.split_once(':').ok_or("parameter without a type")?;
        params.push((n.trim().to_string(), t.trim().to_string()));
    }
    Ok(Method { name, params, ret })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_with_pointer_and_option_types() {
        let m = parse_method(
            "pub fn SetEnterLeaveFunctionHooks3( &self, pFuncEnter3: Option<FunctionEnter3>, ppOut: *mut Option<IUnknown>, ) -> HRESULT",
        )
        .unwrap();
        assert_eq!(m.name, "SetEnterLeaveFunctionHooks3");
        assert_eq!(
            m.params,
            vec![
                ("pFuncEnter3".into(), "Option<FunctionEnter3>".into()),
                ("ppOut".into(), "*mut Option<IUnknown>".into())
            ]
        );
        assert_eq!(m.ret, "HRESULT");
        let m = parse_method("pub fn ForceGC(&self) -> HRESULT").unwrap();
        assert!(m.params.is_empty());
    }

    #[test]
    fn the_real_definitions_have_every_version_and_method_count() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let source = std::fs::read_to_string(root.join("clrprof-sys/src/corprof.rs")).unwrap();
        let all = parse_interfaces(&source).unwrap();
        let count = |prefix: &str| -> usize {
            all.iter()
                .filter(|i| {
                    i.name == prefix
                        || i.name
                            .strip_prefix(prefix)
                            .is_some_and(|v| v.parse::<u32>().is_ok())
                })
                .map(|i| i.methods.len())
                .sum()
        };
        // corprof.idl: 95 callbacks (Callback..11), 112 Info methods (Info..15).
        assert_eq!(count("ICorProfilerCallback"), 95);
        assert_eq!(count("ICorProfilerInfo"), 112);
    }

    #[test]
    fn the_committed_file_is_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let source = std::fs::read_to_string(root.join("clrprof-sys/src/corprof.rs")).unwrap();
        let committed = std::fs::read_to_string(root.join("clrprof-mux/src/generated.rs")).unwrap();
        assert!(
            generate(&source).unwrap() == committed,
            "clrprof-mux/src/generated.rs is stale: run `cargo xtask gen-mux`"
        );
    }
}
