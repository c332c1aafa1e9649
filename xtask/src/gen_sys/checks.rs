//! Independent fact tables for the clrprof-sys tests, and the test files
//! generated from them.
//!
//! The bindings come from corprof.idl and cor.h; the expectations come from
//! other sources so that a reading error in one is caught by the other:
//! IIDs from corprof_i.cpp, vtable sizes and struct layouts from the
//! MIDL-generated C header corprof.h, and for the metadata interfaces the
//! Windows SDK metadata (win32metadata) table below.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::corh::{format_guid, parse_c_header};
use super::lex::{tokenize, PpRules, Tok};
use super::model::*;
use super::parse::{parse_int, PResult};

/// Metadata interfaces: IID and vtable slot count (IUnknown's three
/// included), as recorded in the Windows SDK metadata (win32metadata's
/// `Windows.Win32.System.WinRT.Metadata`), independent of cor.h.
pub const METADATA_FACTS: &[(&str, &str, usize)] = &[
    ("IMetaDataError", "B81FF171-20F3-11D2-8DCC-00A0C9B09C19", 4),
    ("IMapToken", "06A3EA8B-0225-11D1-BF72-00C04FC31E12", 4),
    (
        "IMetaDataDispenser",
        "809C652E-7396-11D2-9771-00A0C9B4D50C",
        6,
    ),
    (
        "IMetaDataDispenserEx",
        "31BCFCE2-DAFB-11D2-9F81-00C04F79A0A3",
        12,
    ),
    ("IMetaDataEmit", "BA3FEE4C-ECB9-4E41-83B7-183FA41CD859", 52),
    ("IMetaDataEmit2", "F5DD9950-F693-42E6-830E-7B833E8146A9", 60),
    (
        "IMetaDataImport",
        "7DAC8207-D3AE-4C75-9B67-92801A497D44",
        65,
    ),
    (
        "IMetaDataImport2",
        "FCE5EFA0-8BBA-4F8E-A036-8F2022B08466",
        73,
    ),
    ("IMetaDataFilter", "D0E80DD1-12D4-11D3-B39D-00C04FF81795", 6),
    ("IHostFilter", "D0E80DD3-12D4-11D3-B39D-00C04FF81795", 4),
    (
        "IMetaDataAssemblyEmit",
        "211EF15B-5317-4438-B196-DEC87B887693",
        13,
    ),
    (
        "IMetaDataAssemblyImport",
        "EE62470B-E94B-424E-9B7C-2F00C9249F93",
        17,
    ),
    (
        "IMetaDataValidate",
        "4709C9C6-81FF-11D3-9FC7-00C04F79A0A3",
        5,
    ),
    (
        "IMetaDataTables",
        "D8F579AB-402D-4B8E-82D9-5D63B1065C68",
        22,
    ),
    (
        "IMetaDataTables2",
        "BADB5F70-58DA-43A9-A1C6-D74819F19B15",
        24,
    ),
    ("IMetaDataInfo", "7998EA64-7F95-48B8-86FC-17CAF48BF5CB", 4),
];

/// Interfaces of metahost.idl that the runtime repository's copy lacks:
/// name, IID, vtable slots (Windows SDK metadata).
pub const METAHOST_FACTS: &[(&str, &str, usize)] =
    &[("ICLRProfiling", "B349ABE3-B56F-4689-BFCD-76BF39D888EA", 4)];

/// `MIDL_INTERFACE("guid") Name` lines of a MIDL-generated C++ header.
pub fn midl_interfaces(src: &str) -> BTreeMap<String, String> {
    let toks = tokenize(
        src,
        PpRules {
            false_conditions: &[],
        },
    );
    let mut out = BTreeMap::new();
    for w in toks.windows(5) {
        if w[0].is_ident("MIDL_INTERFACE") && w[1].is_punct("(") && w[3].is_punct(")") {
            if let (Tok::Str(g), Tok::Ident(n)) = (&w[2], &w[4]) {
                out.insert(n.clone(), g.to_ascii_uppercase());
            }
        }
    }
    out
}

