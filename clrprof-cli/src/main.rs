//! The `clrprof` command line tool.
//!
//! * `clrprof run [--runtime LEG] --profiler LIB [--clsid GUID] [--output PATH] -- CMD [ARGS...]`
//!   runs CMD with the profiler loaded at runtime startup; with several
//!   `--profiler`s (and `--output-dir DIR`), through the profiler multiplexer;
//! * `clrprof compile APP.cs --runtime LEG` compiles a C# program for a
//!   provisioned runtime, without a .NET SDK;
//! * `clrprof build-mux` builds the multiplexer into the crate's cache (for
//!   a CLI installed with `cargo install`);
//! * `clrprof attach --pid PID --profiler LIB [--clsid GUID] [--client-data STR] [--timeout-ms N]`
//!   loads a profiler into a running .NET (Core 3.0+) process;
//! * `clrprof clsid LIB` prints the CLSIDs a `#[profiler]` library declares;
//! * `clrprof heap --pid PID [-o OUT]` takes a heap snapshot (live objects by
//!   type) of a running .NET process: attaches the example sampler, which
//!   snapshots and detaches;
//! * `clrprof flamegraph PROFILE -o OUT.svg` renders a profile (folded, speedscope, pprof or a heap snapshot) as a flame graph;
//! * `clrprof convert IN -o OUT [--to folded|speedscope|pprof]` converts between those formats;
//! * `clrprof runtimes` lists the runtime legs found and where;
//! * `clrprof provision [--cache DIR] [--strict] [--toolchains]` installs every
//!   runtime leg of the manifest (`clrprof_testing::runtime_pack::LEG_PACKS`),
//!   a C# compiler, Wine's prefix and pythonnet into the current crate's
//!   `target/clrprof-cache`: the same provisioning as this repository's
//!   `cargo xtask provision`;
//! * `clrprof doctor [--profiler LIB] [--runtime LEG] [-- CMD ...]` explains why a profiler does not load;
//! * `clrprof new NAME` scaffolds a profiler crate with a real-runtime test.

