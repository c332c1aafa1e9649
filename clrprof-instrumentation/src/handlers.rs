//! [`ManagedHandlers`]: which load of the C# handler assembly the wrapped
//! bodies may call into (the rule is in the type's docs).

use clrprof::error::{Error, Result};
use clrprof::ids::{ModuleId, RawModuleId};
use clrprof::info::{MetaDataOpen, ModuleFlags, ProfilerInfo, RuntimeHandle};
use clrprof::metadata::MetaDataImport;
use clrprof::stackwalk::{Walk, WalkOptions};
use clrprof_sys as sys;
use std::sync::Mutex;

/// Handlers written in C#: two static methods of a type in an assembly the
/// runtime loads as a startup hook (`DOTNET_STARTUP_HOOKS=<path to the
/// assembly>` or `=<its simple name>`, .NET Core 3.0+; the assembly also
/// has the hook's `StartupHook` class with `static void Initialize()`).
///
/// ```csharp
/// public static class Handlers {
///     // `args`: the declared arguments, boxed (`ref`/pointer ones null).
///     public static object OnEntry(string method, object[] args) { ... }
///     // `returnValue` boxed (null for void or after an exception); the
///     // result is what the method returns (ignored for void and after an
///     // exception, which goes on after the handler).
///     public static object OnExit(string method, object state, object returnValue, object exception) { ... }
/// }
/// ```
///
/// The layer refuses to wrap ([`Error::CannotWrap`], nothing installed,
/// never a `FileNotFoundException` in the application) until
/// [`module_loaded`](Self::module_loaded), called from `ModuleLoadFinished`,
/// has seen the handler assembly loaded by the runtime's startup hook code
/// into the default load context, where the wrapped methods of every load
/// context bind its name, with the expected version and the handler type.
/// The SDK walks the loading thread's stack for that: the profiler needs
/// [`EventMask::ENABLE_STACK_SNAPSHOT`](clrprof::EventMask::ENABLE_STACK_SNAPSHOT),
/// which the SDK asks for unless
/// [`Profiler::watch_unhandled_exceptions`](clrprof::Profiler::watch_unhandled_exceptions)
/// is `false`. A load into another context, a second load, or a profiler
/// attached after the load refuses every method, with the reason.
///
/// # The rule, and the runtime code it rests on
///
/// A body [`wrap_managed`](crate::wrap_managed) builds calls the handlers
/// through an AssemblyRef the layer adds to the wrapped method's module:
/// the runtime binds it by name in that module's load context when the
/// method is first compiled, and a name it cannot bind is a
/// `FileNotFoundException` in the application (review 36: the handler
/// assembly loaded only into a plugin `AssemblyLoadContext`, a method of the
/// default context wrapped, SIGABRT). The profiling API tells no load
/// context, so the layer accepts only a load whose context it can prove:
///
/// - **The default context, by the runtime's own startup hook code.** The
///   runtime runs the startup hooks (`DOTNET_STARTUP_HOOKS`, and the
///   diagnostic ones of .NET 8+) in `System.StartupHookProvider`
///   (System.Private.CoreLib), which loads each with
///   `AssemblyLoadContext.Default.LoadFromAssemblyPath` (a path) or
///   `LoadFromAssemblyName` (a simple name), before `Main`
///   (StartupHookProvider.cs, `CallStartupHook`, 3.0 to 11). The layer walks
///   the loading thread's stack in the module's `ModuleLoadFinished`
///   ([`ProfilerInfo::walk_current_thread`]) and accepts the load only when
///   a method of `System.StartupHookProvider` in CoreLib is on it and every
///   managed frame above it (towards the load) is a CoreLib method with a
///   metadata token: no application code (an `AssemblyLoadContext.Load`
///   override, a `Resolving` or `AssemblyResolve` handler, a hook's own
///   `Initialize`, a dynamic method) chose where the assembly went.
/// - **References from every context bind there.** The default context
///   binds a name to the assembly it has already loaded; a custom context
///   asks its own cache, then its `Load` override, then the default context
///   (customassemblybinder.cpp, `BindUsingAssemblyName`: "Lookup the
///   assembly within TPABinder" when `Load` returned none). The default
///   context is never collectible, so the assembly never unloads (the layer
///   also refuses a module the runtime reports as collectible or dynamic).
/// - **Only the first load.** A second module of the handler assembly's
///   name in the same runtime (another file, or the same file in another
///   context) may be what a custom context's cache or `Load` gives its
///   methods: from then on every method is refused. A first load that was
///   not the startup hook's refuses every method for good, even if a hook
///   loads the assembly later.
/// - **The handler type is there.** The accepted module must define the
///   public top-level type with `public static object OnEntry(string,
///   object[])` and `public static object OnExit(string, object, object,
///   object)`, else a `TypeLoadException` or `MissingMethodException`
///   would reach the application.
/// - **Per runtime.** Side-by-side runtimes have their own default
///   contexts: a load seen in one runtime serves that runtime's methods only.
///
/// One case stays outside what the SDK can see: a custom load context
/// whose `Load` override returns, for the handler assembly's name, an
/// assembly the SDK has not seen loaded yet (it loads while the wrapped
/// method is compiled). Give the handler assembly a name no application
/// uses.
pub struct ManagedHandlers {
    pub(super) assembly: String,
    pub(super) version: [u16; 4],
    pub(super) type_name: String,
    /// Per runtime (side-by-side runtimes load on their own): what the
    /// loads of the handler assembly showed.
    seen: Mutex<Vec<(RuntimeHandle, Seen)>>,
}

