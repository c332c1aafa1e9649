//! `cargo xtask book [--strict] [--serve]`: check and build the mdBook tutorial.
//!
//! Steps: check every listing of `book/src` (see [`check_listings`]) →
//! find mdbook: an `mdbook` on `PATH` that reports the pinned version, else
//! `target/tools/bin/mdbook`, installed there when missing (one
//! `cargo install --locked`, cached under `target/`) → `mdbook build book`
//! into `target/book`. The listings are compiled by the normal workspace
//! build: the book only includes files of the example crates, so a listing
//! that no longer compiles fails `cargo build` and one that no longer exists
//! fails the check here. Without network (mdbook cannot be installed) the
//! build is skipped with a warning, and is an error in strict mode.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The mdbook release installed into `target/tools`.
const MDBOOK_VERSION: &str = "0.5.4";

pub fn main(args: &[String]) -> crate::Result {
    let mut serve = false;
    for a in args {
        match a.as_str() {
            "--strict" => {}
            "--serve" => serve = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask book [--strict] [--serve]\n\n\
                     Checks the listings of book/src, installs mdbook into target/tools when\n\
                     missing and builds the book into target/book (--serve: serve it on\n\
                     localhost:3000 instead)."
                );
                return Ok(());
            }
            other => return Err(format!("book: unknown argument `{other}`").into()),
        }
    }
    let strict = crate::workspace::strict_from(args);
    if serve {
        let root = crate::workspace::root();
        check_listings(&root.join("book").join("src"))?;
        let mdbook = ensure_mdbook(&root)?;
        let status = Command::new(mdbook)
            .current_dir(&root)
            .args(["serve", "book"])
            .status()?;
        return if status.success() {
            Ok(())
        } else {
            Err(format!("mdbook serve failed ({status})").into())
        };
    }
    build(strict)
}

