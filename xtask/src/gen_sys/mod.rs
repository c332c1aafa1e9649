//! `cargo xtask gen-sys`: regenerates the raw bindings in `clrprof-sys/src`
//! from the runtime's reference headers.
//!
//! Usage: `cargo xtask gen-sys --ref-dir DIR --source TEXT` where DIR holds
//! `corprof.idl`, `corprof.h`, `corprof_i.cpp`, `cor.h`, `corhdr.h`,
//! `metahost.idl` and `metahost.h` (from dotnet/runtime or
//! dotnet/diagnostics; they are not part of this repository) and TEXT names
//! where they came from, repository and commit (e.g. `dotnet/runtime@<sha>`).
//! Instead of `--source`, DIR may hold a file `SOURCE` with that text. The
//! source is written into the header of every generated file. The
//! generated files are committed.

mod checks;
mod corh;
mod emit;
mod idl;
mod lex;
mod model;
mod parse;

use std::path::{Path, PathBuf};

use emit::{emit_items, Env};
use model::{Item, StructDef};

/// Names the C headers take from cor.h / corhdr.h; the crate defines them
/// in `types.rs` / `metadata.rs`, so the IDL's copies are not emitted.
const DEFINED_ELSEWHERE: &[&str] = &["CorElementType"];

/// Names `types.rs` defines by hand; cor.h's typedefs of them are not emitted.
const HAND_WRITTEN: &[&str] = &[
    "UVCP_CONSTANT",
    "HCORENUM",
    "RID",
    "COR_SIGNATURE",
    "PCOR_SIGNATURE",
    "PCCOR_SIGNATURE",
];

/// corhdr.h typedefs the header reader skips (bit fields, anonymous unions,
/// several declarators); the ones the bindings need are written by hand in
/// `corhdr_manual.rs.in`. A change in this list means the header changed.
const CORHDR_SKIPPED: &[&str] = &[
    "PIMAGE_DATA_DIRECTORY",
    "PIMAGE_COR20_HEADER",
    "IMAGE_COR_ILMETHOD_SECT_FAT",
    "IMAGE_COR_ILMETHOD_SECT_EH_CLAUSE_FAT",
    "IMAGE_COR_ILMETHOD_SECT_EH_CLAUSE_SMALL",
    "IMAGE_COR_ILMETHOD_FAT",
];

/// The part of metahost.idl that .NET Framework attach needs.
const METAHOST_KEEP: &[&str] = &[
    "CallbackThreadSetFnPtr",
    "CallbackThreadUnsetFnPtr",
    "RuntimeLoadedCallbackFnPtr",
    "ICLRMetaHost",
    "ICLRRuntimeInfo",
];

/// `ICLRProfiling` is missing from the runtime repository's metahost.idl;
/// its declaration (facts of the Windows SDK's metahost.idl) in MIDL form.
const CLR_PROFILING_IDL: &str = "
[uuid(B349ABE3-B56F-4689-BFCD-76BF39D888EA), local]
interface ICLRProfiling : IUnknown
{
    HRESULT AttachProfiler(
        [in] DWORD dwProfileeProcessID,
        [in] DWORD dwMillisecondsMax,
        [in] const CLSID *pClsidProfiler,
        [in] LPCWSTR wszProfilerPath,
        [in, size_is(cbClientData)] void *pvClientData,
        [in] UINT cbClientData);
}
";

/// Class IDs of metahost.idl: name, GUID (`CLSID_CLRProfiling` is a fact of
/// the Windows SDK's metahost.idl; `CLSID_CLRMetaHost` is read from metahost.h).
const CLSID_CLR_PROFILING: &str = "BD097ED8-733E-43FE-8ED7-A95FF9A8448C";

/// Hand-written part of `corhdr.rs`.
const CORHDR_MANUAL: &str = include_str!("corhdr_manual.rs.in");

