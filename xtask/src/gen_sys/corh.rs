//! Reader for the C declarations of cor.h: `EXTERN_GUID` lines, the
//! `DECLARE_INTERFACE_` blocks of the metadata interfaces, and typedefs.

use std::collections::BTreeMap;

use super::idl::parse_typedef;
use super::lex::{tokenize, PpRules, Tok};
use super::model::*;
use super::parse::*;

/// What cor.h declares.
pub struct CorH {
    /// Items in source order (typedefs and interfaces).
    pub items: Vec<Item>,
    /// `EXTERN_GUID(NAME, ...)` values, formatted `XXXXXXXX-XXXX-...`.
    pub guids: BTreeMap<String, String>,
    /// Typedefs the reader could not express (bit fields, anonymous unions).
    pub skipped: Vec<String>,
}

/// Parses cor.h.
pub fn parse_cor_h(src: &str) -> PResult<CorH> {
    parse_c_header(src, &[])
}

/// Parses the typedefs, `EXTERN_GUID`s and `DECLARE_INTERFACE_` blocks of a
/// C header, ignoring everything else; `false_conditions` as in [`PpRules`].
pub fn parse_c_header(src: &str, false_conditions: &[&str]) -> PResult<CorH> {
    let toks = tokenize(src, PpRules { false_conditions });
    let mut c = Cursor::new(&toks);
    let mut items = Vec::new();
    let mut guids = BTreeMap::new();
    let mut skipped = Vec::new();
    while !c.at_end() {
        let t = c.next()?;
        match t {
            Tok::Ident(s) if s == "EXTERN_GUID" || s == "DEFINE_GUID" => {
                c.expect_punct("(")?;
                let name = c.ident()?;
                let mut nums = Vec::new();
                while c.eat_punct(",") {
                    match c.next()? {
                        Tok::Num(n) => nums.push(parse_int(n)? as u64),
                        other => return Err(format!("bad GUID part {other:?}")),
                    }
                }
                c.expect_punct(")")?;
                guids.insert(name, format_guid(&nums)?);
            }
            Tok::Ident(s) if s == "DECLARE_INTERFACE_" => {
                c.expect_punct("(")?;
                let name = c.ident()?;
                c.expect_punct(",")?;
                let base = c.ident()?;
                c.expect_punct(")")?;
                let iid = guids
                    .get(&format!("IID_{name}"))
                    .cloned()
                    .ok_or(format!("no IID_{name} before its declaration"))?;
                items.push(Item::Interface(parse_declare_interface(
                    &mut c, name, base, iid,
                )?));
            }
            Tok::Ident(s) if s == "typedef" => {
                let start = c.pos;
                match parse_typedef(&mut c) {
                    Ok(item) => items.push(item),
                    Err(_) => {
                        // Skip the whole typedef: up to `;` after any braces.
                        c.pos = start;
                        loop {
                            if c.peek().is_some_and(|t| t.is_punct("{")) {
                                c.skip_group()?;
                                continue;
                            }
                            if c.next()?.is_punct(";") {
                                break;
                            }
                        }
                        let name = c.toks[c.pos - 2].text().to_string();
                        skipped.push(name);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(CorH {
        items,
        guids,
        skipped,
    })
}

/// Formats the 11 numbers of a `DEFINE_GUID` as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`.
pub fn format_guid(n: &[u64]) -> PResult<String> {
    if n.len() != 11 {
        return Err(format!("GUID with {} parts", n.len()));
    }
    Ok(format!(
        "{:08X}-{:04X}-{:04X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}",
        n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10]
    ))
}

fn parse_declare_interface(
    c: &mut Cursor<'_>,
    name: String,
    base: String,
    iid: String,
) -> PResult<InterfaceDef> {
    c.expect_punct("{")?;
    let mut methods = Vec::new();
    while !c.eat_punct("}") {
        let kind = c.ident()?;
        c.expect_punct("(")?;
        let (ret, mname) = match kind.as_str() {
            "STDMETHOD" => {
                let n = c.ident()?;
                (
                    CType {
                        base: "HRESULT".into(),
                        const_base: false,
                        ptrs: 0,
                    },
                    n,
                )
            }
            "STDMETHOD_" => {
                let rt = c.until(&[","])?;
                c.expect_punct(",")?;
                (parse_type(&rt)?, c.ident()?)
            }
            other => return Err(format!("unexpected `{other}` in {name} {}", c.context())),
        };
        c.expect_punct(")")?;
        let params = parse_params(c)?;
        if !c.eat_ident("PURE") {
            return Err(format!("missing PURE after {name}::{mname}"));
        }
        c.expect_punct(";")?;
        methods.push(Method {
            name: mname,
            ret,
            params,
        });
    }
    c.eat_punct(";");
    Ok(InterfaceDef {
        name,
        base,
        iid,
        methods,
    })
}
