//! Declaration parsing shared by the MIDL and C header readers.

use super::lex::Tok;
use super::model::{ArraySuffix, CType, Field, Param};

pub type PResult<T> = Result<T, String>;

/// A cursor over a token list.
pub struct Cursor<'a> {
    pub toks: &'a [Tok],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(toks: &'a [Tok]) -> Self {
        Cursor { toks, pos: 0 }
    }
    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }
    pub fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos)
    }
    pub fn peek_at(&self, n: usize) -> Option<&'a Tok> {
        self.toks.get(self.pos + n)
    }
    pub fn next(&mut self) -> PResult<&'a Tok> {
        let t = self
            .toks
            .get(self.pos)
            .ok_or_else(|| "unexpected end of input".to_string())?;
        self.pos += 1;
        Ok(t)
    }
    pub fn eat_punct(&mut self, p: &str) -> bool {
        if self.peek().is_some_and(|t| t.is_punct(p)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    pub fn eat_ident(&mut self, s: &str) -> bool {
        if self.peek().is_some_and(|t| t.is_ident(s)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    pub fn expect_punct(&mut self, p: &str) -> PResult<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(format!(
                "expected `{p}`, found {:?} {}",
                self.peek(),
                self.context()
            ))
        }
    }
    pub fn ident(&mut self) -> PResult<String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s.clone()),
            t => Err(format!(
                "expected identifier, found {t:?} {}",
                self.context()
            )),
        }
    }
    /// A few tokens around the cursor, for error messages.
    pub fn context(&self) -> String {
        let lo = self.pos.saturating_sub(8);
        let hi = (self.pos + 8).min(self.toks.len());
        let s: Vec<&str> = self.toks[lo..hi].iter().map(|t| t.text()).collect();
        format!("near `{}`", s.join(" "))
    }
    /// Skips a balanced group starting at an opening bracket.
    pub fn skip_group(&mut self) -> PResult<()> {
        let open = self.next()?.text().to_string();
        let close = match open.as_str() {
            "(" => ")",
            "[" => "]",
            "{" => "}",
            _ => return Err(format!("not a group opener: {open}")),
        };
        let mut depth = 1;
        while depth > 0 {
            let t = self.next()?;
            if t.is_punct(&open) {
                depth += 1;
            } else if t.is_punct(close) {
                depth -= 1;
            }
        }
        Ok(())
    }
    /// Tokens up to (not including) one of `stops` at bracket depth 0.
    pub fn until(&mut self, stops: &[&str]) -> PResult<Vec<Tok>> {
        let mut out = Vec::new();
        let mut depth = 0i32;
        loop {
            let t = self.peek().ok_or("unexpected end of input")?;
            if depth == 0 && stops.iter().any(|s| t.is_punct(s)) {
                return Ok(out);
            }
            if t.is_punct("(") || t.is_punct("[") || t.is_punct("{") {
                depth += 1;
            } else if t.is_punct(")") || t.is_punct("]") || t.is_punct("}") {
                depth -= 1;
            }
            out.push(t.clone());
            self.pos += 1;
        }
    }
}

/// Identifiers that decorate declarations without changing their type.
fn is_decoration(s: &str) -> bool {
    matches!(
        s,
        "STDMETHODCALLTYPE"
            | "__stdcall"
            | "WINAPI"
            | "UNALIGNED"
            | "struct"
            | "enum"
            | "IN"
            | "OUT"
    ) || s.starts_with("__")
        || (s.starts_with('_') && s.len() > 1 && s.as_bytes()[1].is_ascii_uppercase())
}

