//! `cargo xtask package [--verify]`: `cargo package` of every crate meant for
//! crates.io, so that one that would not publish fails `cargo xtask test`.
//!
//! The crates depend on each other by path and version
//! (`clrprof = { path = "clrprof", version = "0.1.0" }`). `cargo package`
//! rewrites such a dependency to the version alone and resolves it in the
//! registry, where a version not published yet (or any version, without
//! network) is missing. Each run therefore patches crates.io with the
//! workspace's own crates (`--config patch.crates-io.NAME.path=...`), so a
//! packaged crate resolves its siblings to the sources being packaged with
//! it, and runs `--offline`: packaging needs nothing the workspace's own
//! build has not fetched, and this repository is also tested with a
//! vendored registry that replaces crates.io (hence `--registry crates-io`,
//! which cargo requires to package under a source replacement).
//!
//! What a run checks: every manifest is complete for crates.io (description,
//! license, repository, a README that exists, keywords, categories,
//! `[package.metadata.docs.rs]`: [`check_manifest`]), every file the crate
//! names is packaged, and the dependencies resolve. With `--verify`, cargo
//! also builds each packaged crate from its `.crate` file alone (which
//! catches a source file the package leaves out; a sibling it depends on is
//! still the patched workspace copy, whose own package is verified in the
//! same run). That builds every dependency once more in `target/package`
//! (about a minute here after the first time), so `cargo xtask test` runs it
//! without `--verify`, after the workspace build has compiled the same
//! sources.

use std::path::Path;
use std::process::Command;

/// The crates published to crates.io, dependencies first. A workspace
/// member missing here must say `publish = false` (a unit test checks).
pub const PUBLISHED: &[&str] = &[
    "clrprof-sys",
    "clrprof-macros",
    "clrprof",
    "clrprof-instrumentation",
    "clrprof-sampler",
    "clrprof-mux",
    "clrprof-testing",
    "clrprof-cli",
];

pub fn main(args: &[String]) -> crate::Result {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: cargo xtask package [--verify]\n\n\
             Checks each publishable crate's manifest and runs `cargo package` on all of them\n\
             (offline, the workspace's crates patched in for each other). --verify also builds\n\
             each package from its .crate file."
        );
        return Ok(());
    }
    let mut verify = false;
    for a in args {
        match a.as_str() {
            "--verify" => verify = true,
            other => return Err(format!("package: unknown argument `{other}`").into()),
        }
    }
    run(&crate::workspace::root(), verify)
}

/// Checks the manifests, then packages every crate of [`PUBLISHED`] in one
/// `cargo package` run; the error names each crate that does not package.
pub fn run(root: &Path, verify: bool) -> crate::Result {
    let mut problems = Vec::new();
    for krate in PUBLISHED {
        let dir = root.join(krate);
        match std::fs::read_to_string(dir.join("Cargo.toml")) {
            Ok(manifest) => problems.extend(
                check_manifest(&manifest, &|f| dir.join(f).is_file())
                    .into_iter()
                    .map(|p| format!("{krate}: {p}")),
            ),
            Err(e) => problems.push(format!("{krate}: Cargo.toml: {e}")),
        }
    }
    if !problems.is_empty() {
        return Err(format!("package: manifests:\n  {}", problems.join("\n  ")).into());
    }
    let args = package_args(verify);
    println!("$ cargo {}", args.join(" "));
    let output = Command::new(clrprof_testing::build::cargo())
        .args(&args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("package: cannot run cargo: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{}", without_patch_noise(&stderr));
    if output.status.success() {
        Ok(())
    } else {
        let failed: Vec<&str> = PUBLISHED
            .iter()
            .copied()
            .filter(|k| !packaged(&stderr, k))
            .collect();
        Err(format!(
            "package: `cargo package` failed ({}); not packaged: {}",
            output.status,
            failed.join(", ")
        )
        .into())
    }
}

/// The arguments of the one `cargo package` run.
fn package_args(verify: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "package",
        "--offline",
        "--allow-dirty",
        "--registry",
        "crates-io",
    ]
    .map(String::from)
    .to_vec();
    if !verify {
        args.push("--no-verify".into());
    }
    for krate in PUBLISHED {
        args.push("--config".into());
        args.push(format!("patch.crates-io.{krate}.path=\"{krate}\""));
    }
    for krate in PUBLISHED {
        args.push("-p".into());
        args.push((*krate).into());
    }
    args
}