mod attach;
mod build_mux;
mod checks;
mod compile;
mod convert;
mod doctor;
mod flamegraph;
mod heap;
mod launch;
mod new;
mod runtime;
mod trace_context;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Run, inspect and test CLR profilers built with clrprof.
#[derive(Parser)]
#[command(name = "clrprof", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command with a profiler loaded at runtime startup.
    ///
    /// Sets CORECLR_ENABLE_PROFILING=1, CORECLR_PROFILER and
    /// CORECLR_PROFILER_PATH (absolute; a Z:\ path when CMD runs under Wine,
    /// i.e. CMD is a .exe or Wine itself) and, with --output, CLRPROF_OUTPUT.
    /// With several --profiler options the runtime loads the profiler
    /// multiplexer (clrprof-mux), which loads them all, each seeing what it
    /// would see alone; with --output-dir DIR each writes
    /// DIR/<library file stem>.jsonl. With --runtime, CMD (`app.dll ARGS` or
    /// `dotnet app.dll ARGS`) runs on a runtime `clrprof runtimes` lists.
    /// Before starting, it refuses a library the runtime would not load (the
    /// checks of `clrprof doctor`: format, architecture, export, CLSID) and
    /// an output it cannot write. Without WINEPREFIX set, Wine runs use the
    /// prefix `clrprof provision` prepared. Exits with CMD's status.
    Run {
        /// The profiler library (.so, or .dll for Windows runtimes under
        /// Wine); `LIB={CLSID}` picks a class of a library with several.
        /// Repeat to run several profilers at once.
        #[arg(long, required = true)]
        profiler: Vec<PathBuf>,
        /// CLSID of the profiler class (one profiler); default: the one marked in LIB.
        #[arg(long)]
        clsid: Option<String>,
        /// File the profiler writes its JSON Lines records to (CLRPROF_OUTPUT;
        /// one profiler), created empty first; its directory must exist.
        #[arg(long, conflicts_with = "output_dir")]
        output: Option<PathBuf>,
        /// Directory (created if missing) where each profiler writes
        /// DIR/<library file stem>.jsonl (its own CLRPROF_OUTPUT) and the
        /// multiplexer DIR/clrprof-mux.jsonl (CLRPROF_MUX_OUTPUT), each
        /// created empty first.
        #[arg(long)]
        output_dir: Option<PathBuf>,
        /// The runtime to run CMD on: a leg (`linux-x64-10.0`) or a version
        /// (`10.0`) of those `clrprof runtimes` lists, e.g. the ones
        /// `clrprof provision` installed into this crate. CMD is then
        /// `app.dll ARGS` or `dotnet app.dll ARGS`.
        #[arg(long, value_name = "LEG|VERSION")]
        runtime: Option<String>,
        /// A variable for one profiler only, N:NAME=VALUE (N counts the
        /// --profiler options from 1); repeatable.
        #[arg(long = "profiler-env", value_name = "N:NAME=VALUE")]
        profiler_env: Vec<String>,
        /// The multiplexer library (default: $CLRPROF_MUX_LIBRARY, or
        /// libclrprof_mux.so / clrprof_mux.dll next to a profiler, in the
        /// crate's target/clrprof-cache/mux (`clrprof build-mux`), or next to clrprof).
        #[arg(long)]
        mux: Option<PathBuf>,
        /// Label samples with the trace context (.NET 7+): load the SDK's
        /// startup hook, which follows Activity.Current into the first
        /// profiler's per-thread records (DOTNET_STARTUP_HOOKS,
        /// CLRPROF_CONTEXT_LIBRARY); compiled on first use with the
        /// compiler `clrprof provision` brought.
        #[arg(long)]
        trace_context: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Attach a profiler to a running .NET process (diagnostics IPC).
    ///
    /// Exits 0 when the runtime accepted the profiler (its
    /// InitializeForAttach succeeded); otherwise prints one line saying why
    /// and exits 1. With CLRPROF_OUTPUT set, `output=<its absolute path>` is
    /// added to the client data unless it names an output already.
    Attach {
        /// The target's process id.
        #[arg(long)]
        pid: u32,
        /// The profiler library (absolute path as the target sees it).
        #[arg(long)]
        profiler: PathBuf,
        /// CLSID of the profiler class; default: the one marked in LIB.
        #[arg(long)]
        clsid: Option<String>,
        /// Client data handed to InitializeForAttach (e.g. "detach_after_ms=500").
        #[arg(long)]
        client_data: Option<String>,
        /// Attach timeout the runtime enforces, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Print the CLSIDs of a library built with #[profiler], one per line,
    /// read from the file without loading it.
    Clsid {
        /// The profiler library (.so or .dll).
        library: PathBuf,
    },
    /// Take a heap snapshot of a running .NET process: every live object
    /// counted by type (objects and bytes), sorted by bytes.
    ///
    /// Attaches the example sampler (diagnostics IPC, .NET Core 3.0+) with
    /// the client data heap_snapshot=PATH; it forces a full collection,
    /// counts the live objects (EnumerateGCHeapObjects on .NET 9+, the
    /// collection's ObjectReferences before, which turns concurrent GC off
    /// in the target from then on), writes the snapshot and detaches. Prints
    /// the text, or writes -o FILE as JSON, text or pprof (from --format or
    /// FILE's name: .json, .txt, .pb.gz); `clrprof convert` and
    /// `clrprof flamegraph` read the JSON.
    Heap {
        /// The target's process id.
        #[arg(long)]
        pid: u32,
        /// The sampler library (default: $CLRPROF_SAMPLER_LIBRARY, or
        /// libsampler.so / sampler.dll next to clrprof).
        #[arg(long)]
        profiler: Option<PathBuf>,
        /// The file to write (default: the text on stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// The output's format.
        #[arg(long, value_enum)]
        format: Option<heap::SnapshotFormat>,
        /// Attach timeout the runtime enforces, in milliseconds (the
        /// snapshot may take six times as long).
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Render a profile as an SVG flame graph: folded stacks (`root;...;leaf N`
    /// per line, e.g. the sampler example's output), speedscope JSON, pprof
    /// (`.pb.gz`) or a heap snapshot (`clrprof heap`'s JSON, by bytes per
    /// type), told apart by their content.
    Flamegraph {
        /// The profile file: folded stacks, speedscope JSON or pprof.
        #[arg(value_name = "PROFILE")]
        profile: PathBuf,
        /// The SVG to write.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Title (default: the input's path).
        #[arg(long)]
        title: Option<String>,
    },
    /// Convert a profile between folded stacks, speedscope JSON and pprof.
    ///
    /// The input's format is told from its content; the output's from
    /// --to, or else OUT's name (`.pb.gz`/`.pb`/`.pprof`: pprof, `.json`:
    /// speedscope, anything else: folded). Folded stacks carry no threads,
    /// modules or times: those parts of a pprof file are lost in folded form.
    /// A heap snapshot (`clrprof heap`'s JSON) converts as one stack per type
    /// weighing its bytes, and to pprof as objects and bytes per type.
    Convert {
        /// The profile to read.
        input: PathBuf,
        /// The file to write.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// The output format.
        #[arg(long, value_enum)]
        to: Option<convert::Format>,
    },
    /// List the runtime legs found (runtime manifest, $CLRPROF_RUNTIME_MANIFEST, installed dotnet).
    Runtimes,
    /// Compile a one-file C# program for a runtime, without a .NET SDK:
    /// writes APP.dll and APP.runtimeconfig.json into --out (default: the
    /// current directory), with the C# compiler `clrprof provision` brought
    /// (Roslyn, against that runtime's reference assemblies).
    Compile {
        /// The C# source file.
        source: PathBuf,
        /// The runtime to compile for: a leg or a version `clrprof runtimes` lists.
        #[arg(long, value_name = "LEG|VERSION")]
        runtime: String,
        /// Directory for APP.dll and APP.runtimeconfig.json.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Allow `unsafe` code.
        #[arg(long = "unsafe")]
        allow_unsafe: bool,
    },
    /// Build the profiler multiplexer (needed to run several profilers at
    /// once) into the crate's target/clrprof-cache/mux, where `clrprof run`
    /// finds it: for a clrprof installed with `cargo install`, which
    /// installs no library. Builds clrprof-mux of this clrprof's version
    /// with cargo.
    BuildMux {
        /// The cache directory (default: $CLRPROF_CACHE, else the crate's target/clrprof-cache).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Build for this target, e.g. x86_64-pc-windows-gnu for Windows runtimes.
        #[arg(long)]
        target: Option<String>,
        /// Build the clrprof-mux of this local checkout instead of crates.io's.
        #[arg(long, value_name = "CLRPROF_CHECKOUT")]
        local: Option<PathBuf>,
        /// A debug build (faster to build; the default is a release build).
        #[arg(long)]
        debug: bool,
    },
    /// Install every runtime leg of clrprof's manifest into this crate's
    /// target/clrprof-cache (or $CLRPROF_CACHE), where `cargo test` finds
    /// them: linux-x64-3.1, linux-x64-8.0, linux-x64-9.0, linux-x64-10.0 and
    /// linux-x64-11.0, win-x64-8.0 and win-x64-10.0 (run under Wine, with its
    /// prefix), linux-arm64-10.0 (run under qemu), each from NuGet's official
    /// runtime pack, pinned and hash-checked; a C# compiler (Roslyn, with each
    /// version's reference assemblies) and pythonnet hosting linux-x64-10.0.
    /// A leg that cannot be provisioned is reported with the reason.
    /// Idempotent. Runtimes of an installed `dotnet` are legs too.
    Provision {
        /// The cache directory (default: $CLRPROF_CACHE, else the crate's target/clrprof-cache).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Fail when anything cannot be provisioned (default with CI=true).
        #[arg(long)]
        strict: bool,
        /// Also install the missing toolchains first (Debian packages
        /// wine64, mingw-w64, mono-mcs, python3-pip, ... through sudo, and
        /// rustup targets).
        #[arg(long)]
        toolchains: bool,
    },
    /// Explain why a profiler does not load: checks the loading variables,
    /// the library (format, architecture, exports, CLSID, dependencies) and,
    /// with a command, runs it with the host's trace and the SDK's log on.
    /// Exits 1 when it found an error.
    Doctor {
        /// The profiler library (default: the one the variables name).
        #[arg(long)]
        profiler: Option<PathBuf>,
        /// The runtime the profiler is for, as for `clrprof run` (default: the
        /// one CMD's host starts): which variables it reads depends on its version.
        #[arg(long, value_name = "LEG|VERSION")]
        runtime: Option<String>,
        /// A command to run with diagnostics on, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Create a profiler crate: a cdylib with a #[profiler] class under a
    /// fresh CLSID and a test that runs it inside every runtime found.
    New {
        /// The crate name (letters, digits, - and _).
        name: String,
        /// Directory to create (default: ./NAME).
        #[arg(long)]
        path: Option<PathBuf>,
        /// Depend on the clrprof crates of this local checkout instead of crates.io.
        #[arg(long, value_name = "CLRPROF_CHECKOUT")]
        local: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            profiler,
            clsid,
            output,
            output_dir,
            profiler_env,
            mux,
            runtime,
            trace_context,
            command,
        } => launch::run(
            &launch::Request {
                profilers: profiler,
                clsid,
                output,
                output_dir,
                profiler_env,
                mux,
                runtime,
                trace_context,
            },
            &command,
        ),
        Command::Attach {
            pid,
            profiler,
            clsid,
            client_data,
            timeout_ms,
        } => Ok(attach::run(
            pid,
            &profiler,
            clsid.as_deref(),
            client_data.as_deref(),
            timeout_ms,
        )),
        Command::Clsid { library } => clsid(&library),
        Command::Runtimes => runtimes(),
        Command::Provision {
            cache,
            strict,
            toolchains,
        } => provision(cache.as_deref(), strict, toolchains),
        Command::Heap {
            pid,
            profiler,
            output,
            format,
            timeout_ms,
        } => heap::run(
            pid,
            profiler.as_deref(),
            output.as_deref(),
            format,
            timeout_ms,
        ),
        Command::Flamegraph {
            profile,
            output,
            title,
        } => flamegraph::run(&profile, &output, title.as_deref()),
        Command::Convert { input, output, to } => convert::run(&input, &output, to),
        Command::Compile {
            source,
            runtime,
            out,
            allow_unsafe,
        } => compile::run(&source, &runtime, out.as_deref(), allow_unsafe),
        Command::BuildMux {
            cache,
            target,
            local,
            debug,
        } => build_mux::run(cache.as_deref(), target.as_deref(), local.as_deref(), debug),
        Command::Doctor {
            profiler,
            runtime,
            command,
        } => doctor::run(profiler.as_deref(), runtime.as_deref(), &command),
        Command::New { name, path, local } => new::run(&name, path.as_deref(), local.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("clrprof: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn clsid(library: &std::path::Path) -> Result<ExitCode, clrprof_testing::Error> {
    for clsid in clrprof_testing::clsid::clsids_in_file(library)? {
        println!("{clsid}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `clrprof provision`: `clrprof_testing::provision`, the code behind
/// `cargo xtask provision`, into the crate's target directory.
fn provision(
    cache: Option<&std::path::Path>,
    strict: bool,
    toolchains: bool,
) -> Result<ExitCode, clrprof_testing::Error> {
    let strict = strict || std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let dir = match cache {
        Some(c) => clrprof_testing::provision::cache_dir(Some(c), Path::new("target")),
        None => cache_for_crate()?,
    };
    let options = clrprof_testing::provision::Options { strict, toolchains };
    let manifest = clrprof_testing::provision::provision(&dir, &options)?;
    clrprof_testing::provision::print_manifest(&manifest);
    Ok(ExitCode::SUCCESS)
}

/// The clrprof cache of the crate around the current directory
/// (`$CLRPROF_CACHE`, else its `target/clrprof-cache`).
pub(crate) fn cache_for_crate() -> Result<PathBuf, clrprof_testing::Error> {
    let target = match clrprof_testing::build::workspace_root() {
        Ok(root) => root.join("target"),
        Err(e) if std::env::var_os("CLRPROF_CACHE").is_none() => {
            return Err(clrprof_testing::Error::new(format!(
                "run this inside your profiler crate, or pass --cache DIR ({e})"
            )))
        }
        Err(_) => PathBuf::from("target"),
    };
    Ok(clrprof_testing::provision::cache_dir(None, &target))
}

fn runtimes() -> Result<ExitCode, clrprof_testing::Error> {
    let found = clrprof_testing::discover();
    if found.sources.is_empty() {
        println!(
            "no runtimes found: no runtime manifest at {} and no `dotnet` on PATH; run \
             `clrprof provision` in your profiler crate and `clrprof runtimes` there (or set \
             CLRPROF_CACHE to that crate's target/clrprof-cache)",
            found
                .cache_dir()
                .join(clrprof_testing::manifest::MANIFEST_FILE)
                .display()
        );
    } else {
        println!("runtimes from: {}", found.sources.join(", "));
    }
    for leg in found.legs.iter().chain(found.hosted.iter()) {
        let os = match leg.os {
            clrprof_testing::Os::Linux if leg.is_emulated() => "linux (qemu)",
            clrprof_testing::Os::Linux => "linux",
            clrprof_testing::Os::Windows if leg.is_wine() => "windows (Wine)",
            clrprof_testing::Os::Windows => "windows",
        };
        println!(
            "{:<24} {:<8} {:<15} {}",
            leg.name,
            leg.version,
            os,
            leg.host.display()
        );
    }
    for missing in &found.missing {
        println!("{:<24} missing: {}", missing.name, missing.reason);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Each subcommand's help, as `clrprof SUB --help` prints it.
    fn help(sub: &str) -> String {
        let mut cli = Cli::command();
        let cmd = cli
            .find_subcommand_mut(sub)
            .unwrap_or_else(|| panic!("no subcommand {sub}"));
        cmd.render_long_help().to_string()
    }

    /// What each subcommand does today, as its help must say (every
    /// subcommand is listed: a new one needs its line here).
    const SAYS: &[(&str, &[&str])] = &[
        ("run", &["CORECLR_PROFILER", "multiplexer", "--output-dir"]),
        ("attach", &["diagnostics IPC", "InitializeForAttach"]),
        ("clsid", &["CLSID"]),
        (
            "heap",
            &[
                "snapshot",
                "Attaches",
                "detaches",
                "EnumerateGCHeapObjects",
                "ObjectReferences",
                ".pb.gz",
            ],
        ),
        (
            "flamegraph",
            &["folded", "speedscope", "pprof", "heap snapshot"],
        ),
        (
            "convert",
            &["folded", "speedscope", "pprof", "heap snapshot"],
        ),
        ("runtimes", &["manifest"]),
        ("compile", &["Roslyn"]),
        ("build-mux", &["multiplexer"]),
        (
            "provision",
            &["Wine", "qemu", "Roslyn", "pythonnet", "hash-checked"],
        ),
        ("doctor", &["does not load"]),
        ("new", &["cdylib", "CLSID"]),
    ];

    #[test]
    fn every_subcommands_help_says_what_it_does() {
        let listed: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|n| n != "help")
            .collect();
        let table: Vec<&str> = SAYS.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            listed, table,
            "every subcommand, in order, has its line in SAYS"
        );
        for (sub, phrases) in SAYS {
            let text = help(sub);
            for p in *phrases {
                assert!(
                    text.contains(p),
                    "`clrprof {sub} --help` does not say {p:?}:\n{text}"
                );
            }
        }
    }

    #[test]
    fn provision_help_names_every_leg_it_installs() {
        let text = help("provision");
        for leg in clrprof_testing::runtime_pack::LEG_PACKS {
            assert!(
                text.contains(leg.name),
                "provision --help does not name {}:\n{text}",
                leg.name
            );
        }
        assert!(text.contains(clrprof_testing::manifest::PYTHONNET_RUNTIME_LEG));
        // What it said before, and no longer does.
        assert!(!text.contains(".NET Core 3.1 and .NET 8"), "{text}");
    }
}