pub fn main(args: &[String]) -> crate::Result {
    let mut ref_dir: Option<PathBuf> = None;
    let mut source: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--ref-dir" => ref_dir = it.next().map(PathBuf::from),
            "--source" => source = it.next().cloned(),
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    let ref_dir =
        ref_dir.ok_or("missing --ref-dir DIR (directory holding corprof.idl, cor.h, ...)")?;
    let source = match source {
        Some(s) => s,
        None => std::fs::read_to_string(ref_dir.join("SOURCE"))
            .map(|s| s.trim().to_string())
            .map_err(|_| {
                "missing --source TEXT (repository and commit of the headers, e.g. \
                 dotnet/runtime@<sha>), or a SOURCE file in the --ref-dir"
            })?,
    };
    if source.is_empty() || source.contains('\n') {
        return Err("--source must be one non-empty line".into());
    }
    SOURCE.with(|s| *s.borrow_mut() = source);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?
        .to_path_buf();
    let src_dir = root.join("clrprof-sys/src");

    let idl_text = read(&ref_dir.join("corprof.idl"))?;
    let idl_items: Vec<Item> = idl::parse_idl(&idl_text)
        .map_err(|e| format!("corprof.idl: {e}"))?
        .into_iter()
        .filter(|i| !DEFINED_ELSEWHERE.contains(&i.name()))
        .collect();

    let cor_h =
        corh::parse_cor_h(&read(&ref_dir.join("cor.h"))?).map_err(|e| format!("cor.h: {e}"))?;
    let md_items: Vec<Item> = cor_h
        .items
        .iter()
        .filter(|i| {
            !HAND_WRITTEN.contains(&i.name()) && !idl_items.iter().any(|j| j.name() == i.name())
        })
        .cloned()
        .collect();

    let corhdr = corh::parse_cor_h(&read(&ref_dir.join("corhdr.h"))?)
        .map_err(|e| format!("corhdr.h: {e}"))?;
    if corhdr.skipped != CORHDR_SKIPPED {
        return Err(format!("corhdr.h: skipped typedefs changed: {:?}", corhdr.skipped).into());
    }
    let hand_structs = [
        "IMAGE_COR_ILMETHOD_SECT_EH_FAT",
        "IMAGE_COR_ILMETHOD_SECT_EH_SMALL",
        "IMAGE_COR_ILMETHOD_SECT_EH",
        "IMAGE_COR_ILMETHOD",
    ];
    let hdr_items: Vec<Item> = corhdr
        .items
        .iter()
        .filter(|i| {
            let n = i.name();
            !HAND_WRITTEN.contains(&n)
                && !hand_structs.contains(&n)
                && !n.starts_with("md")
                && !idl_items.iter().any(|j| j.name() == n)
        })
        .cloned()
        .collect();
    if !cor_h.skipped.is_empty() {
        return Err(format!("cor.h: typedefs not understood: {:?}", cor_h.skipped).into());
    }

    let mh_items: Vec<Item> = idl::parse_idl(&read(&ref_dir.join("metahost.idl"))?)
        .map_err(|e| format!("metahost.idl: {e}"))?
        .into_iter()
        .filter(|i| METAHOST_KEEP.contains(&i.name()))
        .chain(idl::parse_idl(CLR_PROFILING_IDL).map_err(|e| format!("ICLRProfiling: {e}"))?)
        .collect();
    if mh_items.len() != METAHOST_KEEP.len() + 1 {
        return Err("metahost.idl: an expected declaration is missing".into());
    }
    let metahost_h = read(&ref_dir.join("metahost.h"))?;
    let mh_guids = corh::parse_c_header(&metahost_h, &[])?.guids;
    let clsid_metahost = mh_guids
        .get("CLSID_CLRMetaHost")
        .ok_or("metahost.h: no CLSID_CLRMetaHost")?;

    let mut env = Env::default();
    env.add(&hdr_items)?;
    env.add(&mh_items)?;
    env.add(&idl_items)?;
    env.add(&md_items)?;

    let mut body = emit_items(&env, &idl_items, "corprof.idl")?;
    body.push_str(&metahost_section(&env, &mh_items, clsid_metahost)?);
    let corprof = format!(
        "{}{}",
        header(
            "corprof.idl",
            "Profiling API of `corprof.idl`: IDs, enums, structs, hook types and the\n//! `ICorProfilerCallback*` / `ICorProfilerInfo*` interfaces, in IDL order; then the\n//! .NET Framework attach interfaces of `metahost.idl`.",
            &body
        ),
        body
    );
    write_rust(&src_dir.join("corprof.rs"), &corprof)?;

    let body = emit_items(&env, &md_items, "cor.h")?;
    let metadata = format!(
        "{}{}",
        header(
            "cor.h",
            "Metadata API of `cor.h`: `IMetaDataImport`/`Import2`, `IMetaDataAssemblyImport`,\n//! `IMetaDataEmit`/`Emit2`, `IMetaDataDispenser`/`DispenserEx` and the structs they use.",
            &body
        ),
        body
    );
    write_rust(&src_dir.join("metadata.rs"), &metadata)?;

    let body = emit_items(&env, &hdr_items, "corhdr.h")?;
    let corhdr_rs = format!(
        "{}{}{}",
        header(
            "corhdr.h",
            "Metadata definitions of `corhdr.h`: token types, attribute flags, element types,\n//! calling conventions and IL method headers.",
            &format!("{body}{CORHDR_MANUAL}")
        ),
        body,
        CORHDR_MANUAL
    );
    write_rust(&src_dir.join("corhdr.rs"), &corhdr_rs)?;

    write_tests(
        &ref_dir,
        &root.join("clrprof-sys/tests"),
        &env,
        &idl_items,
        &md_items,
        &hdr_items,
        &mh_items,
    )?;
    Ok(())
}

