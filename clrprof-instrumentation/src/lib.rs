//! Method wrapping: run handlers written in safe Rust at the entry and at
//! every exit of chosen managed methods, with their arguments and return
//! value, by rewriting their IL into a shape the SDK builds and verifies
//! (DESIGN.md decision 15: the safe way to change code).
//!
//! [`wrap`] reads a method's IL, signature and locals and builds a new body
//! (see `build.rs` for its exact shape): a prologue that calls the entry
//! handler and keeps what it returns, the original code inside a `try` whose
//! every `ret` stores the value and leaves to an epilogue that calls the exit
//! handler with that state and the return value (which it may replace), and
//! a `catch` of everything that calls the exit handler with the exception's
//! class ([`Exit::exception`]) when an exception leaves, and rethrows it. The original exception clauses stay, nested inside the new
//! one; tiny headers become fat; the locals signature gains the wrapper's
//! locals; max stack is recomputed; and the body must pass
//! [`il::verify`](clrprof::il::verify()) and a type check of every instruction
//! the layer added before it is handed out. Methods the
//! shape cannot keep are refused with [`Error::CannotWrap`] (`tail.` calls,
//! `jmp`, vararg methods, .NET 11 runtime-async methods), never built.
//!
//! An instance constructor of a reference type is wrapped *after* its call
//! to the base (or chained `this(...)`) constructor: field initializers and
//! that call run before the entry handler, which thus sees an initialized
//! `this`, and an exception thrown by the base constructor is no call of
//! the derived one (neither entry nor exit is reported). A constructor in
//! which that call cannot be found with an empty stack after it, made on
//! `this`, with no branch or exception region across it, is refused
//! ([`Error::CannotWrap`]). Constructors of value types and static
//! constructors have no such call and are wrapped whole.
//!
//! The body is a [`WrappedBody`], whose bytes only this module makes, so it
//! is installed from safe code: at `JITCompilationStarted`
//! ([`WrappedBody::install_at_jit`], with the IL map) or from
//! `GetReJITParameters` ([`WrappedBody::install_in_rejit`]) to switch a
//! wrapper on in a running process, and off with `RequestRevert`.
//!
//! ```no_run
//! use clrprof_instrumentation::{Entry, Exit, MethodHandler};
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! #[derive(Default)]
//! struct Count { calls: AtomicU64, threw: AtomicU64 }
//!
//! impl MethodHandler for Count {
//!     type State = ();
//!     fn on_entry(&self, _: &Entry<'_>) {
//!         self.calls.fetch_add(1, Ordering::Relaxed);
//!     }
//!     fn on_exit(&self, exit: &mut Exit<'_>, _: ()) {
//!         if exit.threw() {
//!             self.threw.fetch_add(1, Ordering::Relaxed);
//!         }
//!     }
//! }
//! ```
//!
//! The handlers run as unmanaged code called by the method (a `calli` to a
//! native address of this library, pinned while the process lives): they
//! may block, allocate and call the runtime like any profiler thread, and
//! a panic in one is caught, logged and counted (the call then goes on as if
//! unwrapped). What they see is limited by that: a garbage collection may
//! run meanwhile, so object references are not handed to them (see
//! [`Arguments::get`] and [`Thrown`]).

mod build;
mod handlers;
mod installs;
mod typecheck;
mod values;

pub use handlers::ManagedHandlers;
pub use values::{Arguments, Primitive, ReturnValue};

use clrprof::error::{Error, Result};
use clrprof::ids::{ClassId, FunctionId, MdMethodDef, MdToken, ModuleId, RawModuleId};
use clrprof::il::{recompute_max_stack, verify, MetaDataCallSites, MethodBody};
use clrprof::info::{IlMapEntry, ProfilerInfo, RuntimeHandle};
use clrprof::metadata_emit::{PrimitiveType, SigBuilder};
use clrprof::signature::{local_var_sig, return_type_bytes, MethodSig, TypeSig};
use clrprof_sys as sys;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What runs around a wrapped method. One handler may wrap many methods;
/// [`Entry::method`] and [`Exit::method`] say which one is running.
pub trait MethodHandler: Send + Sync + 'static {
    /// What the entry handler hands to the exit handler of the same call
    /// (CallTarget's state). `()` costs nothing; any other type is boxed
    /// for the duration of the call.
    type State: Send + 'static;

    /// Whether the injected prologue passes the arguments' addresses
    /// ([`Entry::arguments`]). Without it the prologue passes null and
    /// [`Arguments::get`] fails; with it every call builds a small table
    /// on the stack (`localloc`).
    const ARGUMENTS: bool = false;

    /// Runs on entry, before the original body.
    fn on_entry(&self, call: &Entry<'_>) -> Self::State;

    /// Runs on every way out of the method: after a `ret` (with the value,
    /// which [`ReturnValue::set`] may replace) or while an exception leaves
    /// it ([`Exit::threw`]).
    fn on_exit(&self, call: &mut Exit<'_>, state: Self::State);
}

/// A method a wrapper was built for: its name and signature as its module's
/// metadata gives them.
#[derive(Debug)]
pub struct WrappedMethod {
    name: String,
    module: RawModuleId,
    token: MdMethodDef,
    sig: MethodSig,
    /// `values::element_of` each parameter, and of the return type.
    elements: Box<[u8]>,
    ret_element: u8,
}

impl WrappedMethod {
    fn new(name: String, module: RawModuleId, token: MdMethodDef, sig: MethodSig) -> Self {
        WrappedMethod {
            elements: sig.params.iter().map(values::element_of).collect(),
            ret_element: values::element_of(&sig.ret),
            name,
            module,
            token,
            sig,
        }
    }

    /// `Namespace.Type::Method`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The module, as a raw ID (the wrapper may outlive the module).
    pub fn module(&self) -> RawModuleId {
        self.module
    }
    /// The method's definition token.
    pub fn token(&self) -> MdMethodDef {
        self.token
    }
    /// Its signature.
    pub fn signature(&self) -> &MethodSig {
        &self.sig
    }
}

/// The entry of a wrapped call.
pub struct Entry<'c> {
    method: &'c WrappedMethod,
    arguments: Arguments<'c>,
}

