//! Side-by-side runtimes: a native host that runs managed apps in several
//! CoreCLR runtimes loaded into one process (Linux).
//!
//! [`host_main`] is the whole program; the test crate wraps it in a tiny
//! binary (`clrprof-sxs-host`) so tests can run it as a process:
//!
//! ```text
//! clrprof-sxs-host [--concurrent] FRAMEWORK_DIR APP.dll [FRAMEWORK_DIR APP.dll ...]
//! ```
//!
//! Each `FRAMEWORK_DIR` is a shared-framework folder
//! (`.../shared/Microsoft.NETCore.App/<version>/`). Its `libcoreclr.so` is
//! loaded with `RTLD_LOCAL`, initialised with the folder's assemblies as the
//! trusted platform assemblies and the app's folder as `APP_PATHS`, and runs
//! the app — one runtime after the other, or each on its own thread with
//! `--concurrent` (the runtimes still initialise one at a time: two
//! CoreCLRs starting at once in one process fail without any profiler). The profiling environment (`CORECLR_*`) applies to every
//! runtime. Prints `exit <dir> <code>` per runtime to stderr; exits 0 when
//! every app returned 0.

#[cfg(target_os = "linux")]
mod host {
    //! The Linux implementation.
    use std::ffi::{c_char, c_int, c_uint, c_void, CString};
    use std::path::{Path, PathBuf};

    type Initialize = unsafe extern "C" fn(
        exe_path: *const c_char,
        app_domain: *const c_char,
        property_count: c_int,
        keys: *const *const c_char,
        values: *const *const c_char,
        host_handle: *mut *mut c_void,
        domain_id: *mut c_uint,
    ) -> c_int;
    type Shutdown = unsafe extern "C" fn(
        host_handle: *mut c_void,
        domain_id: c_uint,
        latched_exit_code: *mut c_int,
    ) -> c_int;
    type ExecuteAssembly = unsafe extern "C" fn(
        host_handle: *mut c_void,
        domain_id: c_uint,
        argc: c_int,
        argv: *const *const c_char,
        assembly: *const c_char,
        exit_code: *mut c_uint,
    ) -> c_int;

    fn cstring(s: &str) -> Result<CString, String> {
        CString::new(s).map_err(|_| format!("{s:?} contains a NUL byte"))
    }

    /// A runtime that ran its app and still has to be shut down.
    pub struct Loaded {
        shutdown: Shutdown,
        handle: usize,
        domain_id: c_uint,
    }

    impl Loaded {
        /// `coreclr_shutdown_2`: the runtime calls the profiler's `Shutdown`.
        pub fn shutdown(self) -> Result<(), String> {
            let mut latched: c_int = 0;
            // SAFETY: handle and domain come from a successful initialize.
            let hr = unsafe {
                (self.shutdown)(self.handle as *mut c_void, self.domain_id, &mut latched)
            };
            if hr < 0 {
                return Err(format!("coreclr_shutdown_2 failed: {:#010x}", hr as u32));
            }
            Ok(())
        }
    }

