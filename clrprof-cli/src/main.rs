//! The `clrprof` command line tool.
//!
//! * `clrprof run --profiler LIB [--clsid GUID] [--output PATH] -- CMD [ARGS...]`
//!   runs CMD with the profiler loaded at runtime startup;
//! * `clrprof clsid LIB` prints the CLSIDs a `#[profiler]` library declares;
//! * `clrprof runtimes` lists the runtime legs found and where.

mod launch;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
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
    /// Without WINEPREFIX set, Wine runs use the prefix `cargo xtask
    /// provision` prepared. Exits with CMD's status.
    Run {
        /// The profiler library (.so, or .dll for Windows runtimes under Wine).
        #[arg(long)]
        profiler: PathBuf,
        /// CLSID of the profiler class; default: the one marked in LIB.
        #[arg(long)]
        clsid: Option<String>,
        /// File the profiler writes its JSON Lines records to (CLRPROF_OUTPUT).
        #[arg(long)]
        output: Option<PathBuf>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Print the CLSIDs of a library built with #[profiler], one per line,
    /// read from the file without loading it.
    Clsid {
        /// The profiler library (.so or .dll).
        library: PathBuf,
    },
    /// List the runtime legs found (runtime manifest, $CLRPROF_RUNTIMES, installed dotnet).
    Runtimes,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            profiler,
            clsid,
            output,
            command,
        } => launch::run(&profiler, clsid.as_deref(), output.as_deref(), &command),
        Command::Clsid { library } => clsid(&library),
        Command::Runtimes => runtimes(),
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

fn runtimes() -> Result<ExitCode, clrprof_testing::Error> {
    let found = clrprof_testing::discover();
    if found.sources.is_empty() {
        println!("no runtimes found");
    } else {
        println!("runtimes from: {}", found.sources.join(", "));
    }
    for leg in &found.legs {
        let os = match leg.os {
            clrprof_testing::Os::Linux => "linux",
            clrprof_testing::Os::Windows => "windows (Wine)",
        };
        println!(
            "{:<15} {:<8} {:<15} {}",
            leg.name,
            leg.version,
            os,
            leg.host.display()
        );
    }
    for missing in &found.missing {
        println!("{:<15} missing: {}", missing.name, missing.reason);
    }
    Ok(ExitCode::SUCCESS)
}