/// What a runtime's loads of the handler assembly showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Loaded by the runtime's startup hook code into the default context,
    /// with this version and the handler type.
    Accepted {
        module: RawModuleId,
        version: [u16; 4],
    },
    /// A load the handlers cannot serve from, and why (every method is
    /// refused with it).
    Refused { module: RawModuleId, why: String },
}

impl core::fmt::Debug for ManagedHandlers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ManagedHandlers")
            .field("assembly", &self.assembly)
            .field("version", &self.version)
            .field("type_name", &self.type_name)
            .finish_non_exhaustive()
    }
}

/// One managed frame of the loading thread, as the startup hook rule reads
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FrameFact {
    /// `Namespace.Type::Method`, or what stands for it.
    pub(super) name: String,
    /// A method with a metadata token of System.Private.CoreLib.
    pub(super) corelib: bool,
}

const STARTUP_HOOK_PROVIDER: &str = "System.StartupHookProvider::";

/// Whether the frames (leaf first) show a load made by the runtime's
/// startup hook code: a CoreLib `System.StartupHookProvider` method with
/// only CoreLib methods above it. `Err` says what loaded it instead.
pub(super) fn loaded_by_startup_hook(frames: &[FrameFact]) -> core::result::Result<(), String> {
    for frame in frames {
        if !frame.corelib {
            return Err(format!("it was loaded by `{}`", frame.name));
        }
        if frame.name.starts_with(STARTUP_HOOK_PROVIDER) {
            return Ok(());
        }
    }
    Err(if frames.is_empty() {
        "no managed code was on the loading thread's stack".to_string()
    } else {
        "it was loaded by the runtime's own code, not its startup hook code".to_string()
    })
}

impl ManagedHandlers {
    /// Handlers in `type_name` (`Namespace.Type`, a public top-level type)
    /// of assembly `assembly` (simple name) of `version`.
    pub fn new(assembly: &str, version: [u16; 4], type_name: &str) -> Self {
        ManagedHandlers {
            assembly: assembly.to_string(),
            version,
            type_name: type_name.to_string(),
            seen: Mutex::new(Vec::new()),
        }
    }