/// `MIDL_DEFINE_GUID(IID, IID_X, ...)` lines of corprof_i.cpp.
pub fn midl_guids(src: &str) -> PResult<BTreeMap<String, String>> {
    let toks = tokenize(
        src,
        PpRules {
            false_conditions: &[],
        },
    );
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].is_ident("MIDL_DEFINE_GUID")
            && toks.get(i + 2).is_some_and(|t| t.is_ident("IID"))
        {
            let name = toks[i + 4].text().trim_start_matches("IID_").to_string();
            let mut nums = Vec::new();
            let mut j = i + 5;
            while !toks[j].is_punct(")") {
                if let Tok::Num(n) = &toks[j] {
                    nums.push(parse_int(n)? as u64);
                }
                j += 1;
            }
            out.insert(name, format_guid(&nums)?);
            i = j;
        }
        i += 1;
    }
    Ok(out)
}

/// Vtable slot counts of the C `XVtbl` structs of corprof.h.
pub fn vtbl_slots(src: &str) -> BTreeMap<String, usize> {
    let toks = tokenize(
        src,
        PpRules {
            false_conditions: &[],
        },
    );
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i + 3 < toks.len() {
        if toks[i].is_ident("typedef")
            && toks[i + 1].is_ident("struct")
            && toks[i + 3].is_punct("{")
        {
            if let Some(name) = toks[i + 2].text().strip_suffix("Vtbl") {
                let mut depth = 0;
                let mut slots = 0;
                let mut j = i + 3;
                loop {
                    if toks[j].is_punct("{") {
                        depth += 1;
                    } else if toks[j].is_punct("}") {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    } else if toks[j].is_punct("(")
                        && toks[j + 1].is_ident("STDMETHODCALLTYPE")
                        && toks[j + 2].is_punct("*")
                    {
                        slots += 1;
                    }
                    j += 1;
                }
                out.insert(name.to_string(), slots);
                i = j;
            }
        }
        i += 1;
    }
    out
}

/// Typedefs (structs, enums, aliases) of the C header corprof.h; its
/// `#if 0` block (cor.h's own copies of OSINFO and ASSEMBLYMETADATA) is dropped.
pub fn corprof_h_items(src: &str) -> PResult<Vec<Item>> {
    Ok(parse_c_header(src, &["0"])?.items)
}

/// C layout of one struct for one target.
struct Layout {
    size: u64,
    align: u64,
    /// Field name, offset, size.
    offsets: Vec<(String, u64, u64)>,
}

/// C layout rules of one target: pointer size and 8-byte integer alignment.
struct Target {
    ptr: u64,
    align8: u64,
}

struct Types<'a> {
    aliases: BTreeMap<&'a str, &'a CType>,
    structs: BTreeMap<&'a str, &'a StructDef>,
    enums: BTreeSet<&'a str>,
    fn_types: BTreeSet<&'a str>,
}