impl Entry<'_> {
    /// The method being called.
    pub fn method(&self) -> &WrappedMethod {
        self.method
    }
    /// Its arguments.
    pub fn arguments(&self) -> &Arguments<'_> {
        &self.arguments
    }
}

/// The exit of a wrapped call.
pub struct Exit<'c> {
    method: &'c WrappedMethod,
    threw: bool,
    exception: Option<Thrown<'c>>,
    value: ReturnValue<'c>,
}

/// The exception leaving a wrapped method, as its exit handler sees it:
/// its class, valid for the call.
///
/// The injected `catch` stores the exception in a `pinned` local and reads
/// its method-table pointer, its `ClassID`, in managed code, before calling
/// the exit probe (see `build.rs`: a blocking GC marks objects in that
/// pointer while threads in preemptive mode run, so it is not read from
/// the handler). The class cannot be unloaded during the call: its
/// instance is alive, held by that local. The object itself is not handed
/// out: the handler runs in preemptive mode, where a GC may run at any
/// time, and although the pinned exception stays in place, every reference
/// it holds (`Message`, `InnerException`, the stack trace) may move while
/// the handler reads it, so no [`ObjectId`](clrprof::ObjectId) of it or read
/// through it is sound here (the SDK only hands out `ObjectId`s in scopes
/// where no GC can run; see `inspect.rs`). `Message` is therefore not read;
/// an agent that needs it uses the C# handler shape
/// ([`wrap_managed`]), whose handler gets the exception object in managed
/// code.
#[derive(Clone, Copy)]
pub struct Thrown<'c> {
    class: ClassId<'c>,
    runtime: &'c RuntimeHandle,
}

impl<'c> Thrown<'c> {
    /// The exception's class (`ClassID`), valid for the call.
    pub fn class(&self) -> ClassId<'c> {
        self.class
    }

    /// The exception's type name, `Namespace.Type+Nested` (the generic
    /// definition's for an instantiation; `ICorProfilerInfo2::GetClassIDInfo2`
    /// and the module's metadata).
    ///
    /// The handler runs on a managed thread outside any callback, where the
    /// runtime refuses synchronous Info calls such as `GetModuleMetaData`
    /// (`CORPROF_E_UNSUPPORTED_CALL_SEQUENCE`: such a thread is "called
    /// asynchronously" unless it is inside a callback). So the name is read
    /// by a thread of the SDK's, which the runtime does not know, while this
    /// thread waits (keeping the exception, hence its class, alive).
    pub fn type_name(&self) -> Result<String> {
        namer::class_name(self.runtime, self.class)
    }
}

impl core::fmt::Debug for Thrown<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Thrown")
            .field("class", &self.class.to_raw())
            .finish()
    }
}

impl<'c> Exit<'c> {
    /// The method returning.
    pub fn method(&self) -> &WrappedMethod {
        self.method
    }
    /// `true` when the method is leaving by an exception (which continues
    /// after the handler), `false` after a `ret`.
    pub fn threw(&self) -> bool {
        self.threw
    }
    /// The exception leaving the method, if it is leaving by one. `None`
    /// too for a method of an assembly without
    /// `RuntimeCompatibility(WrapNonExceptionThrows = true)` (C# compilers
    /// emit it), whose catch clauses may get objects that are not
    /// exceptions (arrays included, whose method table is not their
    /// `ClassID` on every runtime): the class is not read there.
    pub fn exception(&self) -> Option<Thrown<'c>> {
        self.exception
    }
    /// The return value (absent after an exception or for `void`).
    pub fn return_value(&mut self) -> &mut ReturnValue<'c> {
        &mut self.value
    }
}

/// Class names for [`Thrown::type_name`], read on a thread the runtime does
/// not know.
mod namer {
    use super::*;
    use std::sync::mpsc::{channel, sync_channel, RecvTimeoutError, Sender, SyncSender};
    use std::sync::Mutex;

    type Request = (
        RuntimeHandle,
        clrprof::ids::RawClassId,
        SyncSender<Result<String>>,
    );

    /// The running thread's queue; `None` when no thread runs. Requests
    /// are sent while this is locked, and the thread clears it (under the
    /// lock) before it answers what is left and exits, so no request is
    /// left in a queue nobody reads.
    static NAMER: Mutex<Option<Sender<Request>>> = Mutex::new(None);

    /// How long the thread waits for a request before it exits: a detach
    /// then finds no SDK thread of the wrapper running.
    const IDLE: std::time::Duration = std::time::Duration::from_millis(200);

    fn answer((runtime, class, reply): Request) {
        // SAFETY: [wrapped-frame] the requesting handler's thread sent a ClassID it
        // got from the exit probe (the class of the exception its frame holds in a
        // pinned local) and blocks on `reply` until this answer: the instance, hence
        // its class, stays alive and loaded while the ID is used here.
        let class = unsafe { class.assume_valid() };
        // SAFETY: [id-scope] this is the SDK's class-name thread (started with
        // `clrprof::thread::spawn` in `start`), which opens no other scope; the
        // one ID passed through the scope is `class`, alive as said above.
        let info = unsafe { ProfilerInfo::sdk_thread_scope(&runtime) };
        let name = info.class_name(class);
        let _ = reply.send(name);
    }

