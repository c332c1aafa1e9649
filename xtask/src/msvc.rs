//! `cargo xtask msvc [--strict]`: the SDK as Windows users build it, with
//! the MSVC toolchain's target `x86_64-pc-windows-msvc`.
//!
//! What this machine can prove without Microsoft's tools:
//!
//! 1. `cargo build --target x86_64-pc-windows-msvc -p clrprof-sys -p clrprof`
//!    (libraries: compiled and assembled, nothing linked), so the ELT
//!    trampolines assemble for MSVC with rustc alone;
//! 2. `cargo check --target x86_64-pc-windows-msvc --lib
//!    --no-default-features` of every example profiler (type-checked; a
//!    `cdylib` link needs `link.exe` and the Windows SDK's import libraries,
//!    which are not here; and the sampler's default `https` feature builds
//!    ring, whose C needs `cl.exe` or `clang-cl` for this target, which are
//!    not here either, so its TLS is checked for the GNU target only);
//! 3. the unwind data of the Win64 trampolines in the MSVC-built object:
//!    each of the six has a `.pdata` entry covering it whose `.xdata` says
//!    what its prologue does (`rsp -= 0x28` for enter, `0x38` for leave and
//!    tailcall, `0xA8` for the WithInfo ones), read with mingw-w64's
//!    `objdump -x`.
//!
//! Not proven here: linking an MSVC DLL, and running it (the Windows legs run
//! the `x86_64-pc-windows-gnu` build of the same trampoline source under
//! Wine, and the register harness runs there too).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The MSVC target.
pub const TARGET: &str = "x86_64-pc-windows-msvc";

/// The trampolines whose unwind data is checked, with the stack
/// allocation of each one's prologue (`src/elt/x86_64_win64.rs`).
pub const TRAMPOLINES: [(&str, u32); 6] = [
    ("clrprof_elt_enter3_trampoline", 0x28),
    ("clrprof_elt_leave3_trampoline", 0x38),
    ("clrprof_elt_tailcall3_trampoline", 0x38),
    ("clrprof_elt_enter3_with_info", 0xA8),
    ("clrprof_elt_leave3_with_info", 0xA8),
    ("clrprof_elt_tailcall3_with_info", 0xA8),
];

const OBJDUMP: &str = "x86_64-w64-mingw32-objdump";

/// The outcome of the MSVC step.
#[derive(Debug, Clone)]
pub struct Report {
    /// Each check by name, with its failure.
    pub checks: Vec<(String, Result<(), String>)>,
    /// Why the step could not run at all (target or objdump missing).
    pub unavailable: Option<String>,
}

pub fn main(args: &[String]) -> crate::Result {
    for arg in args {
        if arg != "--strict" {
            return Err(format!("msvc: unknown argument `{arg}`").into());
        }
    }
    let strict = crate::workspace::strict_from(args);
    crate::toolchain::ensure(strict)?;
    let report = run(&crate::workspace::root());
    for (name, result) in &report.checks {
        match result {
            Ok(()) => println!("ok      {name}"),
            Err(e) => println!("FAILED  {name}: {e}"),
        }
    }
    if let Some(why) = &report.unavailable {
        if strict {
            return Err(format!("msvc: {why}").into());
        }
        println!("skipped: {why}");
    }
    let failed = report.checks.iter().filter(|(_, r)| r.is_err()).count();
    if failed > 0 {
        return Err(format!("msvc: {failed} check(s) failed").into());
    }
    Ok(())
}

/// Runs the three checks (see the module docs).
pub fn run(root: &Path) -> Report {
    if !target_installed(TARGET) {
        return Report {
            checks: Vec::new(),
            unavailable: Some(format!(
                "Rust target {TARGET} not installed (cargo xtask toolchain)"
            )),
        };
    }
    let mut checks = Vec::new();
    let build = build_libraries(root);
    let rlib = match &build {
        Ok(rlib) => Some(rlib.clone()),
        Err(_) => None,
    };
    checks.push((
        format!("cargo build --target {TARGET} -p clrprof-sys -p clrprof"),
        build.map(|_| ()),
    ));
    let examples = crate::workspace::example_packages(root);
    checks.push((
        format!(
            "cargo check --target {TARGET} --lib --no-default-features (examples: {})",
            examples.join(", ")
        ),
        check_examples(root, &examples),
    ));
    let unwind = match rlib {
        None => Err("clrprof-sys did not build".to_string()),
        Some(rlib) => check_unwind_data(&rlib),
    };
    checks.push((
        "Win64 trampolines: .pdata/.xdata in the MSVC object".to_string(),
        unwind,
    ));
    Report {
        checks,
        unavailable: None,
    }
}

