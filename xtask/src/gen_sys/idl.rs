//! Reader for the MIDL subset used by corprof.idl and metahost.idl.

use super::lex::{tokenize, PpRules, Tok};
use super::model::*;
use super::parse::*;

/// Parses a MIDL file into its items, in source order.
pub fn parse_idl(src: &str) -> PResult<Vec<Item>> {
    let toks = tokenize(
        src,
        PpRules {
            // Declarations that the C headers take from cor.h/corhdr.h.
            false_conditions: &["!DEFINITIONS_FROM_NON_IMPORTABLE_PLACES"],
        },
    );
    let mut c = Cursor::new(&toks);
    let mut items = Vec::new();
    while !c.at_end() {
        let t = c.next()?;
        match t {
            Tok::Punct(p) if p == ";" => {}
            Tok::Ident(s) if s == "import" || s == "importlib" => {
                c.until(&[";"])?;
                c.expect_punct(";")?;
            }
            Tok::Ident(s) if s == "cpp_quote" || s == "midl_pragma" => {
                if c.peek().is_some_and(|t| t.is_ident("warning")) {
                    c.next()?;
                }
                c.skip_group()?;
            }
            Tok::Ident(s) if s == "typedef" => items.push(parse_typedef(&mut c)?),
            Tok::Ident(s) if (s == "interface" || s == "enum" || s == "struct") => {
                // Forward declaration.
                c.ident()?;
                c.expect_punct(";")?;
            }
            Tok::Punct(p) if p == "[" => {
                c.pos -= 1;
                let attrs = parse_attrs(&mut c)?;
                if c.eat_ident("interface") {
                    let iid = attrs
                        .iter()
                        .find(|(a, _)| a == "uuid")
                        .map(|(_, v)| v.to_ascii_uppercase())
                        .ok_or("interface without uuid")?;
                    items.push(Item::Interface(parse_interface(&mut c, iid)?));
                } else if c.eat_ident("library") {
                    // metahost.idl has no library block we need; skip it.
                    c.ident()?;
                    c.skip_group()?;
                } else {
                    return Err(format!("attributes before unknown item {}", c.context()));
                }
            }
            other => return Err(format!("unexpected {other:?} {}", c.context())),
        }
    }
    Ok(items)
}

fn parse_interface(c: &mut Cursor<'_>, iid: String) -> PResult<InterfaceDef> {
    let name = c.ident()?;
    c.expect_punct(":")?;
    let base = c.ident()?;
    c.expect_punct("{")?;
    let mut methods = Vec::new();
    while !c.eat_punct("}") {
        // Method attributes (e.g. [local]) are not used by any binding.
        if c.peek().is_some_and(|t| t.is_punct("[")) {
            parse_attrs(c)?;
        }
        let head = c.until(&["("])?;
        let head = strip_decorations(&head);
        let (ret_toks, name_tok) = head.split_at(head.len().saturating_sub(1));
        let mname = match name_tok {
            [Tok::Ident(n)] => n.clone(),
            _ => return Err(format!("bad method head {}", c.context())),
        };
        let ret = parse_type(ret_toks)?;
        let params = parse_params(c)?;
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

pub fn parse_typedef(c: &mut Cursor<'_>) -> PResult<Item> {
    if c.peek().is_some_and(|t| t.is_punct("[")) {
        parse_attrs(c)?;
    }
    if c.eat_ident("enum") {
        if !c.peek().is_some_and(|t| t.is_punct("{")) {
            c.ident()?; // tag
        }
        if c.eat_punct(":") {
            // C++ underlying type (`enum X : unsigned`); the binding is u32 anyway.
            c.until(&["{"])?;
        }
        c.expect_punct("{")?;
        let mut members = Vec::new();
        loop {
            if c.eat_punct("}") {
                break;
            }
            let name = c.ident()?;
            let mut value = Vec::new();
            if c.eat_punct("=") {
                value = c
                    .until(&[",", "}"])?
                    .iter()
                    .map(|t| t.text().to_string())
                    .collect();
            }
            members.push((name, value));
            if !c.eat_punct(",") {
                c.expect_punct("}")?;
                break;
            }
        }
        let name = c.ident()?;
        c.expect_punct(";")?;
        return Ok(Item::Enum(EnumDef { name, members }));
    }
    let is_struct = c.peek().is_some_and(|t| t.is_ident("struct"));
    let is_union = c.peek().is_some_and(|t| t.is_ident("union"));
    if (is_struct || is_union)
        && (c.peek_at(1).is_some_and(|t| t.is_punct("{"))
            || c.peek_at(2).is_some_and(|t| t.is_punct("{")))
    {
        c.next()?;
        if !c.peek().is_some_and(|t| t.is_punct("{")) {
            c.ident()?; // tag
        }
        c.expect_punct("{")?;
        let mut fields = Vec::new();
        while !c.eat_punct("}") {
            let toks = c.until(&[";"])?;
            c.expect_punct(";")?;
            fields.push(parse_field(&toks)?);
        }
        let name = c.ident()?;
        c.expect_punct(";")?;
        return Ok(Item::Struct(StructDef {
            name,
            is_union,
            fields,
        }));
    }
    // Function type, function pointer type or plain alias.
    let toks = c.until(&[";"])?;
    c.expect_punct(";")?;
    if let Some(open) = toks.iter().position(|t| t.is_punct("(")) {
        let pre = strip_decorations(&toks[..open]);
        // A calling convention may sit inside the parentheses: `(__stdcall *Name)`.
        let star = if toks
            .get(open + 1)
            .is_some_and(|t| t.is_ident("__stdcall") || t.is_ident("STDMETHODCALLTYPE"))
        {
            open + 2
        } else {
            open + 1
        };
        let (ret, name, is_pointer, params_at) = if toks.get(star).is_some_and(|t| t.is_punct("*"))
        {
            // RET (*Name)(params)
            let name = toks
                .get(star + 1)
                .map(|t| t.text().to_string())
                .ok_or("bad function pointer typedef")?;
            (parse_type(&pre)?, name, true, star + 3)
        } else {
            let (r, n) = pre.split_at(pre.len() - 1);
            (parse_type(r)?, n[0].text().to_string(), false, open)
        };
        let mut pc = Cursor::new(&toks[params_at..]);
        let params = parse_params(&mut pc)?;
        return Ok(Item::FnType(FnTypedef {
            name,
            ret,
            params,
            is_pointer,
        }));
    }
    let (ty, name, array) = parse_decl(&toks, 0)?;
    if array != ArraySuffix::None {
        return Err(format!("array typedef {name} not supported"));
    }
    Ok(Item::Alias(Alias { name, ty }))
}