/// cargo's output without its warnings about patches that a packaged
/// crate does not use (each crate uses only its own siblings' patches).
fn without_patch_noise(stderr: &str) -> String {
    let mut out = String::new();
    let mut in_warning = false;
    for line in stderr.lines() {
        if line.starts_with("warning: patch `")
            || line.starts_with("help: Check that the patched package")
        {
            in_warning = true;
            continue;
        }
        // The warning's continuation: its help text, and while verifying
        // `|` and `= help: perhaps you meant` with the packaged copy's path.
        let continued =
            line.starts_with("      ") || line.starts_with("  |") || line.starts_with("  = ");
        if in_warning && continued {
            continue;
        }
        in_warning = false;
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether cargo's output says `krate` was packaged (`Packaging NAME vX`
/// followed by `Packaged N files`).
fn packaged(stderr: &str, krate: &str) -> bool {
    let start = format!("Packaging {krate} v");
    let mut lines = stderr.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line.starts_with(&start) {
            return lines
                .find(|l| l.starts_with("Packaged") || l.starts_with("Packaging"))
                .is_some_and(|l| l.starts_with("Packaged"));
        }
    }
    false
}

/// What crates.io and docs.rs need of a manifest that `cargo package` does
/// not itself insist on: each missing piece, described. `exists` says
/// whether a file (relative to the manifest) exists.
pub fn check_manifest(manifest: &str, exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let doc: toml::Table = match manifest.parse() {
        Ok(t) => t,
        Err(e) => return vec![format!("Cargo.toml does not parse: {e}")],
    };
    let mut problems = Vec::new();
    let package = doc.get("package").and_then(|p| p.as_table());
    let Some(package) = package else {
        return vec!["no [package]".into()];
    };
    // `key.workspace = true` inherits from [workspace.package], which has
    // license and repository.
    let has = |key: &str| package.contains_key(key);
    for key in ["description", "license", "repository"] {
        if !has(key) {
            problems.push(format!("no `{key}`"));
        }
    }
    match package.get("readme").and_then(|r| r.as_str()) {
        Some(readme) if readme.starts_with("..") => problems.push(format!(
            "readme `{readme}` is outside the crate: give the crate a README.md of its own"
        )),
        Some(readme) if !exists(readme) => {
            problems.push(format!("readme `{readme}` does not exist"))
        }
        Some(_) => {}
        None if exists("README.md") => {}
        None => problems.push("no README.md".into()),
    }
    for key in ["keywords", "categories"] {
        let n = package
            .get(key)
            .and_then(|k| k.as_array())
            .map_or(0, |a| a.len());
        if n == 0 {
            problems.push(format!("no `{key}`"));
        }
    }
    let docs_rs = package
        .get("metadata")
        .and_then(|m| m.get("docs"))
        .and_then(|d| d.get("rs"));
    if docs_rs.is_none() {
        problems.push("no [package.metadata.docs.rs]".into());
    }
    if package.get("publish").and_then(|p| p.as_bool()) == Some(false) {
        problems.push("`publish = false`".into());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_published_crate_has_a_complete_manifest() {
        let root = crate::workspace::root();
        let mut problems = Vec::new();
        for krate in PUBLISHED {
            let dir = root.join(krate);
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            for p in check_manifest(&manifest, &|f| dir.join(f).is_file()) {
                problems.push(format!("{krate}: {p}"));
            }
            // A README is for people: more than a title.
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
            if readme.lines().filter(|l| !l.trim().is_empty()).count() < 5 {
                problems.push(format!("{krate}: README.md has almost nothing in it"));
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// Every workspace member is either published (in [`PUBLISHED`]) or
    /// says `publish = false`, so a new crate is not forgotten.
    #[test]
    fn every_member_is_published_or_says_it_is_not() {
        let root = crate::workspace::root();
        let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let members = workspace["workspace"]["members"].as_array().unwrap();
        let mut unlisted = Vec::new();
        for member in members.iter().filter_map(|m| m.as_str()) {
            let manifest: toml::Table =
                std::fs::read_to_string(root.join(member).join("Cargo.toml"))
                    .unwrap()
                    .parse()
                    .unwrap();
            let package = manifest["package"].as_table().unwrap();
            let name = package["name"].as_str().unwrap();
            let unpublished = package.get("publish").and_then(|p| p.as_bool()) == Some(false);
            if PUBLISHED.contains(&name) == unpublished {
                unlisted.push(format!("{member} ({name})"));
            }
        }
        assert!(
            unlisted.is_empty(),
            "list these in package::PUBLISHED or give them `publish = false`: {unlisted:?}"
        );
    }

    #[test]
    fn a_crate_without_its_readme_is_reported() {
        let manifest = "[package]\nname = \"x\"\ndescription = \"d\"\nlicense = \"MIT\"\n\
                        repository = \"r\"\nreadme = \"README.md\"\nkeywords = [\"a\"]\n\
                        categories = [\"b\"]\n[package.metadata.docs.rs]\ntargets = []\n";
        assert_eq!(check_manifest(manifest, &|_| true), Vec::<String>::new());
        assert_eq!(
            check_manifest(manifest, &|_| false),
            vec!["readme `README.md` does not exist".to_string()]
        );
        let shared = manifest.replace("readme = \"README.md\"", "readme = \"../README.md\"");
        assert_eq!(check_manifest(&shared, &|_| true).len(), 1);
        let bare = "[package]\nname = \"x\"\n";
        assert_eq!(check_manifest(bare, &|_| false).len(), 7);
    }

    #[test]
    fn packaged_reads_cargos_lines() {
        let out = "   Packaging a v0.1.0 (/w/a)\n    Packaged 6 files, 12KiB\n   \
                   Packaging b v0.1.0 (/w/b)\nerror: failed to prepare local package\n";
        assert!(packaged(out, "a"));
        assert!(!packaged(out, "b"));
        assert!(!packaged(out, "c"));
    }

    #[test]
    fn the_unused_patch_warnings_are_left_out() {
        let out = "   Packaging a v0.1.0 (/w/a)\n\
                   warning: patch `b v0.1.0 (/w/b)` was not used in the crate graph\n\
                   help: Check that the patched package version and available features are compatible\n      \
                   with the dependency requirements.\n    \
                   Packaged 6 files, 12KiB\n   \
                   Verifying a v0.1.0 (/w/a)\n\
                   warning: patch `a v0.1.0 (/w/a)` was not used in the crate graph\n  \
                   |\n  \
                   = help: perhaps you meant one of the following:\n          \
                   \t/w/target/package/a-0.1.0\n    \
                   Finished `dev` profile\n";
        assert_eq!(
            without_patch_noise(out),
            "   Packaging a v0.1.0 (/w/a)\n    Packaged 6 files, 12KiB\n   \
             Verifying a v0.1.0 (/w/a)\n    Finished `dev` profile\n"
        );
    }

    #[test]
    fn the_run_patches_every_sibling_and_packages_each() {
        let args = package_args(false);
        assert!(args.contains(&"--no-verify".to_string()));
        assert!(!package_args(true).contains(&"--no-verify".to_string()));
        for krate in PUBLISHED {
            assert!(args.contains(&format!("patch.crates-io.{krate}.path=\"{krate}\"")));
        }
        assert_eq!(args.iter().filter(|a| *a == "-p").count(), PUBLISHED.len());
    }
}