    fn start() -> Option<Sender<Request>> {
        let (tx, rx) = channel::<Request>();
        let thread = clrprof::thread::spawn("clrprof-class-names", move || loop {
            match rx.recv_timeout(IDLE) {
                Ok(request) => answer(request),
                Err(RecvTimeoutError::Timeout) => {
                    *NAMER.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    // Sent before the slot was cleared: answer, then exit.
                    while let Ok(request) = rx.try_recv() {
                        answer(request);
                    }
                    return;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        });
        thread.ok().map(|_| tx)
    }

    pub(super) fn class_name(runtime: &RuntimeHandle, class: ClassId<'_>) -> Result<String> {
        let unavailable = || Error::Usage("the SDK's class-name thread is not running".into());
        let (reply, answer) = sync_channel(1);
        {
            // reentrancy: none: `unavailable` only builds an error; the namer thread is asked after the lock is released
            let mut slot = NAMER.lock().map_err(|_| unavailable())?;
            if slot.is_none() {
                *slot = start();
            }
            slot.as_ref()
                .ok_or_else(unavailable)?
                .send((runtime.clone(), class.to_raw(), reply))
                .map_err(|_| unavailable())?;
        }
        // Blocks until the thread has answered: `class` is used there only
        // while this frame, which keeps it valid, waits.
        answer.recv().map_err(|_| unavailable())?
    }

    /// Waits (at most 2 s) until the class-name thread has exited.
    #[cfg(test)]
    pub(crate) fn wait_until_stopped() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while NAMER.lock().unwrap_or_else(|p| p.into_inner()).is_some()
            || clrprof::thread::running_except_current()
                .iter()
                .any(|n| n == "clrprof-class-names")
        {
            if std::time::Instant::now() > deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// A handler as its wrapper keeps it (type-erased in [`Registered`]; the
/// probes, compiled per handler type, downcast it back).
struct Typed<H>(Arc<H>);

impl<H: MethodHandler> Typed<H> {
    fn enter(&self, call: &Entry<'_>) -> *mut () {
        Box::into_raw(Box::new(self.0.on_entry(call))).cast()
    }
    fn exit(&self, call: &mut Exit<'_>, state: *mut ()) {
        if state.is_null() {
            return; // the entry handler panicked
        }
        // SAFETY: [wrapped-frame] `state` is what `enter` of this same wrapper returned in
        // this frame: the injected prologue stores the entry probe's result in its own
        // local S, which nothing else writes, and exactly one of the epilogue (a normal
        // return) and the catch handler (an exception) runs per call, after the prologue,
        // and passes S here; they are the only code reading S. So it is a live
        // `Box<H::State>` that no one else owns.
        let state = unsafe { Box::from_raw(state.cast::<H::State>()) };
        self.0.on_exit(call, *state);
    }
}

/// One built wrapper: the method it was built for, its handler and the
/// runtime (for [`Thrown::type_name`]).
struct Registered {
    method: WrappedMethod,
    /// A `Typed<H>` (no handler for a managed-handler body).
    handler: Box<dyn core::any::Any + Send + Sync>,
    /// The concrete type of `handler`, taken from it when registered (so
    /// the probes compare it without a virtual call).
    handler_type: core::any::TypeId,
    runtime: RuntimeHandle,
}

impl Registered {
    fn new(
        method: WrappedMethod,
        handler: Box<dyn core::any::Any + Send + Sync>,
        runtime: RuntimeHandle,
    ) -> Self {
        let handler_type = (*handler).type_id();
        Registered {
            method,
            handler,
            handler_type,
            runtime,
        }
    }
}

/// Wrappers are numbered and kept in this table; the address of a table
/// entry is the constant the injected code passes to the probes (no lookup
/// per call). Entries are never removed or reused (a body the runtime
/// compiled may run until the process ends, and a rebuilt body gets a new
/// entry), so an address always finds the shape its code was built with.
const SEGMENT: usize = 4096;
const SEGMENTS: usize = 1024;
static TABLE: [OnceLock<Box<[OnceLock<Registered>]>>; SEGMENTS] =
    [const { OnceLock::new() }; SEGMENTS];
static NEXT: AtomicU32 = AtomicU32::new(0);
static PANICS: AtomicU64 = AtomicU64::new(0);

fn register(r: Registered) -> Result<(i32, &'static Registered)> {
    let id = NEXT.fetch_add(1, Ordering::Relaxed) as usize;
    let segment = TABLE
        .get(id / SEGMENT)
        .ok_or(Error::InvalidArgument("more than 4M wrappers built"))?;
    let slots = segment.get_or_init(|| (0..SEGMENT).map(|_| OnceLock::new()).collect());
    // A fresh number: the slot is empty.
    let slot = &slots[id % SEGMENT];
    let _ = slot.set(r);
    let registered = slot
        .get()
        .ok_or(Error::InvalidArgument("a wrapper slot taken twice"))?;
    let id =
        i32::try_from(id).map_err(|_| Error::InvalidArgument("more than 4M wrappers built"))?;
    Ok((id, registered))
}

/// The wrapper the injected code names by `address` (a constant it was
/// built with; null is ignored).
fn registered(address: *const Registered) -> Option<&'static Registered> {
    // SAFETY: [wrapped-frame] the only non-null addresses the probes receive are the
    // constants the layer compiled into the bodies it built (`Plan::handler`): the
    // address of a `Registered` in `TABLE`, a static whose entries are set once and never
    // removed or moved (segments are boxed slices that are never freed), so it is a live,
    // immutable `Registered` for the rest of the process.
    unsafe { address.as_ref() }
}

fn lookup(id: i32) -> Option<&'static Registered> {
    let id = usize::try_from(id).ok()?;
    TABLE.get(id / SEGMENT)?.get()?.get(id % SEGMENT)?.get()
}

/// How many handler calls panicked (each was caught at the probe).
pub fn handler_panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// The wrapper at `wrapper` and its handler, if it is a `Typed<H>`.
fn handler_of<H: MethodHandler>(
    wrapper: *const Registered,
) -> Option<(&'static Registered, &'static Typed<H>)> {
    let r = registered(wrapper)?;
    if r.handler_type != core::any::TypeId::of::<Typed<H>>() {
        return None;
    }
    let any: *const (dyn core::any::Any + Send + Sync) = &*r.handler;
    // SAFETY: [wrapped-frame] `handler_type` is the concrete type of this very box, taken
    // when the wrapper was registered (neither changes after), so the box holds a
    // `Typed<H>`, which lives as long as the table entry, for the rest of the process.
    Some((r, unsafe { &*any.cast::<Typed<H>>() }))
}

/// The entry probe the injected prologue calls (`calli` unmanaged
/// `int64(native int, native int)`): the wrapper's address and the argument
/// table. One per handler type (the handler's call is direct and inlined);
/// a wrapper of another type is ignored. Never unwinds.
extern "system" fn enter_probe<H: MethodHandler>(
    wrapper: *const Registered,
    arguments: *const *const u8,
) -> i64 {
    let Some((r, handler)) = handler_of::<H>(wrapper) else {
        return 0;
    };
    let entry = Entry {
        method: &r.method,
        arguments: Arguments {
            params: &r.method.sig.params,
            elements: &r.method.elements,
            has_this: r.method.sig.has_this(),
            table: arguments,
        },
    };
    match catch_unwind(AssertUnwindSafe(|| handler.enter(&entry))) {
        Ok(state) => state as i64,
        Err(_) => {
            PANICS.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "the entry handler of {} panicked; its exit handler is skipped for this call",
                r.method.name
            );
            0
        }
    }
}

/// The exit probe the injected epilogue and catch handler call (`calli`
/// unmanaged `void(native int, int64, native int, native int)`): the
/// wrapper's address, the entry's state, the return value's address (null
/// for `void` and after an exception) and the exception's class (null
/// after a `ret`). One per handler type, as the entry probe. Never unwinds.
extern "system" fn exit_probe<H: MethodHandler>(
    wrapper: *const Registered,
    state: i64,
    value: *mut u8,
    exception_class: usize,
) {
    let Some((r, handler)) = handler_of::<H>(wrapper) else {
        return;
    };
    let threw = exception_class != 0;
    // 1: an exception whose class the catch handler did not read.
    let exception = (exception_class > 1).then(|| Thrown {
        // SAFETY: [wrapped-frame] a non-null `exception_class` comes from the injected
        // catch handler, which read it from the method-table pointer of the caught
        // exception (an object of a class, never an array, so that pointer is its
        // TypeHandle, the ClassID GetClassFromObject returns) in managed code, where no GC
        // marks it; the object stays alive in the handler's pinned local until this call
        // returns, so its class stays loaded for the call, the lifetime given here.
        class: unsafe { clrprof::ids::RawClassId(exception_class).assume_valid() },
        runtime: &r.runtime,
    });
    let mut exit = Exit {
        method: &r.method,
        threw,
        exception,
        value: ReturnValue {
            ty: &r.method.sig.ret,
            element: r.method.ret_element,
            // After an exception the local holds no value of the method's.
            slot: if threw { core::ptr::null_mut() } else { value },
        },
    };
    if catch_unwind(AssertUnwindSafe(|| {
        handler.exit(&mut exit, state as usize as *mut ())
    }))
    .is_err()
    {
        PANICS.fetch_add(1, Ordering::Relaxed);
        log::warn!("the exit handler of {} panicked", r.method.name);
    }
}

/// A body built by [`wrap`]: only this module makes one, which is why
/// installing it is safe.
pub struct WrappedBody<'m> {
    module: ModuleId<'m>,
    token: MdMethodDef,
    id: i32,
    bytes: Vec<u8>,
    map: Vec<IlMapEntry>,
}

