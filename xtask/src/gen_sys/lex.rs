//! A small C/MIDL tokenizer: enough for the declarations in corprof.idl,
//! cor.h, corhdr.h and the MIDL-generated corprof.h.

/// One token of C-like source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// Identifier or keyword.
    Ident(String),
    /// Number literal as written (`0x1F`, `42`, `0X02000000`, `1u`).
    Num(String),
    /// String literal with the quotes removed.
    Str(String),
    /// Punctuation; two-character operators (`<<`, `>>`, `::`) are one token.
    Punct(String),
}

impl Tok {
    pub fn is_ident(&self, s: &str) -> bool {
        matches!(self, Tok::Ident(i) if i == s)
    }
    pub fn is_punct(&self, s: &str) -> bool {
        matches!(self, Tok::Punct(p) if p == s)
    }
    pub fn text(&self) -> &str {
        match self {
            Tok::Ident(s) | Tok::Num(s) | Tok::Str(s) | Tok::Punct(s) => s,
        }
    }
}

/// Preprocessor handling for [`tokenize`].
#[derive(Clone, Copy)]
pub struct PpRules<'a> {
    /// `#if`/`#ifdef`/`#ifndef` lines whose text (after the directive) is
    /// one of these are treated as false: their block is dropped up to the
    /// matching `#else`/`#endif`. Every other conditional is treated as true
    /// (both branches kept), which is right for the headers we read.
    pub false_conditions: &'a [&'a str],
}

/// Tokenizes `src`, dropping comments and preprocessor lines.
pub fn tokenize(src: &str, rules: PpRules<'_>) -> Vec<Tok> {
    let src = drop_false_blocks(src, rules);
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if line_start && c == b'#' {
            // Skip the directive, honouring backslash continuations.
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && i + 1 < b.len() && b[i + 1] == b'\n' {
                    i += 2;
                    continue;
                }
                if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
                    i = skip_block_comment(b, i);
                    continue;
                }
                i += 1;
            }
            continue;
        }
        line_start = false;
        if c == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i = skip_block_comment(b, i);
            continue;
        }
        if c == b'"' || c == b'\'' {
            let q = c;
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push(Tok::Str(src[start..i.min(b.len())].to_string()));
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(src[start..i].to_string()));
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Num(src[start..i].to_string()));
            continue;
        }
        let two = if i + 1 < b.len() { &src[i..i + 2] } else { "" };
        if matches!(two, "<<" | ">>" | "::" | "->" | "&&" | "||" | "==" | "!=") {
            out.push(Tok::Punct(two.to_string()));
            i += 2;
            continue;
        }
        out.push(Tok::Punct((c as char).to_string()));
        i += 1;
    }
    out
}

fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    i += 2;
    while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
        i += 1;
    }
    i + 2
}

/// Removes the lines of conditional blocks whose condition is listed as false.
fn drop_false_blocks(src: &str, rules: PpRules<'_>) -> String {
    let mut out = String::with_capacity(src.len());
    // Stack of (dropping, depth-of-this-conditional-is-false-one).
    let mut stack: Vec<bool> = Vec::new();
    for line in src.lines() {
        let t = line.trim_start();
        let dropping = stack.iter().any(|d| *d);
        if let Some(rest) = t.strip_prefix('#') {
            let rest = rest.trim_start();
            let (dir, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let arg = arg.split("//").next().unwrap_or("").trim();
            match dir {
                "if" | "ifdef" | "ifndef" => {
                    let full = format!("{dir} {arg}");
                    let is_false = rules
                        .false_conditions
                        .iter()
                        .any(|c| *c == arg || *c == full);
                    stack.push(is_false);
                    continue;
                }
                "else" | "elif" => {
                    if let Some(top) = stack.last_mut() {
                        // The else-branch of a false condition is kept; the
                        // else-branch of a kept condition is kept as well
                        // only when nothing was dropped (we keep both).
                        if *top {
                            *top = false;
                        }
                    }
                    continue;
                }
                "endif" => {
                    stack.pop();
                    continue;
                }
                _ => {}
            }
        }
        if !dropping {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}