    // provenance: handlers-load-context
    /// Call from `ModuleLoadFinished` with the module just loaded: judges a
    /// module of the handler assembly (see the type's docs) and returns
    /// `true` when the handlers will serve from it. Any other module, and a
    /// call from anywhere but that module's `ModuleLoadFinished`, changes
    /// nothing and returns `false`, except that a call for a module of the
    /// handler assembly from elsewhere counts as a load the SDK could not
    /// judge (every method is refused).
    pub fn module_loaded(&self, info: &ProfilerInfo, module: ModuleId<'_>) -> bool {
        let Ok(md) = info.module_metadata(module, MetaDataOpen::Read) else {
            return false;
        };
        let Ok(props) = md.assembly_props() else {
            return false;
        };
        if props.name != self.assembly {
            return false;
        }
        let raw = module.to_raw();
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        let runtime = info.handle();
        if let Some((_, earlier)) = seen.iter_mut().find(|(r, _)| r.same_runtime(&runtime)) {
            return match earlier {
                Seen::Accepted { module, .. } if *module == raw => true,
                Seen::Refused { module, .. } if *module == raw => false,
                Seen::Accepted { .. } => {
                    *earlier = Seen::Refused {
                        module: raw,
                        why: format!(
                            "`{}` was loaded a second time (another file, or another load \
                             context) after the startup hook's load; a method of that \
                             context may bind its reference to that copy",
                            self.assembly
                        ),
                    };
                    false
                }
                // The first load decided.
                Seen::Refused { .. } => false,
            };
        }
        let verdict = match self.judge(info, module, &md) {
            Ok(()) => {
                let (a, b, c, d) = props.version;
                Seen::Accepted {
                    module: raw,
                    version: [a, b, c, d],
                }
            }
            Err(why) => Seen::Refused { module: raw, why },
        };
        let accepted = matches!(verdict, Seen::Accepted { .. });
        seen.push((runtime, verdict));
        accepted
    }

    /// Why the first module of the handler assembly's name cannot serve,
    /// if it cannot.
    fn judge(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        md: &MetaDataImport<'_>,
    ) -> core::result::Result<(), String> {
        let hook = "load it as a startup hook (DOTNET_STARTUP_HOOKS=<path to the assembly>), \
                    which the runtime loads into the default load context, where the \
                    wrapped methods of every load context bind it";
        if !info.in_load_of(module.to_raw()) {
            return Err(format!(
                "ManagedHandlers::module_loaded saw `{}` outside its ModuleLoadFinished, so the \
                 SDK could not see how it was loaded; call it from ModuleLoadFinished with the \
                 module just loaded",
                self.assembly
            ));
        }
        let flags = info
            .module_info2(module)
            .map_err(|e| format!("the SDK could not read the module's flags: {e}"))?
            .flags;
        if flags.intersects(ModuleFlags::COLLECTIBLE | ModuleFlags::DYNAMIC) {
            return Err(format!(
                "`{}` is in a collectible or dynamic assembly, which no context but its own \
                 binds and which may unload; {hook}",
                self.assembly
            ));
        }
        let frames = loading_frames(info)?;
        loaded_by_startup_hook(&frames).map_err(|how| {
            format!(
                "the application loaded `{}` itself ({how}), into a load context the SDK \
                 cannot see; {hook}",
                self.assembly
            )
        })?;
        self.handler_type_problem(md).map_or(Ok(()), Err)
    }

    /// What is wrong with the handler type in the accepted module, if
    /// anything: the wrapped bodies call `OnEntry` and `OnExit` through a
    /// TypeRef by name and MemberRefs of these signatures.
    fn handler_type_problem(&self, md: &MetaDataImport<'_>) -> Option<String> {
        let (o, st, arr) = (
            sys::ELEMENT_TYPE_OBJECT as u8,
            sys::ELEMENT_TYPE_STRING as u8,
            sys::ELEMENT_TYPE_SZARRAY as u8,
        );
        let a = &self.assembly;
        let t = &self.type_name;
        let td = match md.find_type_def(t, None) {
            Ok(Some(td)) => td,
            Ok(None) => return Some(format!("`{a}` defines no top-level type `{t}`")),
            Err(e) => return Some(format!("the SDK could not look `{t}` up in `{a}`: {e}")),
        };
        match md.type_def_props(td) {
            Ok(p) if p.flags & sys::tdVisibilityMask != sys::tdPublic => {
                return Some(format!("`{t}` is not public in `{a}`"))
            }
            Ok(p) if p.flags & sys::tdClassSemanticsMask == sys::tdInterface => {
                return Some(format!("`{t}` is an interface in `{a}`"))
            }
            Ok(_) => {}
            Err(e) => return Some(format!("the SDK could not read `{t}` in `{a}`: {e}")),
        }
        let methods: [(&str, &[u8], &str); 2] = [
            (
                "OnEntry",
                &[0x00, 2, o, st, arr, o],
                "public static object OnEntry(string, object[])",
            ),
            (
                "OnExit",
                &[0x00, 4, o, st, o, o, o],
                "public static object OnExit(string, object, object, object)",
            ),
        ];
        for (name, sig, shape) in methods {
            let public_static = md.find_method(td, name, sig).ok().flatten().and_then(|m| {
                let p = md.method_props(m).ok()?;
                (p.attributes & sys::mdMemberAccessMask == sys::mdPublic
                    && p.attributes & sys::mdStatic != 0)
                    .then_some(())
            });
            if public_static.is_none() {
                return Some(format!("`{t}` in `{a}` has no `{shape}`"));
            }
        }
        None
    }