impl<'m> WrappedBody<'m> {
    /// The encoded body (header, code, exception sections).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The old-to-new IL offset map.
    pub fn map(&self) -> &[IlMapEntry] {
        &self.map
    }

    /// The method it wraps.
    pub fn method(&self) -> &'static WrappedMethod {
        match lookup(self.id) {
            Some(r) => &r.method,
            // `wrap` registered it before making this value.
            None => unreachable_registered(),
        }
    }

    // provenance: wrapped-body-method
    /// Installs the body from `JITCompilationStarted` of `function` (which
    /// must be the wrapped method) at the method's first compilation:
    /// `SetILFunctionBody` with a copy from the module's allocator, then
    /// `SetILInstrumentedCodeMap`. Every later compilation of the method
    /// (all its instantiations, tier 1, an on-stack replacement of a
    /// running loop) uses it; code already compiled does not. Fails with
    /// [`Error::WrongPartner`] for another function (its module and token,
    /// as `GetFunctionInfo` gives them, differ from the wrapped method's),
    /// before anything is installed.
    ///
    /// `JITCompilationStarted` comes for those later compilations too, and
    /// a method's IL is replaced only once, before the JIT compiled any of
    /// it: the installation is refused with [`Error::CannotWrap`], nothing
    /// installed, when a body of the method was installed before, when the
    /// JIT already compiled the method (this function or another
    /// instantiation of it; precompiled ReadyToRun code is not the JIT's),
    /// when it is not made from this function's `JITCompilationStarted` on
    /// its thread, and when the profiler cannot tell (it attached, or
    /// `MONITOR_JIT_COMPILATION` was not in its mask from `Initialize` on).
    /// An on-stack replacement continues a running frame at an IL offset
    /// of the body that frame was compiled from, so a body installed later
    /// would have the JIT refuse the method (`InvalidProgramException` in
    /// the application). A method that already runs is wrapped with ReJIT
    /// ([`install_in_rejit`](Self::install_in_rejit)).
    pub fn install_at_jit(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Result<()> {
        let fi = info.function_info(function)?;
        self.same_method(
            "instrumentation::WrappedBody::install_at_jit",
            fi.module.to_raw(),
            fi.token,
            "the function being compiled",
        )?;
        self.never_compiled(info, function)?;
        let buffer = info
            .il_function_body_allocator(self.module)?
            .alloc_copy(&self.bytes)?;
        // SAFETY: [wrapped-frame] the body was built by `wrap` or `wrap_managed` for this
        // method of this module and verified: the original IL (which the runtime was about
        // to run) inside the layer's regions, whose added code reads and writes only its own
        // new locals and the method's own arguments, and calls either the two probes of this
        // library (pinned for the process's life) through `calli` signatures that match their
        // Rust declarations, or two static methods through MemberRefs whose signatures the
        // layer defined, with arguments boxed by their declared types (a handler type that
        // does not match is a managed MissingMethodException, not memory misuse). It is the
        // method's one IL replacement, made in its first JIT compilation (`compilations::claim`:
        // no code of the method was compiled from another IL, and compilations starting
        // meanwhile wait for it), so every compilation, an on-stack replacement's included,
        // compiles the IL the code it continues came from.
        let set = || unsafe { info.set_il_function_body(self.module, self.token, buffer) };
        installs::install(
            (self.module.to_raw(), self.token),
            Some(function.to_raw()),
            set,
        )
        .map_err(|why| self.cannot(why))??;
        info.set_il_instrumented_code_map(function, true, &self.map)
    }

    // provenance: wrapped-body-method
    /// Installs the body for the next compilation of the method without a
    /// `FunctionID` (e.g. from `ModuleLoadFinished`): `SetILFunctionBody`
    /// only, no IL map. Refused like [`install_at_jit`](Self::install_at_jit)
    /// when a body of the method was installed before, when the JIT
    /// compiled any of the method already, and when the profiler cannot
    /// tell.
    pub fn install(&self, info: &ProfilerInfo) -> Result<()> {
        let buffer = info
            .il_function_body_allocator(self.module)?
            .alloc_copy(&self.bytes)?;
        // SAFETY: [wrapped-frame] as in `install_at_jit`: a body `wrap` built and verified,
        // the method's one IL replacement, before any JIT compilation of the method.
        let set = || unsafe { info.set_il_function_body(self.module, self.token, buffer) };
        installs::install((self.module.to_raw(), self.token), None, set)
            .map_err(|why| self.cannot(why))?
            .map(|_| ())
    }

    // provenance: wrapped-body-method
    /// Installs the body from `GetReJITParameters` of the wrapped method,
    /// through the control the runtime gave for it, with its IL map.
    ///
    /// The control belongs to one method (the ReJIT request's module and
    /// token, [`FunctionControl::module`](clrprof::rejit::FunctionControl::module)
    /// and [`method`](clrprof::rejit::FunctionControl::method)); a body made
    /// for another method would run that method's IL on this one's
    /// arguments (the third soundness review: `InvalidProgramException`, a
    /// fatal `AccessViolationException`, or a wrong result). So a control of
    /// another method is refused with [`Error::WrongPartner`], before
    /// anything reaches the runtime; the method then keeps the IL it had
    /// (the runtime compiles its original body again).
    pub fn install_in_rejit(&self, control: &clrprof::rejit::FunctionControl) -> Result<()> {
        self.same_method(
            "instrumentation::WrappedBody::install_in_rejit",
            control.module(),
            control.method(),
            "this ReJIT control",
        )?;
        // SAFETY: [wrapped-frame] as in `install_at_jit`: a body `wrap` built and verified,
        // for the method whose new version `control` sets (checked just above).
        unsafe { control.set_il_function_body(&self.bytes)? };
        control.set_il_instrumented_code_map(&self.map)
    }

    /// `Error::CannotWrap` of the wrapped method, for `why`.
    fn cannot(&self, why: impl Into<String>) -> Error {
        Error::CannotWrap {
            method: self.method().name().to_string(),
            why: why.into(),
        }
    }

    /// `Ok` when the JIT has not compiled `function` yet, else (or when
    /// that cannot be told) the refusal to install.
    fn never_compiled(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Result<()> {
        match installs::jit_compiled(info, function) {
            Ok(false) => Ok(()),
            Ok(true) => Err(self.cannot(installs::ALREADY_COMPILED)),
            Err(e) => Err(self.cannot(format!(
                "whether the JIT already compiled it could not be told ({e})"
            ))),
        }
    }

    /// `Ok` when (`module`, `token`) is the wrapped method, else the
    /// refusal of `call`; `what` names the partner in the message.
    fn same_method(
        &self,
        call: &'static str,
        module: RawModuleId,
        token: MdMethodDef,
        what: &str,
    ) -> Result<()> {
        if module == self.module.to_raw() && token == self.token {
            return Ok(());
        }
        Err(Error::WrongPartner {
            call,
            why: format!(
                "the body wraps {} (method {:#010x} of module {:#x}), but {what} is for method \
                 {:#010x} of module {:#x}; a wrapped body is installed only for the method it \
                 was built for (build one with `wrap` for this method)",
                self.method().name(),
                self.token.0,
                self.module.to_raw().0,
                token.0,
                module.0,
            ),
        })
    }
}

#[cold]
fn unreachable_registered() -> ! {
    // `wrap` registers the wrapper before it makes the body, and the table
    // never forgets.
    panic!("a WrappedBody whose wrapper is not registered")
}

/// What both shapes read first: the method's metadata, signature, IL and
/// locals, with the refusals they share.
struct Prepared<'m> {
    emit: clrprof::metadata_emit::MetaDataEmit<'m>,
    name: String,
    signature: Vec<u8>,
    sig: MethodSig,
    original: MethodBody,
    /// The original locals: their count and encoded types.
    local_count: u32,
    local_types: Vec<u8>,
    first_local: u16,
    returns: bool,
    /// Where the wrapper starts: after a reference type's constructor's
    /// base call, else at the start.
    split: build::Split,
}