fn cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    Command::new(cargo)
}

/// Builds the two libraries; returns clrprof-sys's rlib.
fn build_libraries(root: &Path) -> Result<PathBuf, String> {
    let output = cargo()
        .current_dir(root)
        .args([
            "build",
            "--target",
            TARGET,
            "-p",
            "clrprof-sys",
            "-p",
            "clrprof",
        ])
        .args(["--message-format", "json-render-diagnostics"])
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo build failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "clrprof_sys")
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "rlib"))
        .ok_or_else(|| "cargo reported no clrprof-sys rlib".to_string())
}

fn check_examples(root: &Path, examples: &[String]) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.current_dir(root).args([
        "check",
        "--target",
        TARGET,
        "--lib",
        "--no-default-features",
    ]);
    for e in examples {
        cmd.args(["-p", e]);
    }
    let output = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo check failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn check_unwind_data(rlib: &Path) -> Result<(), String> {
    let output = Command::new(OBJDUMP)
        .arg("-x")
        .arg(rlib)
        .output()
        .map_err(|e| format!("cannot run {OBJDUMP} (cargo xtask toolchain): {e}"))?;
    // objdump complains about the rlib's non-object members on stderr and
    // exits non-zero for them; the COFF members are dumped regardless.
    let text = String::from_utf8_lossy(&output.stdout);
    check_objdump(&text, &TRAMPOLINES)
}