    /// `Ok` when this runtime's load of the handler assembly serves, with
    /// the expected version.
    pub(super) fn check(&self, info: &ProfilerInfo, method: &str) -> Result<()> {
        let cannot = |why: String| Error::CannotWrap {
            method: method.to_string(),
            why,
        };
        // reentrancy: none: `cannot` only builds an error
        let seen = self
            .seen
            .lock()
            .map_err(|_| Error::Usage("the managed handlers' lock is poisoned".into()))?;
        let v = |v: [u16; 4]| format!("{}.{}.{}.{}", v[0], v[1], v[2], v[3]);
        let runtime = info.handle();
        match seen
            .iter()
            .find(|(r, _)| r.same_runtime(&runtime))
            .map(|(_, s)| s)
        {
            None => Err(cannot(format!(
                "the handler assembly `{}` is not loaded; load it before the application's \
                 code runs (DOTNET_STARTUP_HOOKS=<path to {}.dll>)",
                self.assembly, self.assembly
            ))),
            Some(Seen::Refused { why, .. }) => Err(cannot(why.clone())),
            Some(Seen::Accepted { version, .. }) if *version != self.version => {
                Err(cannot(format!(
                    "the application loaded `{}` {}, the handlers were built for {}",
                    self.assembly,
                    v(*version),
                    v(self.version)
                )))
            }
            Some(Seen::Accepted { .. }) => Ok(()),
        }
    }

    /// Records what a runtime's load showed (tests).
    #[cfg(test)]
    pub(super) fn note(&self, runtime: &RuntimeHandle, seen: Seen) {
        if let Ok(mut s) = self.seen.lock() {
            s.push((runtime.clone(), seen));
        }
    }
}

/// The loading thread's managed frames, leaf first, up to the first one
/// that decides the rule (a frame not of CoreLib, or of the startup hook
/// code): a synchronous walk from `ModuleLoadFinished`, which runs on the
/// loading thread.
fn loading_frames(info: &ProfilerInfo) -> core::result::Result<Vec<FrameFact>, String> {
    let mut frames = Vec::new();
    // Modules already classified (a stack holds a handful).
    let mut corelib: Vec<(RawModuleId, bool)> = Vec::new();
    let walked = info.walk_current_thread(WalkOptions::default(), |frame| {
        let Some(function) = frame.function else {
            // A run of the runtime's own native frames.
            return Walk::Continue;
        };
        let name = info
            .function_name(function)
            .unwrap_or_else(|_| format!("function {:#x}", function.as_sys()));
        let is_corelib = info.function_info(function).is_ok_and(|fi| {
            // A dynamic method (LCG) has no token: never taken for CoreLib's code.
            if fi.token.rid() == 0 {
                return false;
            }
            let raw = fi.module.to_raw();
            match corelib.iter().find(|(m, _)| *m == raw) {
                Some((_, c)) => *c,
                None => {
                    let c = info
                        .module_metadata(fi.module, MetaDataOpen::Read)
                        .and_then(|md| md.assembly_props())
                        .is_ok_and(|a| a.name == "System.Private.CoreLib");
                    corelib.push((raw, c));
                    c
                }
            }
        });
        let decided = !is_corelib || name.starts_with(STARTUP_HOOK_PROVIDER);
        frames.push(FrameFact {
            name,
            corelib: is_corelib,
        });
        if decided {
            Walk::Stop
        } else {
            Walk::Continue
        }
    });
    match walked {
        Ok(_) => Ok(frames),
        Err(e) => Err(format!(
            "the SDK could not walk the loading thread's stack to see how the handler assembly \
             was loaded ({e}); the profiler needs EventMask::ENABLE_STACK_SNAPSHOT, which the SDK \
             sets unless Profiler::watch_unhandled_exceptions returns false"
        )),
    }
}