impl Prepared<'_> {
    fn cannot(&self, why: impl Into<String>) -> Error {
        Error::CannotWrap {
            method: self.name.clone(),
            why: why.into(),
        }
    }

    /// The encoded return type, for a method that returns a value.
    fn ret_bytes(&self) -> Result<Option<&[u8]>> {
        self.returns
            .then(|| return_type_bytes(&self.signature))
            .transpose()
    }

    /// Max stack, encoding and `il::verify` of a built body.
    fn finish(&self, mut body: MethodBody) -> Result<clrprof::il::WrittenBody> {
        let sites = MetaDataCallSites(self.emit.import());
        recompute_max_stack(&mut body, self.returns, &sites)
            .map_err(|e| self.cannot(e.to_string()))?;
        let written = body.write()?;
        verify(&written.bytes, self.returns, &sites)
            .map_err(|e| self.cannot(format!("the wrapped body fails verification: {e}")))?;
        Ok(written)
    }
}

/// `MethodImplAttributes.Async` (.NET 11, `CorMethodImpl` 0x2000): a
/// runtime-async method, whose body the runtime compiles with suspension
/// points and whose `ret` pushes the awaited value, not the declared
/// `Task`/`ValueTask` (dotnet/runtime docs/design/specs/runtime-async.md).
const MI_ASYNC: u32 = 0x2000;

