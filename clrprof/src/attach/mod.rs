//! Attaching a profiler to a running process, from both ends.
//!
//! **Profiler side** (always available):
//! - [`ClientData`]: the bytes the trigger sent, which
//!   [`Profiler::initialize_for_attach`](crate::callback::Profiler::initialize_for_attach)
//!   receives, read as UTF-8 or as `key=value;key=value` pairs;
//! - [`CatchUp`]: the `ProfilerAttachComplete` catch-up helpers. A profiler
//!   loaded by attach missed every load that happened before it arrived, so
//!   the runtime tells it to enumerate what is already there (`EnumModules`,
//!   `EnumJITedFunctions`) once `ProfilerAttachComplete` arrives. Load
//!   callbacks keep arriving on other threads during that enumeration, so the
//!   same module or function can be seen twice (once enumerated, once
//!   announced), or be announced before the enumeration reaches it; [`Seen`]
//!   de-duplicates by raw ID.
//!
//! Detaching again is [`crate::detach`].
//!
//! **Trigger side** (cargo feature `attach-trigger`, off by default so
//! profiler libraries do not carry it): `clrprof::attach::trigger` sends the diagnostics IPC
//! `AttachProfiler` command to a running .NET Core 3.0+ process, loads a
//! profiler at startup of a .NET 5+ process through a suspended diagnostic
//! port, and (on Windows) drives .NET Framework's `ICLRProfiling::AttachProfiler`.

mod catch_up;
mod client_data;

pub use catch_up::{CatchUp, CatchUpHandler, Found, Seen};
pub use client_data::ClientData;

#[cfg(feature = "attach-trigger")]
pub mod trigger;
