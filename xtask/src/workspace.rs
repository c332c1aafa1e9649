//! Facts about the workspace that every command needs: where it is, which
//! examples it has, and whether this run is strict.

use std::path::{Path, PathBuf};

/// The workspace root (xtask lives directly below it).
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// Whether strict mode is on: `--strict` among `args`, or `CI=true`.
pub fn strict_from(args: &[String]) -> bool {
    args.iter().any(|a| a == "--strict")
        || std::env::var("CI")
            .map(|v| v == "true" || v == "1")
            .unwrap_or(false)
}

/// Example profiler packages: every `examples/<name>/Cargo.toml`.
pub fn example_packages(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("examples"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