fn prepare<'m>(
    info: &ProfilerInfo,
    module: ModuleId<'m>,
    method: MdMethodDef,
    handlers: Option<&ManagedHandlers>,
) -> Result<Prepared<'m>> {
    let emit = info.module_metadata_emit(module)?;
    let import = emit.import();
    let name = import
        .method_name(method)
        .unwrap_or_else(|_| format!("method {:#010x}", method.0));
    let cannot = |why: &str| Error::CannotWrap {
        method: name.clone(),
        why: why.to_string(),
    };
    if installs::is_installed((module.to_raw(), method)) {
        return Err(cannot(installs::ALREADY_WRAPPED));
    }
    if let Some(h) = handlers {
        h.check(info, &name)?;
        if import.assembly_props().is_ok_and(|a| a.name == h.assembly) {
            return Err(cannot("it belongs to the handler assembly"));
        }
    }
    let props = import.method_props(method)?;
    let sig = MethodSig::parse(&props.signature)?;
    if sig.calling_convention & 0x0f == sys::IMAGE_CEE_CS_CALLCONV_VARARG as u8 {
        return Err(cannot("it is a vararg method"));
    }
    if props.impl_flags & MI_ASYNC != 0 {
        return Err(cannot(
            "it is a runtime-async method (MethodImplOptions.Async, .NET 11): its `ret` returns \
             the awaited value (T for Task<T>, nothing for Task), not its declared return type, \
             which the wrapper's return-value local and exit handler assume, and it suspends and \
             resumes inside the wrapper's try",
        ));
    }
    let il = info.il_function_body(module, method)?;
    if il.is_empty() {
        return Err(cannot("it has no IL body"));
    }
    let original = MethodBody::parse(il)?;
    if let Some(why) = build::refusal(&original) {
        return Err(cannot(why));
    }
    let local_blob = if original.local_var_sig.0 == 0 {
        Vec::new()
    } else {
        clrprof::il::standalone_sig(import, original.local_var_sig)?
    };
    let (local_count, types) = local_var_sig(&local_blob)?;
    let local_types = types.to_vec();
    let first_local =
        u16::try_from(local_count).map_err(|_| cannot("it has more locals than IL can index"))?;
    // Custom modifiers looked through: an `init` accessor returns
    // `modreq(IsExternalInit) void`, which returns nothing.
    let mut ret = &sig.ret;
    while let TypeSig::Modified { inner, .. } = ret {
        ret = inner;
    }
    let returns = !matches!(ret, TypeSig::Primitive(e) if u32::from(*e) == sys::ELEMENT_TYPE_VOID);
    let split = constructor_split(import, &props, &sig, &original).map_err(|e| match e {
        Error::Usage(why) => cannot(&why),
        e => e,
    })?;
    Ok(Prepared {
        emit,
        name,
        signature: props.signature,
        sig,
        original,
        local_count,
        local_types,
        first_local,
        returns,
        split,
    })
}

/// Whether the module's assembly has `RuntimeCompatibility(WrapNonExceptionThrows
/// = true)` (C# compilers emit it): then the runtime hands a catch clause of
/// its methods a `RuntimeWrappedException` for a thrown object that is not
/// an `Exception`, so what the wrapper's catch gets is always an exception,
/// never an array, whose method table is its `ClassID` (on runtimes where
/// arrays' type handles are type descriptors it is not).
fn wraps_non_exception_throws(import: &clrprof::metadata::MetaDataImport<'_>) -> bool {
    const NAME: &[u8] = b"WrapNonExceptionThrows";
    let Ok(Some(blob)) = import.custom_attribute(
        MdToken(0x2000_0001),
        "System.Runtime.CompilerServices.RuntimeCompatibilityAttribute",
    ) else {
        return false;
    };
    // A named property of type bool: the name as a SerString, then its
    // value byte (ECMA-335 II.23.3).
    blob.windows(NAME.len() + 1)
        .any(|w| &w[..NAME.len()] == NAME && w[NAME.len()] == 1)
}