impl<'a> Types<'a> {
    fn new(sets: &[&'a [Item]]) -> Self {
        let mut t = Types {
            aliases: BTreeMap::new(),
            structs: BTreeMap::new(),
            enums: BTreeSet::new(),
            fn_types: BTreeSet::new(),
        };
        for items in sets {
            for it in items.iter() {
                match it {
                    Item::Alias(a) => {
                        t.aliases.entry(&a.name).or_insert(&a.ty);
                    }
                    Item::Struct(s) => {
                        t.structs.entry(&s.name).or_insert(s);
                    }
                    Item::Enum(e) => {
                        t.enums.insert(&e.name);
                    }
                    Item::FnType(f) => {
                        t.fn_types.insert(&f.name);
                    }
                    Item::Interface(_) => {}
                }
            }
        }
        t
    }

    fn scalar(&self, ty: &CType, tg: &Target) -> PResult<(u64, u64)> {
        if ty.ptrs > 0 {
            return Ok((tg.ptr, tg.ptr));
        }
        let b = ty.base.as_str();
        let p = tg.ptr;
        let known = match b {
            "BYTE" | "UINT8" | "uint8_t" | "char" | "unsigned char" | "BOOLEAN" => Some((1, 1)),
            "USHORT" | "WCHAR" | "uint16_t" | "short" | "unsigned short" => Some((2, 2)),
            "BOOL" | "LONG" | "ULONG" | "DWORD" | "UINT" | "INT" | "int" | "unsigned"
            | "unsigned int" | "UINT32" | "ULONG32" | "LONG32" | "HRESULT" | "uint32_t"
            | "int32_t" | "mdToken" => Some((4, 4)),
            "UINT64" | "ULONGLONG" | "LONGLONG" | "uint64_t" | "int64_t" => Some((8, tg.align8)),
            "UINT_PTR" | "ULONG_PTR" | "SIZE_T" | "INT_PTR" | "LPCWSTR" | "LPWSTR" | "LPCBYTE"
            | "LPBYTE" | "HANDLE" | "PVOID" | "HCORENUM" | "PCCOR_SIGNATURE" | "PCOR_SIGNATURE" => {
                Some((p, p))
            }
            "GUID" => Some((16, 4)),
            _ => None,
        };
        if let Some(k) = known {
            return Ok(k);
        }
        if b.starts_with("md") {
            return Ok((4, 4));
        }
        if self.enums.contains(b) {
            return Ok((4, 4));
        }
        if self.fn_types.contains(b) {
            return Ok((p, p));
        }
        if let Some(a) = self.aliases.get(b) {
            return self.scalar(a, tg);
        }
        if let Some(s) = self.structs.get(b) {
            let l = self.layout(s, tg)?;
            return Ok((l.size, l.align));
        }
        Err(format!("no C size for type `{b}`"))
    }

    fn layout(&self, s: &StructDef, tg: &Target) -> PResult<Layout> {
        let mut off = 0u64;
        let mut size = 0u64;
        let mut align = 1u64;
        let mut offsets = Vec::new();
        for f in &s.fields {
            let (mut fs, fa) = self.scalar(&f.ty, tg)?;
            if let ArraySuffix::Fixed(n) = f.array {
                fs *= n;
            }
            align = align.max(fa);
            if s.is_union {
                offsets.push((f.name.clone(), 0, fs));
                size = size.max(fs);
            } else {
                off = off.div_ceil(fa) * fa;
                offsets.push((f.name.clone(), off, fs));
                off += fs;
                size = off;
            }
        }
        let size = size.div_ceil(align) * align;
        Ok(Layout {
            size,
            align,
            offsets,
        })
    }
}

/// Emits `tests/layout.rs`. `checked` pairs each binding file's structs
/// with the items that give their C definition.
pub fn layout_test(groups: &[(&str, Vec<&StructDef>)], all: &[&[Item]]) -> PResult<String> {
    let types = Types::new(all);
    let t64 = Target { ptr: 8, align8: 8 };
    // 32-bit expectations follow the MSVC x86 rules (8-byte integers
    // 8-aligned), i.e. the Windows x86 runtime.
    let t32 = Target { ptr: 4, align8: 8 };
    let mut out = String::new();
    out.push_str(&format!(
        "//! Generated by `cargo xtask gen-sys`; do not edit.\n//! Headers read: {}.\n//!\n",
        super::source()
    ));
    out.push_str(
        "//! Size, alignment and every field offset of every struct and union of the\n\
         //! bindings, against the C layout computed by the generator from the C\n\
         //! definitions (corprof.h, the MIDL output, for the profiling API; cor.h and\n\
         //! corhdr.h for the metadata API). 64-bit targets use the LP64/LLP64 rules;\n\
         //! 32-bit expectations are those of Windows x86.\n\
         #![allow(non_snake_case)]\n\n\
         use clrprof_sys::*;\nuse core::mem::{align_of, offset_of, size_of};\n\n\
         const P64: bool = cfg!(target_pointer_width = \"64\");\n\n\
         fn pick(p64: usize, p32: usize) -> usize {\n    if P64 { p64 } else { p32 }\n}\n\n\
         /// Size of the field `get` selects.\n\
         fn field_size<S, F>(_get: fn(&S) -> &F) -> usize {\n    size_of::<F>()\n}\n\n",
    );
    for (source, structs) in groups {
        for s in structs {
            let l64 = types.layout(s, &t64)?;
            let l32 = types.layout(s, &t32)?;
            let _ = writeln!(
                out,
                "/// `{}` as declared in {source}.\n#[test]\nfn {}() {{",
                s.name, s.name
            );
            let _ = writeln!(
                out,
                "    assert_eq!(size_of::<{0}>(), pick({1}, {2}), \"size of {0}\");",
                s.name, l64.size, l32.size
            );
            let _ = writeln!(
                out,
                "    assert_eq!(align_of::<{0}>(), pick({1}, {2}), \"alignment of {0}\");",
                s.name, l64.align, l32.align
            );
            if !s.is_union {
                for ((f, o64, s64), (_, o32, s32)) in l64.offsets.iter().zip(&l32.offsets) {
                    let _ = writeln!(
                        out,
                        "    assert_eq!(field_size(|s: &{0}| &s.{1}), pick({2}, {3}), \"size of {0}::{4}\");",
                        s.name, super::emit::rust_ident(f), s64, s32, f
                    );
                    let _ = writeln!(
                        out,
                        "    assert_eq!(offset_of!({0}, {1}), pick({2}, {3}), \"offset of {0}::{4}\");",
                        s.name, super::emit::rust_ident(f), o64, o32, f
                    );
                }
            }
            out.push_str("}\n\n");
        }
    }
    Ok(out)
}

/// Emits `tests/iids.rs`.
pub fn iid_test(expected: &[(String, String, &str)]) -> String {
    let mut out = String::from(&format!(
        "//! Generated by `cargo xtask gen-sys`; do not edit.\n//! Headers read: {}.\n//!\n",
        super::source()
    ));
    out.push_str(
        "//! Every interface's IID in the bindings (taken from corprof.idl / cor.h)\n\
         //! against an independent source: corprof_i.cpp (MIDL output) for the\n\
         //! profiling API, the Windows SDK metadata for the metadata API.\n\
         #![allow(non_snake_case)]\n\n\
         use clrprof_sys::*;\n\n\
         fn guid(s: &str) -> GUID {\n    GUID::from_u128(u128::from_str_radix(&s.replace('-', \"\"), 16).expect(\"test table GUID\"))\n}\n\n",
    );
    for (name, guid, source) in expected {
        let _ = writeln!(
            out,
            "/// `{name}`: IID from {source}.\n#[test]\nfn {name}() {{\n    assert_eq!(<{name} as Interface>::IID, guid(\"{guid}\"));\n}}\n"
        );
    }
    out
}

/// Emits `tests/vtables.rs`.
pub fn vtable_test(expected: &[(String, usize, &str)]) -> String {
    let mut out = String::from(&format!(
        "//! Generated by `cargo xtask gen-sys`; do not edit.\n//! Headers read: {}.\n//!\n",
        super::source()
    ));
    out.push_str(
        "//! Vtable slot count (IUnknown's three included) of every interface in the\n\
         //! bindings against an independent source: the C `...Vtbl` structs of\n\
         //! corprof.h for the profiling API, the Windows SDK metadata for the\n\
         //! metadata API. A missing, extra or misplaced method changes the count.\n\
         #![allow(non_snake_case)]\n\n\
         use clrprof_sys::*;\nuse core::mem::size_of;\n\n\
         fn slots<V>() -> usize {\n    size_of::<V>() / size_of::<usize>()\n}\n\n",
    );
    for (name, n, source) in expected {
        let _ = writeln!(
            out,
            "/// `{name}`: {n} slots in {source}.\n#[test]\nfn {name}() {{\n    assert_eq!(slots::<{name}_Vtbl>(), {n});\n}}\n"
        );
    }
    out
}

/// Emits `tests/implement.rs`: a Rust type implementing the whole
/// `ICorProfilerCallback11` chain, and QueryInterface checks on it.
pub fn implement_test(env: &super::emit::Env, chain: &[&InterfaceDef]) -> PResult<String> {
    let mut out = String::from(&format!(
        "//! Generated by `cargo xtask gen-sys`; do not edit.\n//! Headers read: {}.\n//!\n",
        super::source()
    ));
    out.push_str(
        "//! A Rust type can implement the whole callback chain with\n\
         //! `#[implement(ICorProfilerCallback11)]`; QueryInterface answers every\n\
         //! interface of the chain and IUnknown, refuses a foreign IID with\n\
         //! E_NOINTERFACE, and calls through each vtable reach the Rust methods.\n\
         #![allow(non_snake_case, clippy::too_many_arguments)]\n\n\
         use core::ffi::c_void;\nuse core::sync::atomic::{AtomicU32, Ordering};\n\n\
         use clrprof_sys::*;\nuse windows_core::implement;\n\n",
    );
    let last = chain.last().ok_or("empty callback chain")?;
    let _ = writeln!(
        out,
        "/// Calls that reached a `Probe` method (only one test makes calls).\nstatic CALLS: AtomicU32 = AtomicU32::new(0);\n\n/// A callback object whose methods count their calls and return S_OK.\n#[implement({})]\nstruct Probe;\n",
        last.name
    );
    for i in chain {
        let _ = writeln!(out, "impl {}_Impl for Probe_Impl {{", i.name);
        for m in &i.methods {
            let mut params = vec!["&self".to_string()];
            for p in &m.params {
                params.push(format!(
                    "_{}: {}",
                    p.name,
                    env.rust_type(&p.ty, &p.array, p.is_in, p.is_out)?
                ));
            }
            let _ = writeln!(
                out,
                "    unsafe fn {}({}) -> HRESULT {{\n        CALLS.fetch_add(1, Ordering::SeqCst);\n        S_OK\n    }}",
                m.name,
                params.join(", ")
            );
        }
        out.push_str("}\n\n");
    }
    out.push_str(
        "fn probe() -> IUnknown {\n    Probe.into()\n}\n\n\
         /// QueryInterface through IUnknown for `iid`; releases what it got.\n\
         fn query(unknown: &IUnknown, iid: &GUID) -> HRESULT {\n\
         \x20   let mut out: *mut c_void = core::ptr::null_mut();\n\
         \x20   // SAFETY: `unknown` is a live COM object and `out` is a valid out-pointer.\n\
         \x20   let hr = unsafe { unknown.query(iid, &mut out) };\n\
         \x20   if !out.is_null() {\n\
         \x20       // SAFETY: a successful QueryInterface returned one reference we own.\n\
         \x20       drop(unsafe { IUnknown::from_raw(out) });\n\
         \x20   }\n\
         \x20   hr\n}\n\n",
    );
    out.push_str(
        "#[test]\nfn query_interface_answers_the_whole_chain() {\n    let unknown = probe();\n",
    );
    out.push_str("    assert_eq!(query(&unknown, &IUnknown::IID), S_OK, \"IUnknown\");\n");
    for i in chain {
        let _ = writeln!(
            out,
            "    assert_eq!(query(&unknown, &{0}::IID), S_OK, \"{0}\");",
            i.name
        );
    }
    out.push_str("}\n\n");
    out.push_str(
        "#[test]\nfn query_interface_refuses_a_foreign_iid() {\n    let unknown = probe();\n\
         \x20   assert_eq!(query(&unknown, &ICorProfilerInfo::IID), E_NOINTERFACE);\n\
         \x20   assert_eq!(query(&unknown, &IMetaDataImport::IID), E_NOINTERFACE);\n}\n\n",
    );
    // Call the first method of every interface through that interface's vtable.
    out.push_str("#[test]\nfn calls_through_each_vtable_reach_the_implementation() {\n    let unknown = probe();\n");
    let mut expected = 0;
    for i in chain {
        let m = i.methods.first().ok_or("interface without methods")?;
        let args: Vec<String> = m
            .params
            .iter()
            .map(|p| {
                let t = env
                    .rust_type(&p.ty, &p.array, p.is_in, p.is_out)
                    .unwrap_or_default();
                if t.starts_with('*') {
                    "core::ptr::null_mut()".to_string()
                } else if t.starts_with("Option") {
                    "None".to_string()
                } else if t == "HRESULT" {
                    "S_OK".to_string()
                } else if t == "GUID" {
                    "GUID::zeroed()".to_string()
                } else if t == "FunctionIDOrClientID" {
                    "FunctionIDOrClientID { functionID: 0 }".to_string()
                } else {
                    "Default::default()".to_string()
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "    let i: {0} = unknown.cast().expect(\"{0}\");\n    // SAFETY: the probe ignores its arguments.\n    assert_eq!(unsafe {{ i.{1}({2}) }}, S_OK);",
            i.name,
            m.name,
            args.join(", ")
        );
        expected += 1;
    }
    let _ = writeln!(
        out,
        "    assert_eq!(CALLS.load(Ordering::SeqCst), {expected});\n}}"
    );
    Ok(out)
}