/// Checks the listings and builds the book into `target/book`. When mdbook
/// cannot be installed, this is a warning, or an error in strict mode.
pub fn build(strict: bool) -> crate::Result {
    println!("\n==> book: check the listings, mdbook build");
    let root = crate::workspace::root();
    let src = root.join("book").join("src");
    let checked = check_listings(&src)?;
    println!("book: {checked} included listing(s) resolve");
    let mdbook = match ensure_mdbook(&root) {
        Ok(m) => m,
        Err(e) if !strict => {
            eprintln!("book: warning: {e}; the book was not built");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let out = Command::new(&mdbook)
        .current_dir(&root)
        .args(["build", "book"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", mdbook.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // mdbook reports a broken include as an ERROR line but still exits 0.
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
    if !out.status.success() || !errors.is_empty() {
        return Err(format!("mdbook build failed ({}):\n{stderr}", out.status).into());
    }
    println!(
        "book: built into {}",
        root.join("target").join("book").display()
    );
    Ok(())
}

/// The `mdbook` on `PATH` when it is the pinned version (a machine where
/// `cargo install` cannot reach crates.io has one installed beside cargo).
fn mdbook_on_path() -> Option<PathBuf> {
    let name = if cfg!(windows) {
        "mdbook.exe"
    } else {
        "mdbook"
    };
    let path = clrprof_testing::manifest::find_on_path(name)?;
    let out = Command::new(&path).arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout);
    (out.status.success() && version.trim() == format!("mdbook v{MDBOOK_VERSION}")).then_some(path)
}

/// mdbook: the pinned version on `PATH`, else `target/tools/bin/mdbook`,
/// installed with cargo when missing.
fn ensure_mdbook(root: &Path) -> crate::Result<PathBuf> {
    if let Some(on_path) = mdbook_on_path() {
        return Ok(on_path);
    }
    let tools = root.join("target").join("tools");
    let bin = tools.join("bin").join(if cfg!(windows) {
        "mdbook.exe"
    } else {
        "mdbook"
    });
    if bin.is_file() {
        return Ok(bin);
    }
    println!(
        "book: installing mdbook {MDBOOK_VERSION} into {}",
        tools.display()
    );
    let started = Instant::now();
    let status = Command::new(clrprof_testing::build::cargo())
        .args(["install", "mdbook", "--locked", "--version", MDBOOK_VERSION])
        .args(["--no-default-features", "--features", "search", "--root"])
        .arg(&tools)
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    if !status.success() || !bin.is_file() {
        return Err(format!("cargo install mdbook failed ({status})").into());
    }
    println!(
        "book: mdbook installed in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(bin)
}

/// One `{{#include PATH[:ANCHOR]}}` directive of a chapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The path as written, relative to the chapter's folder.
    pub path: String,
    /// The anchor name, or line range, after `:`, if any.
    pub anchor: Option<String>,
}

/// The include directives of a chapter's text.
pub fn includes(text: &str) -> Vec<Include> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{#include ") {
        let after = &rest[start + "{{#include ".len()..];
        let Some(end) = after.find("}}") else { break };
        let spec = after[..end].trim();
        let (path, anchor) = match spec.split_once(':') {
            Some((p, a)) => (p.to_string(), Some(a.to_string())),
            None => (spec.to_string(), None),
        };
        found.push(Include { path, anchor });
        rest = &after[end..];
    }
    found
}

/// Whether a fenced code block's info string marks it as Rust that mdBook
/// would hand to rustdoc (```` ```rust ````, no `ignore`/`text`-like marker).
fn is_tested_rust(info: &str) -> bool {
    let words: Vec<&str> = info
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    words.first() == Some(&"rust") && !words.iter().any(|w| *w == "ignore" || *w == "no_run")
}

/// Checks every chapter of `src`: each chapter named in `SUMMARY.md` exists;
/// each include names an existing file and, with an anchor, one that file
/// declares with `ANCHOR:`/`ANCHOR_END:`; each `rust` code block consists of
/// includes only (listings come from compiled crates; fragments must say
/// `ignore`). Returns how many includes were checked.
pub fn check_listings(src: &Path) -> crate::Result<usize> {
    let summary = std::fs::read_to_string(src.join("SUMMARY.md"))
        .map_err(|e| format!("{}: {e}", src.join("SUMMARY.md").display()))?;
    let mut problems = Vec::new();
    let mut checked = 0;
    for chapter in summary_chapters(&summary) {
        let path = src.join(&chapter);
        let Ok(text) = std::fs::read_to_string(&path) else {
            problems.push(format!("SUMMARY.md names {chapter}, which does not exist"));
            continue;
        };
        let dir = path.parent().unwrap_or(src);
        for inc in includes(&text) {
            checked += 1;
            let file = dir.join(&inc.path);
            let Ok(body) = std::fs::read_to_string(&file) else {
                problems.push(format!("{chapter}: include {} does not exist", inc.path));
                continue;
            };
            if inc.anchor.is_none() && body.contains("ANCHOR:") {
                problems.push(format!(
                    "{chapter}: {} is included whole but has ANCHOR comments, which would show; \
                     include an anchor that spans the file",
                    inc.path
                ));
            }
            if let Some(anchor) = inc.anchor.as_deref().filter(|a| is_anchor_name(a)) {
                let begin = format!("ANCHOR: {anchor}");
                let end = format!("ANCHOR_END: {anchor}");
                if !body.lines().any(|l| l.trim_end().ends_with(&begin))
                    || !body.lines().any(|l| l.trim_end().ends_with(&end))
                {
                    problems.push(format!(
                        "{chapter}: {} has no anchor `{anchor}` (ANCHOR/ANCHOR_END)",
                        inc.path
                    ));
                }
            }
        }
        for block in rust_blocks(&text) {
            let only_includes = block
                .lines()
                .all(|l| l.trim().is_empty() || l.trim().starts_with("{{#include "));
            if !only_includes {
                problems.push(format!(
                    "{chapter}: a ```rust block is not an include; include it from a compiled \
                     crate or mark a fragment of an included file `ignore`:\n{block}"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(format!("book listings:\n  {}", problems.join("\n  ")).into())
    }
}

/// A line range (`10:20`, `5:`) rather than an anchor name.
fn is_anchor_name(a: &str) -> bool {
    !a.is_empty() && !a.chars().all(|c| c.is_ascii_digit() || c == ':')
}

/// Chapter files linked from `SUMMARY.md` (`[Title](file.md)`), in order.
pub fn summary_chapters(summary: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in summary.lines() {
        let mut rest = line;
        while let Some(open) = rest.find("](") {
            let after = &rest[open + 2..];
            let Some(close) = after.find(')') else { break };
            let target = &after[..close];
            if target.ends_with(".md") {
                found.push(target.to_string());
            }
            rest = &after[close..];
        }
    }
    found
}

/// Bodies of the fenced code blocks that rustdoc would test.
fn rust_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match current.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    current = Some(String::new());
                    if !is_tested_rust(info) {
                        // Not a tested block: consume it without keeping it.
                        current = Some("\u{0}skip".to_string());
                    }
                }
            }
            Some(body) => {
                if trimmed.starts_with("```") {
                    if !body.starts_with('\u{0}') {
                        blocks.push(std::mem::take(body));
                    }
                    current = None;
                } else if !body.starts_with('\u{0}') {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_includes_with_and_without_anchors() {
        let text = "a {{#include ../../examples/x/src/lib.rs}} b\n\
                    {{#include ../f.rs:setup}} {{#include g.rs:3:7}}";
        let found = includes(text);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].path, "../../examples/x/src/lib.rs");
        assert_eq!(found[0].anchor, None);
        assert_eq!(found[1].anchor.as_deref(), Some("setup"));
        assert!(is_anchor_name("setup"));
        assert!(!is_anchor_name("3:7"));
    }

    #[test]
    fn only_untagged_rust_blocks_are_tested() {
        let text = "```rust\n{{#include a.rs}}\n```\n```rust,ignore\nlet x = 1;\n```\n\
                    ```text\nout\n```\n```rust\nfn main() {}\n```\n";
        let blocks = rust_blocks(text);
        assert_eq!(blocks, vec!["{{#include a.rs}}\n", "fn main() {}\n"]);
        assert!(is_tested_rust("rust"));
        assert!(!is_tested_rust("rust,ignore"));
        assert!(!is_tested_rust("console"));
    }

    #[test]
    fn summary_links_in_order() {
        let s = "# Summary\n\n[Intro](intro.md)\n- [Setup](setup.md)\n  - [Deep](a/deep.md)\n";
        assert_eq!(
            summary_chapters(s),
            vec!["intro.md", "setup.md", "a/deep.md"]
        );
    }

    #[test]
    fn the_book_in_this_repository_checks() {
        let src = crate::workspace::root().join("book").join("src");
        let n = check_listings(&src).unwrap();
        assert!(n > 0, "the book includes no listing at all");
    }

    #[test]
    fn a_missing_anchor_is_reported() {
        let dir = std::env::temp_dir().join(format!("xtask-book-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SUMMARY.md"), "- [C](c.md)\n- [Gone](gone.md)\n").unwrap();
        std::fs::write(
            dir.join("f.rs"),
            "// ANCHOR: yes\nfn f() {}\n// ANCHOR_END: yes\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("c.md"),
            "```rust\n{{#include f.rs:yes}}\n```\n```rust\n{{#include f.rs:no}}\n```\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("SUMMARY.md"),
            "- [C](c.md)\n- [Gone](gone.md)\n- [W](w.md)\n",
        )
        .unwrap();
        std::fs::write(dir.join("w.md"), "```rust,ignore\n{{#include f.rs}}\n```\n").unwrap();
        let err = check_listings(&dir).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.contains("f.rs is included whole but has ANCHOR comments"),
            "{err}"
        );
        assert!(err.contains("has no anchor `no`"), "{err}");
        assert!(err.contains("gone.md, which does not exist"), "{err}");
        assert!(!err.contains("anchor `yes`"), "{err}");
    }
}