/// Whether a TypeSpec blob is `GENERICINST CLASS <class> ...`: an
/// instantiation of the TypeDef `class` (ECMA-335 II.23.2.12, II.23.2.8).
fn instantiates(blob: &[u8], class: MdToken) -> bool {
    let [0x15, 0x12, rest @ ..] = blob else {
        return false;
    };
    // A compressed unsigned integer (II.23.2).
    let coded = match *rest {
        [b0, ..] if b0 & 0x80 == 0 => u32::from(b0),
        [b0, b1, ..] if b0 & 0xc0 == 0x80 => (u32::from(b0 & 0x3f) << 8) | u32::from(b1),
        [b0, b1, b2, b3, ..] if b0 & 0xe0 == 0xc0 => {
            (u32::from(b0 & 0x1f) << 24)
                | (u32::from(b1) << 16)
                | (u32::from(b2) << 8)
                | u32::from(b3)
        }
        _ => return false,
    };
    // TypeDefOrRef coded index: tag 0 is TypeDef.
    coded & 3 == 0 && (coded >> 2) == (class.0 & 0x00ff_ffff)
}

/// Where an instance constructor of a reference type is wrapped: after its
/// call to the base (or chained) constructor ([`build::base_call`]); every
/// other method (value-type and static constructors included) is wrapped
/// whole. `Error::Usage` says why such a constructor cannot be wrapped.
fn constructor_split(
    import: &clrprof::metadata::MetaDataImport<'_>,
    props: &clrprof::metadata::MethodProps,
    sig: &MethodSig,
    original: &MethodBody,
) -> Result<build::Split> {
    if props.name != ".ctor" || !sig.has_this() {
        return Ok(build::Split::Whole);
    }
    let own = import.type_def_props(props.class)?;
    let base = own.extends;
    // A value type's base is System.ValueType (System.Enum for enums, which
    // have no constructors); a generic base (a TypeSpec) is a class.
    if matches!(
        import.type_name_of(base).as_deref(),
        Ok("System.ValueType" | "System.Enum")
    ) {
        return Ok(build::Split::Whole);
    }
    let class = MdToken(props.class.0);
    let base_spec = (base.0 >> 24 == 0x1b)
        .then(|| import.type_spec_blob(clrprof::ids::MdTypeSpec(base.0)).ok())
        .flatten();
    // The type itself or its base: the TypeDef, the `extends` token, a
    // TypeSpec of the same blob as a generic base, or a TypeSpec
    // instantiating the type itself (`this(...)` in a generic class).
    let own_or_base = |parent: MdToken| {
        if parent == class || parent == base {
            return true;
        }
        if parent.0 >> 24 != 0x1b {
            return false;
        }
        let Ok(blob) = import.type_spec_blob(clrprof::ids::MdTypeSpec(parent.0)) else {
            return false;
        };
        base_spec.as_deref() == Some(&blob[..]) || instantiates(&blob, class)
    };
    let is_own_ctor = |t: MdToken| match t.0 >> 24 {
        0x06 => import
            .method_props(MdMethodDef(t.0))
            .is_ok_and(|m| m.name == ".ctor" && own_or_base(MdToken(m.class.0))),
        0x0a => import
            .member_ref_props(clrprof::ids::MdMemberRef(t.0))
            .is_ok_and(|m| m.name == ".ctor" && own_or_base(m.parent)),
        _ => false,
    };
    let sites = MetaDataCallSites(import);
    let depths = clrprof::il::analyze(original, false, &sites)?.depths;
    build::base_call(original, &depths, &is_own_ctor)
        .map(build::Split::After)
        .map_err(|why| Error::Usage(why.to_string()))
}

// provenance: token-module
/// Builds a wrapped body of `method` in `module` whose entry and exits run
/// `handler`. See the module docs for the shape.
///
/// Fails with [`Error::CannotWrap`] for a method the shape cannot keep
/// (`tail.` calls, `jmp`, `arglist`, vararg signatures, no IL, a .NET 11
/// runtime-async method), with the
/// runtime's error when its IL or metadata cannot be read, and with
/// [`Error::CannotWrap`] if the built body fails [`verify`](clrprof::il::verify()) (a bug here or
/// a body that was invalid to start with).
pub fn wrap<'m, H: MethodHandler>(
    info: &ProfilerInfo,
    module: ModuleId<'m>,
    method: MdMethodDef,
    handler: Arc<H>,
) -> Result<WrappedBody<'m>> {
    let p = prepare(info, module, method, None)?;
    let emit = &p.emit;
    let pinned_object = [
        sys::ELEMENT_TYPE_PINNED as u8,
        sys::ELEMENT_TYPE_OBJECT as u8,
    ];
    let local_sig = emit.token_from_sig(&build::local_sig(
        p.local_count,
        &p.local_types,
        &[
            &SigBuilder::primitive(PrimitiveType::I8),
            &SigBuilder::primitive(PrimitiveType::I),
            &pinned_object,
        ],
        p.ret_bytes()?,
    )?)?;
    let object = emit.type_spec(&SigBuilder::primitive(PrimitiveType::Object))?;
    let (enter, exit) = build::probe_sigs()?;
    let (enter_sig, exit_sig) = (emit.token_from_sig(&enter)?, emit.token_from_sig(&exit)?);
    let arg_count = u16::try_from(p.sig.params.len() + usize::from(p.sig.has_this()))
        .map_err(|_| p.cannot("it has more arguments than IL can index"))?;
    // Registered before the build, whose code carries its address.
    let (id, registered) = register(Registered::new(
        WrappedMethod::new(p.name.clone(), module.to_raw(), method, p.sig.clone()),
        Box::new(Typed(handler)),
        info.handle(),
    ))?;
    let plan = build::Plan {
        handler: registered as *const Registered as usize,
        enter: enter_probe::<H> as *const () as usize,
        exit: exit_probe::<H> as *const () as usize,
        enter_sig,
        exit_sig,
        object,
        local_sig,
        first_local: p.first_local,
        returns: p.returns,
        arguments: H::ARGUMENTS.then_some(arg_count),
        split: p.split,
        read_class: wraps_non_exception_throws(p.emit.import()),
    };
    let body = build::build(&p.original, &plan).map_err(|e| p.cannot(e.to_string()))?;
    let written = p.finish(body)?;
    Ok(WrappedBody {
        module,
        token: method,
        id,
        bytes: written.bytes,
        map: written.map,
    })
}