/// Removes SAL annotations (`_Out_writes_(n)`, `__in`), call conventions and
/// `struct`/`enum` keywords from a declaration's tokens.
pub fn strip_decorations(toks: &[Tok]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if let Tok::Ident(s) = &toks[i] {
            // The declared name itself may look like a decoration (`__unused`).
            let is_last_name = toks.get(i + 1).is_none_or(|t| t.is_punct("["));
            let keep_as_name = is_last_name && s.starts_with("__") && s != "__stdcall";
            if is_decoration(s) && !keep_as_name {
                i += 1;
                if i < toks.len() && toks[i].is_punct("(") && s != "__stdcall" {
                    let mut depth = 0;
                    while i < toks.len() {
                        if toks[i].is_punct("(") {
                            depth += 1;
                        } else if toks[i].is_punct(")") {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                        i += 1;
                    }
                }
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// Parses a type written as tokens (`const WCHAR *`, `unsigned int`, `void const **`).
pub fn parse_type(toks: &[Tok]) -> PResult<CType> {
    let mut base = Vec::new();
    let mut const_base = false;
    let mut ptrs = 0;
    for t in toks {
        match t {
            Tok::Ident(s) if s == "const" => {
                if ptrs == 0 {
                    const_base = true;
                }
            }
            Tok::Ident(s) => {
                if ptrs > 0 {
                    return Err(format!("identifier `{s}` after `*` in type"));
                }
                base.push(s.clone());
            }
            Tok::Punct(p) if p == "*" => ptrs += 1,
            Tok::Punct(p) if p == "&" => ptrs += 1,
            other => return Err(format!("unexpected {other:?} in type")),
        }
    }
    if base.is_empty() {
        return Err("type without a name".into());
    }
    Ok(CType {
        base: base.join(" "),
        const_base,
        ptrs,
    })
}

/// Parses `TYPE NAME [SUFFIX]` (a field or parameter declaration without attributes).
pub fn parse_decl(toks: &[Tok], unnamed_index: usize) -> PResult<(CType, String, ArraySuffix)> {
    let toks = strip_decorations(toks);
    let mut end = toks.len();
    let mut array = ArraySuffix::None;
    if end > 0 && toks[end - 1].is_punct("]") {
        let open = toks
            .iter()
            .rposition(|t| t.is_punct("["))
            .ok_or("unbalanced `]`")?;
        array = match &toks[open + 1..end - 1] {
            [] => ArraySuffix::Unsized,
            [Tok::Num(n)] => ArraySuffix::Fixed(parse_int(n)? as u64),
            other => return Err(format!("unsupported array bound {other:?}")),
        };
        end = open;
    }
    let toks = &toks[..end];
    // The name is the last identifier, unless the declaration has none
    // (`void` alone, or a type only).
    match toks.last() {
        Some(Tok::Ident(name)) if toks.len() > 1 && name != "const" => {
            let ty = parse_type(&toks[..toks.len() - 1])?;
            Ok((ty, name.clone(), array))
        }
        _ => Ok((parse_type(toks)?, format!("arg{unnamed_index}"), array)),
    }
}

/// Parses a struct field declaration.
pub fn parse_field(toks: &[Tok]) -> PResult<Field> {
    let (ty, name, array) = parse_decl(toks, 0)?;
    Ok(Field { name, ty, array })
}

/// Parses a comma-separated parameter list between `(` and `)`, with
/// optional MIDL attributes in front of each parameter. The cursor must be
/// at the `(`; it is left after the `)`.
pub fn parse_params(c: &mut Cursor<'_>) -> PResult<Vec<Param>> {
    c.expect_punct("(")?;
    let mut params = Vec::new();
    if c.eat_punct(")") {
        return Ok(params);
    }
    loop {
        let (is_in, is_out) = if c.peek().is_some_and(|t| t.is_punct("[")) {
            let attrs = parse_attrs(c)?;
            (
                attrs.iter().any(|(a, _)| a == "in"),
                attrs.iter().any(|(a, _)| a == "out"),
            )
        } else {
            (false, false)
        };
        let toks = c.until(&[",", ")"])?;
        let single_void = toks.len() == 1 && toks[0].is_ident("void");
        if !single_void {
            let (ty, name, array) = parse_decl(&toks, params.len())?;
            params.push(Param {
                name,
                ty,
                array,
                is_in,
                is_out,
            });
        }
        if c.eat_punct(")") {
            return Ok(params);
        }
        c.expect_punct(",")?;
    }
}

/// Parses `[a, b(x), c]` into (name, argument text) pairs.
pub fn parse_attrs(c: &mut Cursor<'_>) -> PResult<Vec<(String, String)>> {
    c.expect_punct("[")?;
    let mut out = Vec::new();
    loop {
        if c.eat_punct("]") {
            return Ok(out);
        }
        let name = c.ident()?;
        let mut arg = String::new();
        if c.eat_punct("(") {
            let toks = c.until(&[")"])?;
            c.expect_punct(")")?;
            arg = toks.iter().map(|t| t.text()).collect::<Vec<_>>().join("");
        }
        out.push((name, arg));
        if !c.eat_punct(",") {
            c.expect_punct("]")?;
            return Ok(out);
        }
    }
}

/// Parses a C integer literal (decimal or hex, with optional `u`/`l` suffixes).
pub fn parse_int(s: &str) -> PResult<i128> {
    let t = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i128::from_str_radix(h, 16)
    } else {
        t.parse::<i128>()
    };
    v.map_err(|e| format!("bad number `{s}`: {e}"))
}