    /// Loads the runtime of `framework`, runs `app` in it, returns the app's
    /// exit code and the runtime, to be shut down once every app has run.
    /// Held while a runtime initialises (see `run_one`).
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub fn run_one(framework: &Path, app: &Path) -> Result<(u32, Loaded), String> {
        let lib = framework.join("libcoreclr.so");
        // SAFETY: loading the runtime library runs its initialisers, which is
        // what hosting it means; RTLD_LOCAL keeps its symbols from clashing
        // with the other runtime's.
        let library = unsafe {
            libloading::os::unix::Library::open(Some(&lib), libc::RTLD_NOW | libc::RTLD_LOCAL)
        }
        .map_err(|e| format!("cannot load {}: {e}", lib.display()))?;
        // SAFETY: the exported hosting API of libcoreclr has these signatures.
        let (initialize, execute, shutdown) = unsafe {
            let i: libloading::os::unix::Symbol<Initialize> = library
                .get(b"coreclr_initialize\0")
                .map_err(|e| e.to_string())?;
            let x: libloading::os::unix::Symbol<ExecuteAssembly> = library
                .get(b"coreclr_execute_assembly\0")
                .map_err(|e| e.to_string())?;
            let s: libloading::os::unix::Symbol<Shutdown> = library
                .get(b"coreclr_shutdown_2\0")
                .map_err(|e| e.to_string())?;
            (*i, *x, *s)
        };
        let mut tpa: Vec<String> = std::fs::read_dir(framework)
            .map_err(|e| format!("{}: {e}", framework.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "dll"))
            .map(|p| p.display().to_string())
            .collect();
        tpa.sort();
        let app_dir = app.parent().unwrap_or(Path::new(".")).display().to_string();
        let keys = [
            cstring("TRUSTED_PLATFORM_ASSEMBLIES")?,
            cstring("APP_PATHS")?,
            cstring("NATIVE_DLL_SEARCH_DIRECTORIES")?,
        ];
        let values = [
            cstring(&tpa.join(":"))?,
            cstring(&app_dir)?,
            cstring(&framework.display().to_string())?,
        ];
        let key_ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
        let value_ptrs: Vec<*const c_char> = values.iter().map(|v| v.as_ptr()).collect();
        let exe = cstring(
            &std::env::current_exe()
                .map_err(|e| e.to_string())?
                .display()
                .to_string(),
        )?;
        let domain = cstring("clrprof-sxs")?;
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut domain_id: c_uint = 0;
        // One runtime starts at a time, also with `--concurrent` (the apps
        // still run at once): two CoreCLRs initialising at the same moment
        // in one process fail without any profiler (3.1's
        // `coreclr_initialize` returned E_FAIL beside 8.0's, 1 run in about
        // 50 under load, `CORECLR_ENABLE_PROFILING=0`).
        let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: all strings are NUL-terminated and outlive the call; the
        // arrays have `keys.len()` entries.
        let hr = unsafe {
            initialize(
                exe.as_ptr(),
                domain.as_ptr(),
                keys.len() as c_int,
                key_ptrs.as_ptr(),
                value_ptrs.as_ptr(),
                &mut handle,
                &mut domain_id,
            )
        };
        drop(_starting);
        if hr < 0 {
            return Err(format!(
                "coreclr_initialize of {} failed: {:#010x}",
                framework.display(),
                hr as u32
            ));
        }
        let assembly = cstring(&app.display().to_string())?;
        let mut exit: c_uint = 0;
        // SAFETY: handle and domain come from a successful initialize; no arguments.
        let hr = unsafe {
            execute(
                handle,
                domain_id,
                0,
                std::ptr::null(),
                assembly.as_ptr(),
                &mut exit,
            )
        };
        if hr < 0 {
            return Err(format!(
                "coreclr_execute_assembly in {} failed: {:#010x}",
                framework.display(),
                hr as u32
            ));
        }
        // The runtime stays loaded until the process exits (CoreCLR cannot be
        // unloaded); leak the handle on purpose.
        std::mem::forget(library);
        Ok((
            exit,
            Loaded {
                shutdown,
                handle: handle as usize,
                domain_id,
            },
        ))
    }

    pub fn main() -> i32 {
        let mut args: Vec<String> = std::env::args().skip(1).collect();
        let concurrent = args.first().is_some_and(|a| a == "--concurrent");
        if concurrent {
            args.remove(0);
        }
        if args.is_empty() || args.len() % 2 != 0 {
            eprintln!("usage: clrprof-sxs-host [--concurrent] FRAMEWORK_DIR APP.dll [FRAMEWORK_DIR APP.dll ...]");
            return 2;
        }
        let pairs: Vec<(PathBuf, PathBuf)> = args
            .chunks(2)
            .map(|c| (PathBuf::from(&c[0]), PathBuf::from(&c[1])))
            .collect();
        type Run = (PathBuf, Result<(u32, Loaded), String>);
        let results: Vec<Run> = if concurrent {
            let handles: Vec<_> = pairs
                .into_iter()
                .map(|(fw, app)| {
                    std::thread::spawn(move || {
                        let r = run_one(&fw, &app);
                        (fw, r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| (PathBuf::new(), Err("host thread panicked".into())))
                })
                .collect()
        } else {
            pairs
                .into_iter()
                .map(|(fw, app)| {
                    let r = run_one(&fw, &app);
                    (fw, r)
                })
                .collect()
        };
        let mut status = 0;
        let mut loaded = Vec::new();
        for (fw, r) in results {
            match r {
                Ok((code, runtime)) => {
                    eprintln!("exit {} {code}", fw.display());
                    if code != 0 {
                        status = 1;
                    }
                    loaded.push((fw, runtime));
                }
                Err(e) => {
                    eprintln!("error {}: {e}", fw.display());
                    status = 1;
                }
            }
        }
        for (fw, runtime) in loaded {
            if let Err(e) = runtime.shutdown() {
                eprintln!("error {}: {e}", fw.display());
                status = 1;
            }
        }
        status
    }
}

/// Runs the host with the process's arguments; returns the exit status.
pub fn host_main() -> i32 {
    #[cfg(target_os = "linux")]
    {
        host::main()
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("clrprof-sxs-host runs on Linux only");
        2
    }
}

/// The shared-framework folder of a leg (`<host dir>/shared/Microsoft.NETCore.App/<version>`).
pub fn framework_dir(leg: &crate::Leg) -> std::path::PathBuf {
    leg.host
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join("shared")
        .join("Microsoft.NETCore.App")
        .join(&leg.version)
}
