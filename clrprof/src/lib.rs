//! Write CLR profilers in safe Rust.
//!
//! A profiler is a `cdylib` that CoreCLR (or .NET Framework) loads into a
//! managed process and drives through the COM profiling API. With clrprof a
//! profiler is a struct, an attribute and the callbacks it cares about:
//!
//! ```no_run
//! use clrprof::{profiler, EventMask, EventMasks, FunctionId, Profiler, ProfilerInfo, Result};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! #[profiler(clsid = "{9E2B38F2-7355-4C61-A54F-434B7AC266C0}")]
//! #[derive(Default)]
//! struct JitCounter {
//!     compiled: AtomicUsize,
//! }
//!
//! impl Profiler for JitCounter {
//!     fn initialize(&self, _info: &ProfilerInfo) -> Result<EventMasks> {
//!         Ok(EventMask::MONITOR_JIT_COMPILATION.into())
//!     }
//!     fn jit_compilation_started(&self, _info: &ProfilerInfo, _f: FunctionId<'_>, _safe: bool) {
//!         self.compiled.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//! ```
//!
//! Build it as a `cdylib` and load it with `CORECLR_ENABLE_PROFILING=1`,
//! `CORECLR_PROFILER={9E2B38F2-...}`, `CORECLR_PROFILER_PATH=/abs/path/lib.so`
//! (or `clrprof run --profiler lib.so -- dotnet app.dll`).
//!
//! The modules, each one concern:
//! - [`ids`]: typed IDs and metadata tokens, with lifetimes that follow the
//!   runtime's validity rules;
//! - [`info`]: [`ProfilerInfo`], the version-aware `ICorProfilerInfo*`;
//! - [`callback`]: the [`Profiler`] trait, one method per callback;
//! - [`event_mask`]: [`EventMask`] and the attach-only [`AttachEventMask`];
//! - [`error`]: [`Error`] with named, explained `HRESULT`s;
//! - [`buffer`]: the caller-allocated-buffer protocol;
//! - [`metadata`], [`names`]: metadata access, names and a name cache;
//! - [`gc`]: GC callback data and [`gc::ObjectTable`];
//! - [`handles`]: [`handles::GcHandle`], the owned way to keep an object;
//! - [`eventpipe`]: EventPipe providers, events and sessions from a profiler;
//! - [`inspect`]: a string's text, an array's elements, field and static values;
//! - [`exit`]: finishing work exactly once on every exit path;
//! - [`context`]: each thread's trace context (trace, span, endpoint), for samplers;
//! - [`guard`], [`logging`]: panic containment and the log sink.
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod allocations;
pub mod attach;
pub mod buffer;
pub mod callback;
mod com;
pub mod compilations;
pub mod component;
pub mod context;
pub mod detach;
pub mod elt;
pub mod error;
pub mod event_mask;
pub mod eventpipe;
pub mod exit;
mod exiting;
pub mod factory;
pub mod gc;
pub mod guard;
pub mod handles;
pub mod host;
pub mod ids;
pub mod il;
pub mod info;
pub mod inspect;
pub mod logging;
pub mod metadata;
pub mod metadata_emit;
pub mod names;
pub mod output;
pub mod rejit;
pub mod runtimes;
pub mod signature;
pub mod stackwalk;
mod suspends;
#[cfg(any(test, feature = "fake-runtime"))]
pub mod testing;
pub mod thread;
pub mod wide;

pub use callback::{Failed, Loaded, Profiler, SuspendReason, TransitionReason};
pub use clrprof_macros::profiler;
pub use component::Component;
pub use error::{Error, Result, HRESULT};
pub use event_mask::{
    AttachEventMask, AttachEventMasks, AttachHighEventMask, EventMask, EventMasks, HighEventMask,
    MaskRules,
};
pub use ids::*;
pub use info::{ProfilerInfo, RuntimeHandle, RuntimeInfo, RuntimeType};
pub use names::NameCache;
pub use runtimes::RuntimePolicy;
pub use wide::WideStr;
/// A COM GUID (activity IDs, EventPipe `Guid` fields, interface IDs).
pub use windows_core::GUID;

/// The raw bindings, for what the safe layer does not cover yet.
pub use clrprof_sys as sys;

/// Items the `#[profiler]` macro expands to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::com::create_instance;
    pub use windows_core::GUID;

    /// Implemented by every `Send + Sync` type; `#[profiler]` requires it so a
    /// profiler holding a `RefCell` or an `Rc` fails to compile with this message.
    #[diagnostic::on_unimplemented(
        message = "profiler `{Self}` must be `Send + Sync`: the runtime calls it from many threads at once",
        note = "keep mutable state in atomics, `Mutex` or `RwLock`, not `Cell`, `RefCell` or `Rc`"
    )]
    pub trait ThreadSafeProfiler {}
    impl<T: ?Sized + Send + Sync> ThreadSafeProfiler for T {}
}