thread_local! {
    /// Where the headers came from (`--source`), written into every header.
    static SOURCE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The `--source` text.
pub(crate) fn source() -> String {
    SOURCE.with(|s| s.borrow().clone())
}

fn header(source: &str, what: &str, body: &str) -> String {
    let c_void = if body.contains("c_void") {
        "use core::ffi::c_void;\n\n"
    } else {
        ""
    };
    let origin = self::source();
    format!(
        "//! Generated by `cargo xtask gen-sys` from {source}; do not edit.\n//! Headers read: {origin}.\n//!\n//! {what}\n\n\
         // The runtime's methods take as many arguments as they take.\n\
         #![allow(clippy::too_many_arguments)]\n\n\
         {c_void}use crate::*;\n\n"
    )
}

fn read(p: &Path) -> crate::Result<String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()).into())
}

/// Writes a Rust file and formats it with rustfmt.
fn write_rust(p: &Path, text: &str) -> crate::Result {
    std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    let st = std::process::Command::new("rustfmt")
        .args(["--edition", "2021"])
        .arg(p)
        .status()?;
    if !st.success() {
        return Err(format!("rustfmt failed on {}", p.display()).into());
    }
    println!("wrote {}", p.display());
    Ok(())
}

/// Hand-written layout checks for the corhdr.h structs written by hand
/// (sizes from ECMA-335 II.25.4), appended to the generated layout test.
const LAYOUT_MANUAL: &str = include_str!("layout_manual.rs.in");