// provenance: token-module
/// Builds a wrapped body of `method` in `module` whose entry and exits call
/// the C# handlers of `handlers` (see [`ManagedHandlers`]):
///
/// - the entry handler gets the method's name and its declared arguments,
///   boxed, and returns a state;
/// - on a normal return the exit handler gets the state and the boxed
///   return value and returns the value the method returns (`unbox.any` to
///   the method's return type: a value of another type throws
///   `InvalidCastException` in the application, as the C# handler's own
///   bug);
/// - when an exception leaves, a `catch` of everything hands it to the exit
///   handler and rethrows it (so, unlike the Rust shape, the exception's
///   first pass stops at this frame and filters further up run after its
///   inner `finally` blocks, as with CallTarget).
///
/// Fails like [`wrap`], for a method returning a `ref`, for a method of the
/// handler assembly, and ([`Error::CannotWrap`], with the reason) unless
/// `handlers` accepted a load of their assembly in this runtime with the
/// expected version: the first load of that name, made by the runtime's
/// startup hook code into the default load context, where this method's
/// reference binds whatever its own load context (see [`ManagedHandlers`]).
pub fn wrap_managed<'m>(
    info: &ProfilerInfo,
    module: ModuleId<'m>,
    method: MdMethodDef,
    handlers: &ManagedHandlers,
) -> Result<WrappedBody<'m>> {
    let p = prepare(info, module, method, Some(handlers))?;
    if matches!(p.sig.ret, TypeSig::ByRef(_)) {
        return Err(p.cannot("it returns a `ref`, which cannot be boxed"));
    }
    let emit = &p.emit;
    let ret_bytes = p.ret_bytes()?;
    let object_type = SigBuilder::primitive(PrimitiveType::Object);
    let local_sig = emit.token_from_sig(&build::local_sig(
        p.local_count,
        &p.local_types,
        &[&object_type, &object_type],
        ret_bytes,
    )?)?;
    let ret = ret_bytes.map(|b| emit.type_spec(b)).transpose()?;
    let mut params = Vec::new();
    for (t, bytes) in p
        .sig
        .params
        .iter()
        .zip(clrprof::signature::param_type_bytes(&p.signature)?)
    {
        let plain = |t: &TypeSig| {
            !matches!(
                t,
                TypeSig::ByRef(_) | TypeSig::Ptr(_) | TypeSig::FnPtr(_) | TypeSig::Pinned(_)
            ) && *t != TypeSig::Primitive(sys::ELEMENT_TYPE_TYPEDBYREF as u8)
        };
        let inner = match t {
            TypeSig::Modified { inner, .. } => inner.as_ref(),
            t => t,
        };
        params.push(if plain(inner) {
            Some(emit.type_spec(bytes)?)
        } else {
            None
        });
    }
    let object = emit.type_spec(&SigBuilder::primitive(PrimitiveType::Object))?;
    let scope = emit.assembly_ref(&handlers.assembly, handlers.version)?;
    let class = emit.type_ref(clrprof::ids::MdToken(scope.0), &handlers.type_name)?;
    // object OnEntry(string, object[]); object OnExit(string, object, object, object)
    let (o, st) = (
        sys::ELEMENT_TYPE_OBJECT as u8,
        sys::ELEMENT_TYPE_STRING as u8,
    );
    let on_entry = emit.member_ref(
        clrprof::ids::MdToken(class.0),
        "OnEntry",
        &[0x00, 2, o, st, sys::ELEMENT_TYPE_SZARRAY as u8, o],
    )?;
    let on_exit = emit.member_ref(
        clrprof::ids::MdToken(class.0),
        "OnExit",
        &[0x00, 4, o, st, o, o, o],
    )?;
    let user_string = emit.define_user_string(&p.name)?;
    let plan = build::ManagedPlan {
        name: user_string,
        on_entry,
        on_exit,
        object,
        params,
        first_arg: u16::from(p.sig.has_this()),
        ret,
        local_sig,
        first_local: p.first_local,
        split: p.split,
    };
    let body = build::build_managed(&p.original, &plan).map_err(|e| p.cannot(e.to_string()))?;
    let written = p.finish(body)?;
    // The body calls no probe of this library; it is registered only so that
    // `WrappedBody::method` answers.
    let (id, _) = register(Registered::new(
        WrappedMethod::new(p.name.clone(), module.to_raw(), method, p.sig.clone()),
        Box::new(()),
        info.handle(),
    ))?;
    Ok(WrappedBody {
        module,
        token: method,
        id,
        bytes: written.bytes,
        map: written.map,
    })
}

#[cfg(test)]
mod tests;