/// Checks `objdump -x` output of an archive: the member that defines the
/// trampolines has, for each, a function-table (`.pdata`) entry starting at
/// its address, and that entry's unwind data (`.xdata`) has the prologue's
/// stack allocation (as objdump prints the unwind code: `rsp = rsp - 0xa8`).
pub fn check_objdump(text: &str, names: &[(&str, u32)]) -> Result<(), String> {
    let members = split_members(text);
    let member = members
        .iter()
        .find(|m| names.iter().all(|(n, _)| defined_symbol(m, n).is_some()))
        .ok_or("no object in the archive defines every trampoline")?;
    let table = function_table(member);
    let unwind = unwind_entries(member);
    let mut missing = Vec::new();
    for &(name, frame) in names {
        let allocation = format!("rsp = rsp - {frame:#x}");
        let Some(address) = defined_symbol(member, name) else {
            missing.push(format!("{name}: not defined"));
            continue;
        };
        let Some(&(_, end)) = table.iter().find(|(begin, _)| *begin == address) else {
            missing.push(format!("{name}: no .pdata entry at {address:#x}"));
            continue;
        };
        if end <= address {
            missing.push(format!("{name}: empty .pdata range"));
            continue;
        }
        let described = unwind
            .iter()
            .find(|(begin, e, _)| *begin == address && *e == end)
            .map(|(_, _, codes)| codes.contains(&allocation));
        match described {
            Some(true) => {}
            Some(false) => missing.push(format!("{name}: .xdata does not record `{allocation}`")),
            None => missing.push(format!("{name}: no .xdata entry for {address:#x}")),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// The dump of each archive member (split at its "file format" line).
fn split_members(text: &str) -> Vec<String> {
    let mut members = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.contains("file format") && !current.is_empty() {
            members.push(std::mem::take(&mut current));
        }
        current.push_str(line);
        current.push('\n');
    }
    members.push(current);
    members
}

/// The value of a symbol defined in a section of `member` (`(sec  N)` with
/// N > 0), from lines like
/// `[ 21](sec  1)(fl 0x00)(ty   20)(scl   2) (nx 0) 0x0000000000000000 name`.
fn defined_symbol(member: &str, name: &str) -> Option<u64> {
    member.lines().find_map(|line| {
        let line = line.trim();
        let (head, symbol) = line.rsplit_once(' ')?;
        if symbol != name {
            return None;
        }
        let section: i64 = line
            .split("(sec")
            .nth(1)?
            .split(')')
            .next()?
            .trim()
            .parse()
            .ok()?;
        if section <= 0 {
            return None;
        }
        let value = head.rsplit(' ').next()?.trim_start_matches("0x");
        u64::from_str_radix(value, 16).ok()
    })
}

/// `(begin, end)` of each line of "The Function Table" (`vma: begin end unwind`).
fn function_table(member: &str) -> Vec<(u64, u64)> {
    let Some(start) = member.find("The Function Table") else {
        return Vec::new();
    };
    member[start..]
        .lines()
        .skip(2)
        .map_while(|line| {
            let (_, rest) = line.split_once(':')?;
            let mut words = rest.split_whitespace();
            let begin = u64::from_str_radix(words.next()?, 16).ok()?;
            let end = u64::from_str_radix(words.next()?, 16).ok()?;
            Some((begin, end))
        })
        .collect()
}

/// `(begin, end, text of its unwind codes)` of each entry of "Dump of .xdata"
/// (` 0000000000000000 (rva: 00000000): 0000000000000000 - 00000000000000ba`).
fn unwind_entries(member: &str) -> Vec<(u64, u64, String)> {
    let Some(start) = member.find("Dump of .xdata") else {
        return Vec::new();
    };
    let mut entries: Vec<(u64, u64, String)> = Vec::new();
    for line in member[start..].lines().skip(1) {
        let header = line.split_once("):").and_then(|(_, range)| {
            let (begin, end) = range.split_once(" - ")?;
            Some((
                u64::from_str_radix(begin.trim(), 16).ok()?,
                u64::from_str_radix(end.trim(), 16).ok()?,
            ))
        });
        match header {
            Some((begin, end)) if line.contains("(rva:") => {
                entries.push((begin, end, String::new()))
            }
            _ if line.starts_with('\t') || line.starts_with("  ") => {
                if let Some(last) = entries.last_mut() {
                    last.2.push_str(line);
                    last.2.push('\n');
                }
            }
            _ => break,
        }
    }
    entries
}

fn target_installed(target: &str) -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let Ok(output) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .join("lib")
        .is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of mingw-w64 objdump 2.40's `-x` output for an rlib whose
    /// object member holds two trampolines.
    const DUMP: &str = concat!(
        "In archive libclrprof_sys.rlib:\n",
        "\n",
        "lib.rmeta:     file format not recognized\n",
        "\n",
        "clrprof_sys-1.rcgu.o:     file format pe-x86-64\n",
        "The Function Table (interpreted .pdata section contents)\n",
        "vma:\t\t\tBeginAddress\t EndAddress\t  UnwindData\n",
        " 0000000000000000:\t0000000000000000 00000000000000ba 0000000000000000\n",
        " 000000000000000c:\t00000000000000c0 000000000000017a 0000000000000008\n",
        "\n",
        "Dump of .xdata\n",
        " 0000000000000000 (rva: 00000000): 0000000000000000 - 00000000000000ba\n",
        "\tVersion: 1, Flags: none\n",
        "\tNbr codes: 2, Prologue size: 0x17, Frame offset: 0x0, Frame reg: none\n",
        "\t  pc+0x17: alloc large area: rsp = rsp - 0xa8\n",
        " 0000000000000008 (rva: 00000008): 00000000000000c0 - 000000000000017a\n",
        "\tVersion: 1, Flags: none\n",
        "\tNbr codes: 2, Prologue size: 0x17, Frame offset: 0x0, Frame reg: none\n",
        "\t  pc+0x17: alloc large area: rsp = rsp - 0xa8\n",
        "  6 .pdata        00000048  0000000000000000  0000000000000000  000007c2  2**2\n",
        "SYMBOL TABLE:\n",
        "[ 21](sec  1)(fl 0x00)(ty   20)(scl   2) (nx 0) 0x0000000000000000 tramp_a\n",
        "[ 22](sec  1)(fl 0x00)(ty   20)(scl   2) (nx 0) 0x00000000000000c0 tramp_b\n",
        "\n",
        "other.rcgu.o:     file format pe-x86-64\n",
        "SYMBOL TABLE:\n",
        "[229](sec  0)(fl 0x00)(ty    0)(scl   2) (nx 0) 0x0000000000000000 tramp_a\n",
    );

    #[test]
    fn finds_unwind_data_of_each_trampoline() {
        assert_eq!(
            check_objdump(DUMP, &[("tramp_a", 0xA8), ("tramp_b", 0xA8)]),
            Ok(())
        );
    }

    #[test]
    fn reports_a_trampoline_without_unwind_data() {
        let without_b = DUMP.replace(
            " 000000000000000c:\t00000000000000c0 000000000000017a 0000000000000008\n",
            "",
        );
        let both = [("tramp_a", 0xA8), ("tramp_b", 0xA8)];
        let err = check_objdump(&without_b, &both).unwrap_err();
        assert!(err.contains("tramp_b: no .pdata entry"), "{err}");
        let other_frame = DUMP.replacen("rsp = rsp - 0xa8", "rsp = rsp - 0x28", 1);
        let err = check_objdump(&other_frame, &both).unwrap_err();
        assert!(err.contains("tramp_a: .xdata does not record"), "{err}");
        assert_eq!(
            check_objdump(&other_frame, &[("tramp_a", 0x28), ("tramp_b", 0xA8)]),
            Ok(())
        );
        assert!(check_objdump(DUMP, &[("tramp_a", 0xA8), ("tramp_c", 0xA8)]).is_err());
    }
}