/// Generates the cross-checking tests in `clrprof-sys/tests`.
fn write_tests(
    ref_dir: &Path,
    tests_dir: &Path,
    env: &Env,
    idl_items: &[Item],
    md_items: &[Item],
    hdr_items: &[Item],
    mh_items: &[Item],
) -> crate::Result {
    let midl = checks::midl_guids(&read(&ref_dir.join("corprof_i.cpp"))?)?;
    let corprof_h = read(&ref_dir.join("corprof.h"))?;
    let vtbl = checks::vtbl_slots(&corprof_h);
    let mut iids = Vec::new();
    let mut slots = Vec::new();
    for it in idl_items {
        if let Item::Interface(i) = it {
            let g = midl
                .get(&i.name)
                .ok_or(format!("corprof_i.cpp has no IID_{}", i.name))?;
            iids.push((i.name.clone(), g.clone(), "corprof_i.cpp"));
            let n = vtbl
                .get(&i.name)
                .ok_or(format!("corprof.h has no {}Vtbl", i.name))?;
            slots.push((i.name.clone(), *n, "corprof.h"));
        }
    }
    for it in md_items {
        if let Item::Interface(i) = it {
            let (_, g, n) = checks::METADATA_FACTS
                .iter()
                .find(|(n, _, _)| *n == i.name)
                .ok_or(format!("no Windows SDK facts for {}", i.name))?;
            iids.push((i.name.clone(), g.to_string(), "the Windows SDK metadata"));
            slots.push((i.name.clone(), *n, "the Windows SDK metadata"));
        }
    }
    let mh_h = read(&ref_dir.join("metahost.h"))?;
    let mh_iids = checks::midl_interfaces(&mh_h);
    let mh_vtbl = checks::vtbl_slots(&mh_h);
    for it in mh_items {
        if let Item::Interface(i) = it {
            if let Some((_, g, n)) = checks::METAHOST_FACTS.iter().find(|(n, _, _)| *n == i.name) {
                iids.push((i.name.clone(), g.to_string(), "the Windows SDK metadata"));
                slots.push((i.name.clone(), *n, "the Windows SDK metadata"));
            } else {
                let g = mh_iids
                    .get(&i.name)
                    .ok_or(format!("metahost.h has no {}", i.name))?;
                iids.push((i.name.clone(), g.clone(), "metahost.h"));
                let n = mh_vtbl
                    .get(&i.name)
                    .ok_or(format!("metahost.h has no {}Vtbl", i.name))?;
                slots.push((i.name.clone(), *n, "metahost.h"));
            }
        }
    }
    write_rust(&tests_dir.join("iids.rs"), &checks::iid_test(&iids))?;
    write_rust(&tests_dir.join("vtables.rs"), &checks::vtable_test(&slots))?;

    let h_items = checks::corprof_h_items(&corprof_h).map_err(|e| format!("corprof.h: {e}"))?;
    let mut corprof_structs = Vec::new();
    for it in idl_items {
        if let Item::Struct(s) = it {
            let c = h_items
                .iter()
                .find_map(|h| match h {
                    Item::Struct(hs) if hs.name == s.name => Some(hs),
                    _ => None,
                })
                .ok_or(format!("corprof.h has no struct {}", s.name))?;
            corprof_structs.push(c);
        }
    }
    // Type names resolve first through corprof.h, then the IDL and headers.
    let all: [&[Item]; 4] = [&h_items, idl_items, md_items, hdr_items];
    let groups = [
        ("corprof.h", corprof_structs),
        ("cor.h", structs_of(md_items)),
        ("corhdr.h", structs_of(hdr_items)),
    ];
    let layout = checks::layout_test(&groups, &all)? + LAYOUT_MANUAL;
    write_rust(&tests_dir.join("layout.rs"), &layout)?;

    let chain: Vec<&model::InterfaceDef> = idl_items
        .iter()
        .filter_map(|i| match i {
            Item::Interface(d) if d.name.starts_with("ICorProfilerCallback") => Some(d),
            _ => None,
        })
        .collect();
    write_rust(
        &tests_dir.join("implement.rs"),
        &checks::implement_test(env, &chain)?,
    )?;
    Ok(())
}

fn structs_of(items: &[Item]) -> Vec<&StructDef> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Struct(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The metahost.idl part of `corprof.rs`: .NET Framework attach.
fn metahost_section(env: &Env, items: &[Item], clsid_metahost: &str) -> crate::Result<String> {
    let guid = |g: &str| {
        format!(
            "GUID::from_u128(0x{})",
            g.replace('-', "_").to_ascii_lowercase()
        )
    };
    let mut s = String::from(
        "\n// -------------------------------------------------------------------------\n\
         // metahost.idl: the .NET Framework hosting interfaces a profiler attach\n\
         // trigger needs (CLRCreateInstance -> ICLRMetaHost -> ICLRRuntimeInfo ->\n\
         // ICLRProfiling::AttachProfiler).\n\
         // -------------------------------------------------------------------------\n\n",
    );
    s.push_str(&format!(
        "/// Mirrors `CLSID_CLRMetaHost` (metahost.idl): the class `CLRCreateInstance` creates\n\
         /// for `ICLRMetaHost`.\npub const CLSID_CLRMetaHost: GUID = {};\n\n",
        guid(clsid_metahost)
    ));
    s.push_str(&format!(
        "/// Mirrors `CLSID_CLRProfiling` (metahost.idl): the class `ICLRRuntimeInfo::GetInterface`\n\
         /// creates for `ICLRProfiling`.\npub const CLSID_CLRProfiling: GUID = {};\n\n",
        guid(CLSID_CLR_PROFILING)
    ));
    s.push_str(
        "/// Mirrors the signature of `CLRCreateInstance` (metahost.idl), exported by\n\
         /// mscoree.dll on .NET Framework machines; resolve it at run time.\n\
         pub type CLRCreateInstanceFnPtr =\n    unsafe extern \"system\" fn(clsid: REFCLSID, riid: REFIID, ppInterface: *mut LPVOID) -> HRESULT;\n\n",
    );
    s.push_str(&emit_items(env, items, "metahost.idl")?);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::emit::{emit_items, eval, Env};
    use super::idl::parse_idl;
    use super::model::{ArraySuffix, Item};

    const SNIPPET: &str = r#"
        typedef UINT_PTR FunctionID;
        typedef enum { A = 0x1, B = 0x4 | A, C, D = ((1 << 3) - 1) } FLAGS;
        typedef enum { NEG = -2 } SIGNED;
        typedef struct _S { ULONG n; COR_X items[1]; const WCHAR *name; } S;
        typedef void STDMETHODCALLTYPE Hook(FunctionID id);
        typedef BOOL STDMETHODCALLTYPE (* PtrHook)(FunctionID id);
        [object, uuid(01234567-89ab-cdef-0123-456789abcdef), local]
        interface IThing : IUnknown
        {
            HRESULT M(
                [in] IUnknown *pIn,
                [out] IThing **ppOut,
                [in] Hook *pHook,
                [in] PtrHook hook2,
                [in, size_is(c)] ULONG ids[],
                [out, size_is(c), length_is(*pc)] ULONG outs[],
                [in, string] const WCHAR *name,
                [out] void **ppv);
        }
    "#;

    #[test]
    fn parses_the_midl_subset() {
        let items = parse_idl(SNIPPET).expect("snippet parses");
        let names: Vec<&str> = items.iter().map(|i| i.name()).collect();
        assert_eq!(
            names,
            [
                "FunctionID",
                "FLAGS",
                "SIGNED",
                "S",
                "Hook",
                "PtrHook",
                "IThing"
            ]
        );
        let Item::Struct(s) = &items[3] else {
            panic!("S is a struct")
        };
        assert_eq!(s.fields[1].array, ArraySuffix::Fixed(1));
        assert!(s.fields[2].ty.const_base && s.fields[2].ty.ptrs == 1);
        let Item::Interface(i) = &items[6] else {
            panic!("IThing is an interface")
        };
        assert_eq!(i.iid, "01234567-89AB-CDEF-0123-456789ABCDEF");
        assert_eq!(i.methods[0].params.len(), 8);
    }

    #[test]
    fn maps_parameters_by_the_crate_conventions() {
        let items = parse_idl(SNIPPET).expect("snippet parses");
        let mut env = Env::default();
        env.add(&items).expect("env");
        let Item::Interface(i) = &items[6] else {
            panic!("IThing is an interface")
        };
        let types: Vec<String> = i.methods[0]
            .params
            .iter()
            .map(|p| {
                env.rust_type(&p.ty, &p.array, p.is_in, p.is_out)
                    .expect("maps")
            })
            .collect();
        assert_eq!(
            types,
            [
                "*mut c_void",
                "*mut Option<IThing>",
                "Option<Hook>",
                "Option<PtrHook>",
                "*const ULONG",
                "*mut ULONG",
                "*const WCHAR",
                "*mut *mut c_void",
            ]
        );
    }

    #[test]
    fn evaluates_and_renders_enum_values() {
        let items = parse_idl(SNIPPET).expect("snippet parses");
        let mut env = Env::default();
        env.add(&items).expect("env");
        assert_eq!(env.consts["B"], 5);
        assert_eq!(env.consts["C"], 6);
        assert_eq!(env.consts["D"], 7);
        let out = emit_items(&env, &items[1..3], "test.idl").expect("emits");
        assert!(out.contains("pub type FLAGS = u32;"));
        assert!(out.contains("pub const B: FLAGS = 0x4 | A;"));
        assert!(out.contains("pub type SIGNED = i32;"));
        assert!(out.contains("pub const NEG: SIGNED = -2;"));
        let t = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(eval(&t("( 1 << 3 ) - 1"), &env.consts), Ok(7));
        assert!(eval(&t("UNKNOWN"), &env.consts).is_err());
    }
}
