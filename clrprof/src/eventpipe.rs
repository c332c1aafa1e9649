//! EventPipe from a profiler (`ICorProfilerInfo12`, `ICorProfilerInfo14`,
//! `ICorProfilerCallback10`; .NET 5+): define a provider and typed events,
//! write them, start sessions, and receive events — the profiler's own and
//! the runtime's — through
//! [`Profiler::event_pipe_event_delivered`](crate::Profiler::event_pipe_event_delivered).
//!
//! ```no_run
//! # use clrprof::{ProfilerInfo, Result};
//! use clrprof::eventpipe::{EventSpec, Level, ProviderConfig};
//! # fn init(info: &ProfilerInfo) -> Result<()> {
//! let rt = info.handle();
//! let provider = rt.event_pipe_create_provider("My-Profiler")?;
//! // An event with an `int` and a `string` field.
//! let sample = provider.define_event::<(i32, String)>(
//!     &EventSpec::new("Sample", 1),
//!     &["index", "text"],
//! )?;
//! let session = rt.event_pipe_start_session(
//!     &[ProviderConfig::new("My-Profiler", u64::MAX, Level::Verbose)],
//!     false,
//! )?;
//! sample.write((7, "seven"))?;
//! # drop(session); Ok(()) }
//! ```
//!
//! # What the runtime does
//! - A session started by the profiler (`EventPipeStartSession`) is
//!   synchronous: the runtime hands each event to
//!   `EventPipeEventDelivered` on the thread that writes it, inside the
//!   write. The profiler must enable
//!   [`HighEventMask::MONITOR_EVENT_PIPE`](crate::HighEventMask::MONITOR_EVENT_PIPE)
//!   for the callback. So a profiler that writes events and also receives
//!   them must not hold, while writing, a lock its delivery callback takes.
//! - Providers the profiler creates live as long as the runtime (the API
//!   has no way to delete one), and so do their events: [`Provider`] and
//!   [`Event`] are owned, `Clone + Send + Sync` values. A provider handed
//!   to a callback ([`ProviderRef`]) may belong to an `EventSource` that is
//!   disposed later, so it is only valid during that callback.
//! - The payload encoding is EventPipe's (see [`payload`]); the metadata the
//!   runtime generates for a defined event describes its fields, so a
//!   delivered event can be decoded by name ([`EventPipeEvent::values`]).
//!   The runtime's native providers (`Microsoft-Windows-DotNETRuntime`)
//!   send metadata with the event's ID, keywords, version and level but no
//!   name and no fields (.NET 8.0.4): their payloads follow the runtime's
//!   event manifest, read them with [`payload::Reader`].
//! - Configure the providers of a session when starting it.
//!   `EventPipeAddProviderToSession` only records the provider in the
//!   session: on .NET 8.0.4 a provider created afterwards is enabled, one
//!   that already exists is not ([`Session::add_provider`]).
//! - `EventPipeCreateProvider2` (Info14, .NET 8) takes a callback the
//!   runtime calls when a session enables or disables the provider, with
//!   no context pointer: the SDK routes it through one of
//!   [`MAX_PROVIDER_CALLBACKS`] fixed entry points.
//!
//! After the runtime shut down (or detached the profiler), writes and
//! session stops make no call ([`Error::Detached`] for writes; a dropped
//! session is left to the runtime). A detach is refused
//! ([`Error::Refused`]) once a provider was created with a callback (the
//! runtime keeps calling it, and a detached library is unloaded) and while
//! a session the profiler started runs.

pub mod payload;

use crate::buffer::{fill_string, to_wide};
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::RawThreadId;
use crate::info::{ProfilerInfo, RuntimeHandle};
use clrprof_sys as sys;
use core::marker::PhantomData;
use payload::{EventValue, FieldType, Payload, Reader};
use std::sync::Arc;
use windows_core::GUID;

/// The runtime's event provider.
pub const RUNTIME_PROVIDER: &str = "Microsoft-Windows-DotNETRuntime";

/// An event's verbosity (`COR_PRF_EVENTPIPE_LEVEL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// `COR_PRF_EVENTPIPE_LOGALWAYS` (0).
    LogAlways,
    /// `COR_PRF_EVENTPIPE_CRITICAL` (1).
    Critical,
    /// `COR_PRF_EVENTPIPE_ERROR` (2).
    Error,
    /// `COR_PRF_EVENTPIPE_WARNING` (3).
    Warning,
    /// `COR_PRF_EVENTPIPE_INFORMATIONAL` (4).
    Informational,
    /// `COR_PRF_EVENTPIPE_VERBOSE` (5).
    Verbose,
}

impl Level {
    /// The `COR_PRF_EVENTPIPE_LEVEL` value.
    pub const fn to_sys(self) -> u32 {
        match self {
            Level::LogAlways => sys::COR_PRF_EVENTPIPE_LOGALWAYS,
            Level::Critical => sys::COR_PRF_EVENTPIPE_CRITICAL,
            Level::Error => sys::COR_PRF_EVENTPIPE_ERROR,
            Level::Warning => sys::COR_PRF_EVENTPIPE_WARNING,
            Level::Informational => sys::COR_PRF_EVENTPIPE_INFORMATIONAL,
            Level::Verbose => sys::COR_PRF_EVENTPIPE_VERBOSE,
        }
    }

    /// The level of a raw value (`None` above `Verbose`).
    pub const fn from_sys(v: u32) -> Option<Level> {
        Some(match v {
            0 => Level::LogAlways,
            1 => Level::Critical,
            2 => Level::Error,
            3 => Level::Warning,
            4 => Level::Informational,
            5 => Level::Verbose,
            _ => return None,
        })
    }
}

/// A provider the profiler created (`EVENTPIPE_PROVIDER`), valid as long as
/// its runtime: the profiling API never deletes one. Its methods make no
/// call once the runtime shut down ([`Error::Detached`]).
#[derive(Clone)]
pub struct Provider {
    runtime: RuntimeHandle,
    raw: usize,
    name: Arc<str>,
}

impl core::fmt::Debug for Provider {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("handle", &format_args!("{:#x}", self.raw))
            .finish()
    }
}

/// A provider handed to a callback (`EventPipeEventDelivered`,
/// `EventPipeProviderCreated`): valid for that callback only, since an
/// `EventSource`'s provider is deleted when the source is disposed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProviderRef<'a> {
    raw: usize,
    _scope: PhantomData<&'a ()>,
}

impl core::fmt::Debug for ProviderRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ProviderRef({:#x})", self.raw)
    }
}

impl<'a> ProviderRef<'a> {
    /// Wraps a provider handle the runtime handed to a callback.
    ///
    /// # Safety
    /// `raw` must be an `EVENTPIPE_PROVIDER` of the runtime that stays
    /// alive for `'a` (a callback argument, for the callback).
    pub unsafe fn from_sys(raw: sys::EVENTPIPE_PROVIDER) -> Self {
        ProviderRef {
            raw,
            _scope: PhantomData,
        }
    }

    /// The raw handle, e.g. as a map key (compare with [`Provider::raw`]).
    pub fn raw(self) -> usize {
        self.raw
    }
}

/// How a session listens to one provider (`COR_PRF_EVENTPIPE_PROVIDER_CONFIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderConfig<'a> {
    /// The provider's name, e.g. `Microsoft-Windows-DotNETRuntime`.
    pub name: &'a str,
    /// Keywords to enable (`u64::MAX` for all).
    pub keywords: u64,
    /// The most verbose level to enable.
    pub level: Level,
    /// Filter data for the provider (`key=value;...`), if any.
    pub filter: Option<&'a str>,
}

impl<'a> ProviderConfig<'a> {
    /// A configuration without filter data.
    pub fn new(name: &'a str, keywords: u64, level: Level) -> Self {
        ProviderConfig {
            name,
            keywords,
            level,
            filter: None,
        }
    }
}

/// The UTF-16 strings a `COR_PRF_EVENTPIPE_PROVIDER_CONFIG` points to, kept
/// alive for the call.
struct WideConfig {
    name: Vec<u16>,
    filter: Option<Vec<u16>>,
    keywords: u64,
    level: u32,
}

impl WideConfig {
    fn new(c: &ProviderConfig<'_>) -> Self {
        WideConfig {
            name: to_wide(c.name),
            filter: c.filter.map(to_wide),
            keywords: c.keywords,
            level: c.level.to_sys(),
        }
    }

    /// The raw form; it points into `self`.
    fn raw(&self) -> sys::COR_PRF_EVENTPIPE_PROVIDER_CONFIG {
        sys::COR_PRF_EVENTPIPE_PROVIDER_CONFIG {
            providerName: self.name.as_ptr(),
            keywords: self.keywords,
            loggingLevel: self.level,
            filterData: self
                .filter
                .as_ref()
                .map_or(core::ptr::null(), |f| f.as_ptr()),
        }
    }
}

/// A session the profiler started (`EVENTPIPE_SESSION`). Dropping it stops
/// it (`EventPipeStopSession`), while the runtime takes calls.
pub struct Session {
    runtime: RuntimeHandle,
    id: u64,
    stopped: bool,
}

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish()
    }
}

/// What defines an event besides its fields (`EventPipeDefineEvent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSpec<'a> {
    /// The event's name.
    pub name: &'a str,
    /// Its ID within the provider.
    pub id: u32,
    /// Its keywords.
    pub keywords: u64,
    /// Its version.
    pub version: u32,
    /// Its level.
    pub level: Level,
    /// Its opcode.
    pub opcode: u8,
    /// Whether the runtime captures the writer's stack with each event.
    pub need_stack: bool,
}

impl<'a> EventSpec<'a> {
    /// Event `name` with `id`, version 1, no keywords, level
    /// `Informational`, opcode 0, no stacks.
    pub fn new(name: &'a str, id: u32) -> Self {
        EventSpec {
            name,
            id,
            keywords: 0,
            version: 1,
            level: Level::Informational,
            opcode: 0,
            need_stack: false,
        }
    }
}

/// An event the profiler defined (`EVENTPIPE_EVENT`), with its fields typed
/// by `P` (a tuple of [`payload::Field`] types). Lives as long as its
/// provider, i.e. its runtime.
pub struct Event<P: Payload> {
    runtime: RuntimeHandle,
    raw: usize,
    id: u32,
    _payload: PhantomData<fn(P)>,
}

impl<P: Payload> Clone for Event<P> {
    fn clone(&self) -> Self {
        Event {
            runtime: self.runtime.clone(),
            raw: self.raw,
            id: self.id,
            _payload: PhantomData,
        }
    }
}

impl<P: Payload> core::fmt::Debug for Event<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Event")
            .field("id", &self.id)
            .field("fields", &P::TYPES)
            .finish()
    }
}

thread_local! {
    // reentrancy: eventpipe-delivery
    /// Whether this thread is inside one of the profiler's own EventPipe
    /// calls that the runtime answers by calling the profiler back on this
    /// thread before it returns: a write (each of the profiler's sessions
    /// that listens delivers it, `ep_session_write_event` in the runtime's
    /// src/native/eventpipe/ep-session.c) or a provider's creation
    /// (`EventPipeProviderCreated`, and the provider's enable callback).
    static DELIVERING: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// The scope of one call that delivers synchronously (see [`DELIVERING`]).
struct Delivering;

impl Delivering {
    /// Enters the scope of `call`, or refuses it on a thread already in
    /// one: the callback it is made from would be called again inside it,
    /// and again, without bound.
    fn enter(call: &'static str) -> Result<Delivering> {
        if DELIVERING.with(|d| d.replace(true)) {
            return Err(Error::WouldRecurse {
                call,
                why: "this thread is inside the profiler's own EventPipe write or provider \
                      creation (the runtime delivers the event to the profiler's sessions, or \
                      announces the provider, on this thread before that call returns), and \
                      this call would be delivered inside itself in turn; a delivered event of \
                      the profiler's own is not written again from its delivery (relay the \
                      runtime's events, or write from another callback or thread)"
                    .into(),
            });
        }
        Ok(Delivering)
    }
}

impl Drop for Delivering {
    fn drop(&mut self) {
        DELIVERING.with(|d| d.set(false));
    }
}

impl RuntimeHandle {
    /// `EventPipeCreateProvider` (Info12): a provider named `name`.
    ///
    /// The name of the runtime's own provider
    /// ([`RUNTIME_PROVIDER`]) is
    /// refused ([`Error::InvalidArgument`]): the SDK trusts the allocation
    /// events under that name ([`crate::allocations`]).
    pub fn event_pipe_create_provider(&self, name: &str) -> Result<Provider> {
        reserved_name(name)?;
        self.call_live("ICorProfilerInfo12::EventPipeCreateProvider", || {
            const CALL: &str = "ICorProfilerInfo12::EventPipeCreateProvider";
            let i12 = self.raw_info12(CALL)?;
            let _call = Delivering::enter(CALL)?;
            let wide = to_wide(name);
            let mut raw: sys::EVENTPIPE_PROVIDER = 0;
            check(
                // SAFETY: [info-alive, nul-terminated, plain-call] `wide` is NUL-terminated and outlives the call (the runtime
                // copies the name); valid out pointer.
                unsafe { i12.EventPipeCreateProvider(wide.as_ptr(), &mut raw) },
                CALL,
            )?;
            self.provider(raw, name, CALL)
        })
    }

    /// `EventPipeCreateProvider2` (Info14, .NET 8): a provider named `name`
    /// whose `callback` the runtime calls whenever a session enables or
    /// disables it (including sessions that already listen to the name
    /// when it is created). The callback runs under the SDK's panic guard;
    /// at most [`MAX_PROVIDER_CALLBACKS`] providers per process can have one
    /// (then [`Error::Refused`]). The runtime's own provider name is refused
    /// as by [`event_pipe_create_provider`](Self::event_pipe_create_provider).
    pub fn event_pipe_create_provider_with_callback(
        &self,
        name: &str,
        callback: impl Fn(&ProviderEnablement<'_>) + Send + Sync + 'static,
    ) -> Result<Provider> {
        reserved_name(name)?;
        self.call_live("ICorProfilerInfo14::EventPipeCreateProvider2", || {
        const CALL: &str = "ICorProfilerInfo14::EventPipeCreateProvider2";
        let i14 = self.raw_info14(CALL)?;
        let _call = Delivering::enter(CALL)?;
        let slot = callbacks::claim(Arc::new(callback)).ok_or_else(|| Error::Refused {
            hr: windows_core::HRESULT(KnownHresult::E_OUTOFMEMORY as i32),
            call: CALL,
            why: format!(
                "the SDK routes provider callbacks through {MAX_PROVIDER_CALLBACKS} entry points, all taken"
            ),
        })?;
        let wide = to_wide(name);
        let mut raw: sys::EVENTPIPE_PROVIDER = 0;
        // SAFETY: [info-alive, nul-terminated, library-pinned, plain-call] `wide` is NUL-terminated and outlives the call; the
        // callback is a `extern "system"` function of the
        // EventPipeProviderCallback signature that stays in the library for
        // as long as the library is loaded; valid out pointer.
        let hr = unsafe {
            i14.EventPipeCreateProvider2(wide.as_ptr(), Some(callbacks::entry(slot)), &mut raw)
        };
        if let Err(e) = check(hr, CALL) {
            callbacks::release(slot);
            return Err(e);
        }
        // The runtime keeps the callback's address for the provider's
        // lifetime (its own): this runtime must never detach the library.
        self.pin_library();
        self.provider(raw, name, CALL)
        })
    }

    fn provider(&self, raw: usize, name: &str, call: &'static str) -> Result<Provider> {
        if raw == 0 {
            return Err(Error::InconsistentAnswer { call });
        }
        Ok(Provider {
            runtime: self.clone(),
            raw,
            name: name.into(),
        })
    }

    /// `EventPipeStartSession` (Info12): a session listening to `providers`,
    /// delivering to
    /// [`Profiler::event_pipe_event_delivered`](crate::Profiler::event_pipe_event_delivered)
    /// (which needs
    /// [`HighEventMask::MONITOR_EVENT_PIPE`](crate::HighEventMask::MONITOR_EVENT_PIPE)).
    /// With `rundown`, stopping the session first emits the runtime's
    /// rundown events (loaded methods and modules).
    pub fn event_pipe_start_session(
        &self,
        providers: &[ProviderConfig<'_>],
        rundown: bool,
    ) -> Result<Session> {
        self.call_live("ICorProfilerInfo12::EventPipeStartSession", || {
            const CALL: &str = "ICorProfilerInfo12::EventPipeStartSession";
            let i12 = self.raw_info12(CALL)?;
            let wide: Vec<WideConfig> = providers.iter().map(WideConfig::new).collect();
            let raw: Vec<sys::COR_PRF_EVENTPIPE_PROVIDER_CONFIG> =
                wide.iter().map(WideConfig::raw).collect();
            let n = u32::try_from(raw.len())
                .map_err(|_| Error::InvalidArgument("too many providers"))?;
            let mut id: sys::EVENTPIPE_SESSION = 0;
            check(
                // SAFETY: [info-alive, nul-terminated, plain-call] `raw` holds `n` configurations whose strings live in
                // `wide` until after the call (the runtime converts and copies
                // them); valid out pointer.
                unsafe {
                    i12.EventPipeStartSession(n, raw.as_ptr(), rundown as sys::BOOL, &mut id)
                },
                CALL,
            )?;
            // The session delivers to this library's callbacks: no detach
            // until it is stopped.
            self.pin_library();
            Ok(Session {
                runtime: self.clone(),
                id,
                stopped: false,
            })
        })
    }
}

impl<'s> ProfilerInfo<'s> {
    // provenance: handle-runtime
    /// `EventPipeGetProviderInfo` (Info12): the name of a provider handed to
    /// a callback.
    pub fn event_pipe_provider_name(&self, provider: ProviderRef<'_>) -> Result<String> {
        provider_name(self, provider.raw)
    }
}

/// Refuses the name of the runtime's own provider for a provider the
/// profiler makes (the SDK identifies the runtime's allocation events by it,
/// see [`crate::allocations`]).
fn reserved_name(name: &str) -> Result<()> {
    if name.eq_ignore_ascii_case(RUNTIME_PROVIDER) {
        return Err(Error::InvalidArgument(
            "Microsoft-Windows-DotNETRuntime is the runtime's own provider: a profiler's provider needs another name",
        ));
    }
    Ok(())
}

/// The name of a provider known valid (by `EventPipeGetProviderInfo`).
pub(crate) fn provider_name(runtime: &RuntimeHandle, raw: usize) -> Result<String> {
    const CALL: &str = "ICorProfilerInfo12::EventPipeGetProviderInfo";
    let i12 = runtime.raw_info12(CALL)?;
    let short = KnownHresult::ERROR_INSUFFICIENT_BUFFER as i32;
    runtime.call_live(CALL, || {
        fill_string(CALL, |cap, needed, buf| {
            // SAFETY: [eventpipe-handles, info-alive, buffer-protocol] `raw` is a provider
            // this runtime made (both callers pass a `Provider`'s or a lent
            // `ProviderRef`'s), alive as long as the runtime, which still runs
            // (`call_live`); `buf` has `cap` WCHARs (buffer protocol).
            let hr = unsafe { i12.EventPipeGetProviderInfo(raw, cap, needed, buf) };
            // The runtime calls a buffer of exactly the name's size (NUL
            // included) short as well; ask for one more unit then.
            if hr.0 == short && *needed >= cap {
                *needed = (*needed).max(cap.saturating_add(1));
            }
            hr
        })
    })
}

impl Provider {
    /// The provider's handle.
    pub fn raw(&self) -> usize {
        self.raw
    }

    /// The name it was created with.
    pub fn name(&self) -> &str {
        &self.name
    }

    // provenance: none: two handles are only compared
    /// `true` if `other` (from a callback) is this provider.
    pub fn is(&self, other: ProviderRef<'_>) -> bool {
        self.raw == other.raw
    }

    /// `EventPipeGetProviderInfo` (Info12): the name as the runtime has it.
    pub fn name_from_runtime(&self) -> Result<String> {
        provider_name(&self.runtime, self.raw)
    }

    /// `EventPipeDefineEvent` (Info12): an event whose fields are typed by
    /// `P` (e.g. `(i32, String)`) and named by `field_names`, one per field
    /// ([`Error::InvalidArgument`] otherwise).
    pub fn define_event<P: Payload>(
        &self,
        spec: &EventSpec<'_>,
        field_names: &[&str],
    ) -> Result<Event<P>> {
        const CALL: &str = "ICorProfilerInfo12::EventPipeDefineEvent";
        if field_names.len() != P::TYPES.len() {
            return Err(Error::InvalidArgument(
                "define_event needs exactly one name per field of the payload type",
            ));
        }
        let i12 = self.runtime.raw_info12(CALL)?;
        let names: Vec<Vec<u16>> = field_names.iter().map(|n| to_wide(n)).collect();
        let params: Vec<sys::COR_PRF_EVENTPIPE_PARAM_DESC> = P::TYPES
            .iter()
            .zip(&names)
            .map(|(t, n)| sys::COR_PRF_EVENTPIPE_PARAM_DESC {
                r#type: t.code(),
                elementType: t.element_code(),
                name: n.as_ptr(),
            })
            .collect();
        let event_name = to_wide(spec.name);
        let mut raw: sys::EVENTPIPE_EVENT = 0;
        self.runtime.call_live(CALL, || {
            check(
                // SAFETY: [eventpipe-handles, info-alive, nul-terminated] `self.raw` is a provider of this runtime, alive as
                // long as the runtime, which still runs (`call_live`); every
                // string is NUL-terminated and, like `params`
                // (`params.len()` entries), outlives the call (the runtime
                // builds the event's metadata from them during it); valid
                // out pointer.
                unsafe {
                    i12.EventPipeDefineEvent(
                        self.raw,
                        event_name.as_ptr(),
                        spec.id,
                        spec.keywords,
                        spec.version,
                        spec.level.to_sys(),
                        spec.opcode,
                        spec.need_stack as sys::BOOL,
                        params.len() as u32,
                        params.as_ptr(),
                        &mut raw,
                    )
                },
                CALL,
            )
        })?;
        if raw == 0 {
            return Err(Error::InconsistentAnswer { call: CALL });
        }
        Ok(Event {
            runtime: self.runtime.clone(),
            raw,
            id: spec.id,
            _payload: PhantomData,
        })
    }
}

impl<P: Payload> Event<P> {
    /// The event's ID within its provider.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// `EventPipeWriteEvent` (Info12): writes one event with `values`, e.g.
    /// `event.write((7, "seven"))` for `Event<(i32, String)>`. Sessions
    /// started by the profiler deliver it before this returns (see the
    /// module docs). Refused ([`Error::WouldRecurse`], nothing written) on
    /// a thread inside another of the profiler's own writes or provider
    /// creations: from the delivery of its own event, a write would be
    /// delivered inside itself again (the fourth review's route 4: a relay
    /// of every delivered event overflowed the stack).
    pub fn write(&self, values: P::Values<'_>) -> Result<()> {
        self.write_with_activity(values, None, None)
    }

    /// `EventPipeWriteEvent` (Info12) with an activity ID and a related
    /// activity ID.
    pub fn write_with_activity(
        &self,
        values: P::Values<'_>,
        activity: Option<&GUID>,
        related_activity: Option<&GUID>,
    ) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo12::EventPipeWriteEvent";
        let i12 = self.runtime.raw_info12(CALL)?;
        let mut bytes = Vec::with_capacity(64);
        P::encode(&values, &mut bytes);
        let data = sys::COR_PRF_EVENT_DATA {
            ptr: bytes.as_ptr() as u64,
            size: u32::try_from(bytes.len())
                .map_err(|_| Error::InvalidArgument("event payload larger than 4 GiB"))?,
            reserved: 0,
        };
        let (count, data_ptr) = if bytes.is_empty() {
            (0, core::ptr::null())
        } else {
            (1, &data as *const sys::COR_PRF_EVENT_DATA)
        };
        let to_ptr = |g: Option<&GUID>| g.map_or(core::ptr::null(), |g| g as *const GUID);
        let _call = Delivering::enter(CALL)?;
        self.runtime.call_live(CALL, || {
            check(
                // SAFETY: [eventpipe-handles, info-alive] `self.raw` is an event of this runtime (alive as
                // long as it), which still runs (`call_live`); `data` points
                // to `bytes`, both alive for the call (the runtime copies the
                // payload); the activity IDs are null or valid GUIDs.
                unsafe {
                    i12.EventPipeWriteEvent(
                        self.raw,
                        count,
                        data_ptr,
                        to_ptr(activity),
                        to_ptr(related_activity),
                    )
                },
                CALL,
            )
        })
    }
}

impl Session {
    /// The session's ID (`EVENTPIPE_SESSION`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// `EventPipeAddProviderToSession` (Info12): adds a provider to the
    /// session's configuration. The runtime only records it (.NET 8.0.4): a
    /// provider created after this call is enabled for the session, one
    /// that exists already is not, so name every existing provider when
    /// starting the session.
    pub fn add_provider(&self, config: &ProviderConfig<'_>) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo12::EventPipeAddProviderToSession";
        let i12 = self.runtime.raw_info12(CALL)?;
        let wide = WideConfig::new(config);
        self.runtime.call_live(CALL, || {
            check(
                // SAFETY: [eventpipe-handles, info-alive, nul-terminated] `self.id` is a running session of this runtime
                // (only `stop` / drop end it), which still runs
                // (`call_live`); the configuration's strings live in `wide`
                // until after the call.
                unsafe { i12.EventPipeAddProviderToSession(self.id, wide.raw()) },
                CALL,
            )
        })
    }

    /// `EventPipeStopSession` (Info12): stops the session (with rundown
    /// events first, if it was started with them). The runtime may wait
    /// here (it disables the session's providers, calling their callbacks):
    /// stop a session from a callback that may block (`Shutdown`,
    /// `JITCompilationStarted`, ...) or a thread of the profiler's own, not
    /// from one that runs with collections blocked (`ObjectAllocated`).
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo12::EventPipeStopSession";
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        self.runtime.unpin_library();
        let runtime = &self.runtime;
        let id = self.id;
        runtime
            .while_live(|| {
                let i12 = runtime.raw_info12(CALL)?;
                // SAFETY: [eventpipe-handles, info-alive] `id` is a session of this runtime not stopped yet
                // (`stopped` guards), and the runtime takes calls.
                check(unsafe { i12.EventPipeStopSession(id) }, CALL)
            })
            .unwrap_or(Ok(()))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.stop_inner() {
            log::warn!("stopping EventPipe session {}: {e}", self.id);
        }
    }
}

/// What a provider callback receives when a session enables or disables
/// the provider.
#[derive(Clone, Copy, Debug)]
pub struct ProviderEnablement<'a> {
    /// `true` when enabled, `false` when a session stopped listening.
    pub enabled: bool,
    /// The level asked for (raw: sessions may ask for any byte).
    pub level: u8,
    /// Keywords any of which an event needs.
    pub match_any_keywords: u64,
    /// Keywords all of which an event needs.
    pub match_all_keywords: u64,
    /// The session's filter data, if any: `(bytes, type)`.
    pub filter: Option<(&'a [u8], u32)>,
}

/// How many providers with a callback ([`RuntimeHandle::event_pipe_create_provider_with_callback`])
/// a process can have.
pub const MAX_PROVIDER_CALLBACKS: usize = 16;

mod callbacks {
    //! Fixed entry points for provider callbacks: `EventPipeCreateProvider2`
    //! passes the callback no context, so each provider gets its own entry
    //! point, which finds its closure by index.
    use super::{ProviderEnablement, MAX_PROVIDER_CALLBACKS};
    use crate::guard::guard;
    use clrprof_sys as sys;
    use core::ffi::c_void;
    use std::sync::{Arc, Mutex};

    type Callback = Arc<dyn Fn(&ProviderEnablement<'_>) + Send + Sync>;

    static SLOTS: Mutex<[Option<Callback>; MAX_PROVIDER_CALLBACKS]> =
        Mutex::new([const { None }; MAX_PROVIDER_CALLBACKS]);

    /// Takes a free slot for `callback`.
    pub(super) fn claim(callback: Callback) -> Option<usize> {
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        let free = slots.iter().position(Option::is_none)?;
        slots[free] = Some(callback);
        Some(free)
    }

    /// Frees a slot whose provider was not created.
    pub(super) fn release(slot: usize) {
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.get_mut(slot) {
            *s = None;
        }
    }

    unsafe extern "system" fn entry_point<const N: usize>(
        _source_id: *const u8,
        is_enabled: u32,
        level: u8,
        match_any_keywords: u64,
        match_all_keywords: u64,
        filter_data: *mut sys::COR_PRF_FILTER_DATA,
        _callback_data: *mut c_void,
    ) {
        let callback = {
            let slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
            slots[N].clone()
        };
        let Some(callback) = callback else { return };
        // SAFETY: [callback-args] the runtime passes null or filter data valid for the
        // callback (EventPipeProviderCallback mirrors the ETW enable
        // callback: a descriptor of `Size` bytes at `Ptr`).
        let filter = unsafe { filter_data.as_ref() }.and_then(|f| {
            (f.Ptr != 0 && f.Size != 0).then(|| {
                // SAFETY: [callback-args] as above: `Size` readable bytes at `Ptr` during
                // the callback.
                let bytes = unsafe {
                    core::slice::from_raw_parts(f.Ptr as usize as *const u8, f.Size as usize)
                };
                (bytes, f.Type)
            })
        });
        let enablement = ProviderEnablement {
            enabled: is_enabled != 0,
            level,
            match_any_keywords,
            match_all_keywords,
            filter,
        };
        guard("EventPipeProviderCallback", (), || callback(&enablement));
    }

    macro_rules! entries {
        ($($n:literal)*) => {
            [$(entry_point::<$n> as sys::EventPipeProviderCallback),*]
        };
    }

    const ENTRIES: [sys::EventPipeProviderCallback; MAX_PROVIDER_CALLBACKS] =
        entries!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);

    /// The entry point of `slot`.
    pub(super) fn entry(slot: usize) -> sys::EventPipeProviderCallback {
        ENTRIES[slot]
    }
}

/// One field of an event's metadata: its name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldDesc {
    /// The field's name.
    pub name: String,
    /// Its type.
    pub ty: TypeDesc,
}

/// The type of a field as the metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeDesc {
    /// A scalar type.
    Scalar(FieldType),
    /// An array of elements of the inner type.
    Array(Box<TypeDesc>),
    /// A nested object with these fields.
    Object(Vec<FieldDesc>),
}

impl TypeDesc {
    /// The flat [`FieldType`] (`Array(element)` only for fixed-size
    /// elements; `None` for arrays of anything else).
    pub fn field_type(&self) -> Option<FieldType> {
        match self {
            TypeDesc::Scalar(t) => Some(*t),
            TypeDesc::Object(_) => Some(FieldType::Object),
            TypeDesc::Array(e) => match **e {
                TypeDesc::Scalar(t) => t.as_element().map(FieldType::Array),
                _ => None,
            },
        }
    }
}

/// An event's metadata blob, parsed (the format the runtime's metadata
/// generator writes: a V1 header, then optional V2 tags for the opcode and
/// for fields of array types).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventMetadata {
    /// The event ID.
    pub id: u32,
    /// The event name.
    pub name: String,
    /// Its keywords.
    pub keywords: u64,
    /// Its version.
    pub version: u32,
    /// Its level.
    pub level: u32,
    /// Its opcode (0 when the metadata has none).
    pub opcode: u8,
    /// Its fields, in payload order.
    pub fields: Vec<FieldDesc>,
}

/// The V2 metadata tags.
const TAG_OPCODE: u8 = 1;
const TAG_PARAMS_V2: u8 = 2;

impl EventMetadata {
    /// Parses a metadata blob. An empty blob (the runtime's native events
    /// have none) is [`Error::Malformed`].
    pub fn parse(blob: &[u8]) -> Result<EventMetadata> {
        if blob.is_empty() {
            return Err(Error::Malformed(
                "the event carries no metadata (a native runtime event: decode it by its manifest)"
                    .into(),
            ));
        }
        let mut r = Reader::new(blob);
        let id = r.u32()?;
        let name = r.utf16z()?;
        let keywords = r.u64()?;
        let version = r.u32()?;
        let level = r.u32()?;
        let count = r.u32()?;
        let mut fields = Vec::new();
        for _ in 0..count {
            fields.push(parse_field(&mut r, false, 0)?);
        }
        let mut opcode = 0;
        while !r.is_empty() {
            let len = r.u32()? as usize;
            let tag = r.u8()?;
            match tag {
                TAG_OPCODE => opcode = r.u8()?,
                TAG_PARAMS_V2 => {
                    let n = r.u32()?;
                    for _ in 0..n {
                        fields.push(parse_field(&mut r, true, 0)?);
                    }
                }
                _ => {
                    r.take(len)?;
                }
            }
        }
        Ok(EventMetadata {
            id,
            name,
            keywords,
            version,
            level,
            opcode,
            fields,
        })
    }
}

/// Nesting deeper than this is refused (objects and arrays nest).
const MAX_DEPTH: usize = 32;

fn parse_type(r: &mut Reader<'_>, v2: bool, depth: usize) -> Result<TypeDesc> {
    if depth > MAX_DEPTH {
        return Err(Error::Malformed("EventPipe metadata nests too deep".into()));
    }
    let code = r.u32()?;
    if code == sys::COR_PRF_EVENTPIPE_ARRAY {
        return Ok(TypeDesc::Array(Box::new(parse_type(r, v2, depth + 1)?)));
    }
    if code == sys::COR_PRF_EVENTPIPE_OBJECT {
        let n = r.u32()?;
        let mut fields = Vec::new();
        for _ in 0..n {
            fields.push(parse_field(r, v2, depth + 1)?);
        }
        return Ok(TypeDesc::Object(fields));
    }
    FieldType::from_code(code)
        .map(TypeDesc::Scalar)
        .ok_or_else(|| Error::Malformed(format!("EventPipe metadata: unknown type code {code}")))
}

fn parse_field(r: &mut Reader<'_>, v2: bool, depth: usize) -> Result<FieldDesc> {
    if v2 {
        let _len = r.u32()?;
        let name = r.utf16z()?;
        let ty = parse_type(r, v2, depth)?;
        Ok(FieldDesc { name, ty })
    } else {
        let ty = parse_type(r, v2, depth)?;
        let name = r.utf16z()?;
        Ok(FieldDesc { name, ty })
    }
}

/// An activity ID argument of `EventPipeEventDelivered`: the runtime passes
/// a pointer to an all-zero GUID for "no activity" (seen on .NET 8.0.4).
///
/// # Safety
/// `p` is null or points to a GUID valid for `'a`.
pub(crate) unsafe fn activity<'a>(p: *const GUID) -> Option<&'a GUID> {
    // SAFETY: [caller-contract] guaranteed by the caller.
    unsafe { p.as_ref() }.filter(|g| **g != GUID::zeroed())
}

/// One event delivered through EventPipe (`ICorProfilerCallback10::EventPipeEventDelivered`).
#[derive(Clone, Copy, Debug)]
pub struct EventPipeEvent<'a> {
    /// The provider that wrote it.
    pub provider: ProviderRef<'a>,
    /// Event ID within the provider.
    pub event_id: u32,
    /// Event version.
    pub event_version: u32,
    /// The event's metadata blob (empty for the runtime's native events).
    pub metadata: &'a [u8],
    /// The event's payload.
    pub data: &'a [u8],
    /// Activity ID, if any (`None` also for the all-zero GUID the runtime
    /// passes when the writer set none).
    pub activity_id: Option<&'a GUID>,
    /// Related activity ID, if any (as for `activity_id`).
    pub related_activity_id: Option<&'a GUID>,
    /// The thread that wrote the event, as the runtime reports it. Raw: the
    /// SDK does not know the writer is still alive when the event reaches
    /// the profiler. (.NET 8.0.4 reports 0 for events of the profiler's
    /// own sessions, which it delivers on the writing thread.)
    pub thread: RawThreadId,
    /// Instruction pointers of the writer's stack, when the runtime
    /// captured it (.NET 8.0.4 captures none for the profiler's own
    /// sessions, even for events defined with `need_stack`).
    pub stack: &'a [usize],
}

impl EventPipeEvent<'_> {
    /// The parsed [`metadata`](Self::metadata).
    pub fn parse_metadata(&self) -> Result<EventMetadata> {
        EventMetadata::parse(self.metadata)
    }

    /// The payload decoded by the event's own metadata: each field's name
    /// and value, in order. [`Error::Malformed`] for events without metadata
    /// (the runtime's native events) or data that does not match it.
    pub fn values(&self) -> Result<Vec<(String, EventValue)>> {
        let meta = self.parse_metadata()?;
        if meta.fields.is_empty() && !self.data.is_empty() {
            return Err(Error::Malformed(format!(
                "event {} ({} bytes) has metadata without fields, as the runtime's native events do: decode it by the runtime's event manifest",
                meta.id,
                self.data.len()
            )));
        }
        let mut r = Reader::new(self.data);
        let mut out = Vec::with_capacity(meta.fields.len());
        for f in meta.fields {
            let v = payload::decode_value(&mut r, &f.ty)?;
            out.push((f.name, v));
        }
        if !r.is_empty() {
            return Err(Error::Malformed(
                "EventPipe payload has bytes its metadata does not describe".into(),
            ));
        }
        Ok(out)
    }

    /// The payload decoded as `P` (e.g. `(i32, String)`). When the event
    /// carries metadata, its field types must be `P`'s
    /// ([`Error::Malformed`] otherwise).
    pub fn decode<P: Payload>(&self) -> Result<P> {
        if !self.metadata.is_empty() {
            let meta = self.parse_metadata()?;
            let types: Vec<Option<FieldType>> =
                meta.fields.iter().map(|f| f.ty.field_type()).collect();
            let want: Vec<Option<FieldType>> = P::TYPES.iter().copied().map(Some).collect();
            if types != want {
                return Err(Error::Malformed(format!(
                    "event {} has fields {types:?}, not {:?}",
                    meta.name,
                    P::TYPES
                )));
            }
        }
        P::decode(self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::payload::{Char16, FileTime};
    use super::*;
    use crate::testing::fake::FakeRuntime;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn handle(fake: &FakeRuntime) -> RuntimeHandle {
        // SAFETY: [test-fake] the fake describes no memory the SDK reads.
        unsafe { fake.runtime_handle(false) }
    }

    #[test]
    fn utf16_strings_undecoded_and_decoded() {
        use super::payload::{decode_utf16le, Reader};
        // "Aé" then a second string, "𝄞" (a surrogate pair).
        let data = [0x41, 0, 0xe9, 0, 0, 0, 0x34, 0xd8, 0x1e, 0xdd, 0, 0, 7];
        let mut r = Reader::new(&data);
        let raw = r.utf16z_bytes().expect("terminated");
        assert_eq!(raw, &[0x41, 0, 0xe9, 0]);
        assert_eq!(decode_utf16le(raw).expect("valid"), "Aé");
        assert_eq!(r.utf16z().expect("valid"), "\u{1d11e}");
        assert_eq!(r.u8().expect("the byte after"), 7);
        // No NUL, a lone surrogate, an odd length: errors, no panic.
        assert!(Reader::new(&[0x41, 0, 0x42]).utf16z_bytes().is_err());
        assert!(Reader::new(&[0x34, 0xd8, 0, 0]).utf16z().is_err());
        assert!(decode_utf16le(&[0x41]).is_err());
    }

    #[test]
    fn providers_events_and_writes() {
        let fake = FakeRuntime::with_info_version(12);
        let rt = handle(&fake);
        let provider = rt.event_pipe_create_provider("My-Provider").unwrap();
        assert_eq!(provider.name(), "My-Provider");
        assert_eq!(provider.name_from_runtime().unwrap(), "My-Provider");
        let mut spec = EventSpec::new("Sample", 3);
        spec.level = Level::Verbose;
        spec.keywords = 0x40;
        let event = provider
            .define_event::<(i32, String, Vec<u16>, bool)>(&spec, &["a", "b", "c", "d"])
            .unwrap();
        {
            let st = fake.state();
            let def = st.eventpipe.events.values().next().unwrap().clone();
            assert_eq!(def.name, "Sample");
            assert_eq!((def.id, def.keywords, def.level), (3, 0x40, 5));
            assert_eq!(
                def.params,
                vec![
                    (sys::COR_PRF_EVENTPIPE_INT32, 0, "a".to_string()),
                    (sys::COR_PRF_EVENTPIPE_STRING, 0, "b".to_string()),
                    (
                        sys::COR_PRF_EVENTPIPE_ARRAY,
                        sys::COR_PRF_EVENTPIPE_UINT16,
                        "c".to_string()
                    ),
                    (sys::COR_PRF_EVENTPIPE_BOOLEAN, 0, "d".to_string()),
                ]
            );
        }
        // One name per field, checked before the runtime is asked.
        let calls = fake.call_count("EventPipeDefineEvent");
        assert!(matches!(
            provider.define_event::<(i32, String)>(&spec, &["only one"]),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(fake.call_count("EventPipeDefineEvent"), calls);

        let activity = GUID::from_u128(0x1234);
        event.write((-7, "hé", &[1, 2][..], true)).unwrap();
        event
            .write_with_activity((1, "", &[][..], false), Some(&activity), None)
            .unwrap();
        let st = fake.state();
        let w = &st.eventpipe.written;
        assert_eq!(w.len(), 2);
        let mut want = (-7i32).to_le_bytes().to_vec();
        want.extend_from_slice(&[b'h', 0, 0xE9, 0, 0, 0]);
        want.extend_from_slice(&[2, 0, 1, 0, 2, 0]);
        want.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(w[0].data, want);
        assert_eq!((w[0].activity, w[1].activity), (None, Some(activity)));
        assert_eq!(
            (&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..], w[1].data.len()),
            (&w[1].data[..12], 12)
        );
    }

    #[test]
    fn no_write_or_provider_inside_the_profiler_s_own_write() {
        // The fourth review, route 4: the runtime delivers a write to the
        // profiler's sessions inside the write; a relay from the delivery
        // wrote inside it again, without bound. The fake's call hook runs
        // inside its EventPipeWriteEvent, as the delivery would.
        let fake = FakeRuntime::with_info_version(12);
        let rt = handle(&fake);
        let provider = rt.event_pipe_create_provider("Relay").unwrap();
        let event = provider
            .define_event::<(i32,)>(&EventSpec::new("Relay", 1), &["n"])
            .unwrap();
        let seen: Arc<std::sync::Mutex<Vec<Result<()>>>> = Arc::default();
        let (inside, relay, again) = (seen.clone(), event.clone(), rt.clone());
        fake.on_call(move |_, method| {
            if method == "EventPipeWriteEvent" {
                let mut seen = inside.lock().unwrap();
                seen.push(relay.write((2,)));
                seen.push(again.event_pipe_create_provider("Inner").map(|_| ()));
            }
        });
        event.write((1,)).unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        assert_eq!(seen.len(), 2);
        for (r, call) in seen.iter().zip([
            "ICorProfilerInfo12::EventPipeWriteEvent",
            "ICorProfilerInfo12::EventPipeCreateProvider",
        ]) {
            match r {
                Err(e @ Error::WouldRecurse { call: c, .. }) if *c == call => {
                    assert_eq!(
                        e.hresult().0 as u32,
                        KnownHresult::CORPROF_E_UNSUPPORTED_CALL_SEQUENCE as u32
                    );
                    assert!(e
                        .to_string()
                        .starts_with(&format!("{call} refused (nothing was called)")));
                }
                other => panic!("{call} inside a write: {other:?}"),
            }
        }
        // One write reached the runtime; after it, writes go through again.
        assert_eq!(fake.call_count("EventPipeWriteEvent"), 1);
        fake.on_call(|_, _| {});
        event.write((3,)).unwrap();
        assert_eq!(fake.state().eventpipe.written.len(), 2);
    }

    #[test]
    fn provider_names_of_every_length() {
        let fake = FakeRuntime::with_info_version(12);
        let rt = handle(&fake);
        // 255 characters and the NUL fill the stack buffer exactly, which
        // the runtime calls short.
        for len in [1usize, 254, 255, 256, 600] {
            let name = "p".repeat(len);
            let provider = rt.event_pipe_create_provider(&name).unwrap();
            assert_eq!(
                provider.name_from_runtime().map_err(|e| (len, e)),
                Ok(name),
                "length {len}"
            );
        }
    }

    #[test]
    fn sessions_start_add_and_stop_once() {
        let fake = FakeRuntime::with_info_version(12);
        let rt = handle(&fake);
        let mut config = ProviderConfig::new("A", 0xF0, Level::Warning);
        config.filter = Some("k=v");
        let session = rt.event_pipe_start_session(&[config], true).unwrap();
        session
            .add_provider(&ProviderConfig::new("B", 1, Level::Verbose))
            .unwrap();
        assert_eq!(
            fake.state().eventpipe.sessions[&session.id()],
            vec![
                ("A".to_string(), 0xF0, 3, Some("k=v".to_string())),
                ("B".to_string(), 1, 5, None)
            ]
        );
        assert_eq!(fake.calls_of("EventPipeStartSession")[0].args, vec![1, 1]);
        let id = session.id();
        session.stop().unwrap();
        let dropped = rt
            .event_pipe_start_session(&[ProviderConfig::new("C", 1, Level::Error)], false)
            .unwrap();
        let dropped_id = dropped.id();
        drop(dropped);
        assert_eq!(fake.state().eventpipe.stopped, vec![id, dropped_id]);
        assert_eq!(fake.call_count("EventPipeStopSession"), 2);
    }

    #[test]
    fn provider_callbacks_see_enable_and_disable() {
        let fake = FakeRuntime::with_info_version(14);
        let rt = handle(&fake);
        let seen: Arc<std::sync::Mutex<Vec<(bool, u8, u64)>>> = Default::default();
        let s = seen.clone();
        let provider = rt
            .event_pipe_create_provider_with_callback("Cb-Provider", move |e| {
                s.lock()
                    .unwrap()
                    .push((e.enabled, e.level, e.match_any_keywords))
            })
            .unwrap();
        assert_eq!(provider.name_from_runtime().unwrap(), "Cb-Provider");
        let session = rt
            .event_pipe_start_session(
                &[ProviderConfig::new(
                    "Cb-Provider",
                    0x30,
                    Level::Informational,
                )],
                false,
            )
            .unwrap();
        drop(session);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(true, 4, 0x30), (false, 4, 0x30)]
        );
    }

    #[test]
    fn a_panicking_provider_callback_is_contained() {
        let fake = FakeRuntime::with_info_version(14);
        let rt = handle(&fake);
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        rt.event_pipe_create_provider_with_callback("Panicky", move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            panic!("in a provider callback")
        })
        .unwrap();
        let session = rt
            .event_pipe_start_session(&[ProviderConfig::new("Panicky", 1, Level::Verbose)], false)
            .unwrap();
        session.stop().unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn newer_methods_are_unsupported_on_older_runtimes() {
        let net31 = FakeRuntime::with_info_version(11);
        let rt = handle(&net31);
        for e in [
            rt.event_pipe_create_provider("x").map(|_| ()).unwrap_err(),
            rt.event_pipe_start_session(&[], false)
                .map(|_| ())
                .unwrap_err(),
        ] {
            assert!(
                matches!(
                    e,
                    Error::Unsupported {
                        needs: 12,
                        has: 11,
                        ..
                    }
                ),
                "{e:?}"
            );
        }
        let net7 = FakeRuntime::with_info_version(13);
        let e = handle(&net7)
            .event_pipe_create_provider_with_callback("x", |_| {})
            .unwrap_err();
        match e {
            Error::Unsupported {
                needs: 14, call, ..
            } => {
                assert_eq!(call, "ICorProfilerInfo14::EventPipeCreateProvider2")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_write_or_stop_after_the_runtime_retired() {
        let fake = FakeRuntime::with_info_version(12);
        let rt = handle(&fake);
        let provider = rt.event_pipe_create_provider("P").unwrap();
        let event = provider
            .define_event::<()>(&EventSpec::new("E", 1), &[])
            .unwrap();
        let session = rt
            .event_pipe_start_session(&[ProviderConfig::new("P", 1, Level::Verbose)], false)
            .unwrap();
        event.write(()).unwrap();
        rt.retire();
        let e = event.write(()).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_PROFILER_DETACHING"));
        assert!(matches!(
            provider.define_event::<()>(&EventSpec::new("Late", 2), &[]),
            Err(Error::Detached { .. })
        ));
        assert!(matches!(
            provider.name_from_runtime(),
            Err(Error::Detached { .. })
        ));
        assert!(matches!(
            session.add_provider(&ProviderConfig::new("Q", 1, Level::Verbose)),
            Err(Error::Detached { .. })
        ));
        drop(session);
        assert_eq!(fake.call_count("EventPipeWriteEvent"), 1);
        assert_eq!(fake.call_count("EventPipeStopSession"), 0);
        assert_eq!(fake.call_count("EventPipeDefineEvent"), 1);
        assert_eq!(fake.call_count("EventPipeAddProviderToSession"), 0);
    }

    /// A metadata blob as the runtime's generator writes it.
    fn metadata(id: u32, name: &str, params: &[(u32, &str)], v2: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&id.to_le_bytes());
        for u in name.encode_utf16().chain(Some(0)) {
            b.extend_from_slice(&u.to_le_bytes());
        }
        b.extend_from_slice(&0x10u64.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&(params.len() as u32).to_le_bytes());
        for (ty, n) in params {
            b.extend_from_slice(&ty.to_le_bytes());
            for u in n.encode_utf16().chain(Some(0)) {
                b.extend_from_slice(&u.to_le_bytes());
            }
        }
        b.extend_from_slice(v2);
        b
    }

    fn event<'a>(metadata: &'a [u8], data: &'a [u8]) -> EventPipeEvent<'a> {
        EventPipeEvent {
            // SAFETY: [test-fake] never passed to a runtime.
            provider: unsafe { ProviderRef::from_sys(0x10) },
            event_id: 7,
            event_version: 2,
            metadata,
            data,
            activity_id: None,
            related_activity_id: None,
            thread: RawThreadId(0),
            stack: &[],
        }
    }

    #[test]
    fn metadata_v1_and_v2_decode_payloads() {
        // V1 fields, then a V2 opcode tag.
        let blob = metadata(
            7,
            "Sample",
            &[
                (sys::COR_PRF_EVENTPIPE_INT32, "count"),
                (sys::COR_PRF_EVENTPIPE_STRING, "text"),
            ],
            &[1, 0, 0, 0, 1, 9],
        );
        let meta = EventMetadata::parse(&blob).unwrap();
        assert_eq!(
            (
                meta.id,
                meta.name.as_str(),
                meta.keywords,
                meta.version,
                meta.level,
                meta.opcode
            ),
            (7, "Sample", 0x10, 2, 5, 9)
        );
        let mut data = Vec::new();
        <(i32, String) as Payload>::encode(&(42, "ok"), &mut data);
        let e = event(&blob, &data);
        assert_eq!(
            e.values().unwrap(),
            vec![
                ("count".to_string(), EventValue::Int32(42)),
                ("text".to_string(), EventValue::String("ok".into()))
            ]
        );
        assert_eq!(e.decode::<(i32, String)>().unwrap(), (42, "ok".to_string()));
        assert!(matches!(
            e.decode::<(u32, String)>(),
            Err(Error::Malformed(_))
        ));

        // V2 parameters: an array and a nested object.
        let mut v2 = Vec::new();
        let mut params = Vec::new();
        params.extend_from_slice(&2u32.to_le_bytes());
        let field = |name: &str, ty: &[u32]| {
            let mut f = Vec::new();
            for u in name.encode_utf16().chain(Some(0)) {
                f.extend_from_slice(&u.to_le_bytes());
            }
            for t in ty {
                f.extend_from_slice(&t.to_le_bytes());
            }
            let mut out = ((f.len() + 4) as u32).to_le_bytes().to_vec();
            out.extend_from_slice(&f);
            out
        };
        params.extend(field(
            "values",
            &[sys::COR_PRF_EVENTPIPE_ARRAY, sys::COR_PRF_EVENTPIPE_INT16],
        ));
        let mut obj = field("pair", &[sys::COR_PRF_EVENTPIPE_OBJECT, 2]);
        obj.extend(field("k", &[sys::COR_PRF_EVENTPIPE_STRING]));
        obj.extend(field("v", &[sys::COR_PRF_EVENTPIPE_BYTE]));
        params.extend(obj);
        v2.extend_from_slice(&(params.len() as u32).to_le_bytes());
        v2.push(2);
        v2.extend(params);
        let blob = metadata(8, "Arrays", &[], &v2);
        let mut data = vec![3, 0, 1, 0, 2, 0, 0xFF, 0xFF];
        data.extend_from_slice(&[b'k', 0, 0, 0, 7]);
        let values = event(&blob, &data).values().unwrap();
        assert_eq!(
            values,
            vec![
                (
                    "values".to_string(),
                    EventValue::Array(vec![
                        EventValue::Int16(1),
                        EventValue::Int16(2),
                        EventValue::Int16(-1)
                    ])
                ),
                (
                    "pair".to_string(),
                    EventValue::Object(vec![
                        ("k".to_string(), EventValue::String("k".into())),
                        ("v".to_string(), EventValue::Byte(7))
                    ])
                )
            ]
        );
        // Truncated data is an error, never a read past the end.
        assert!(event(&blob, &data[..data.len() - 1]).values().is_err());
    }

    #[test]
    fn native_events_have_metadata_without_fields() {
        let blob = metadata(1, "", &[], &[]);
        let e = event(&blob, &[1, 0, 0, 0]);
        let msg = e.values().unwrap_err().to_string();
        assert!(msg.contains("manifest"), "{msg}");
        assert!(EventMetadata::parse(&[]).is_err());
        // Garbage is refused, not followed.
        assert!(EventMetadata::parse(&[1, 2, 3]).is_err());
    }

    #[test]
    fn every_field_type_round_trips() {
        type All = (bool, Char16, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);
        type More = (FileTime, GUID, String, Vec<f64>, Vec<bool>);
        let all: All = (
            true,
            Char16(0x263A),
            -1,
            255,
            -300,
            60000,
            -70000,
            4_000_000_000,
            i64::MIN,
            u64::MAX,
            1.5,
            -2.25,
        );
        let mut bytes = Vec::new();
        All::encode(&all, &mut bytes);
        assert_eq!(bytes.len(), 4 + 2 + 1 + 1 + 2 + 2 + 4 + 4 + 8 + 8 + 4 + 8);
        assert_eq!(All::decode(&bytes).unwrap(), all);
        let g = GUID::from_u128(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF);
        let more: More = (
            FileTime(42),
            g,
            "𝄞 clef".into(),
            vec![0.5, -0.5],
            vec![true, false],
        );
        let mut bytes = Vec::new();
        More::encode(
            &(more.0, more.1, more.2.as_str(), &more.3[..], &more.4[..]),
            &mut bytes,
        );
        assert_eq!(More::decode(&bytes).unwrap(), more);
        // Bytes left over are an error.
        bytes.push(0);
        assert!(More::decode(&bytes).is_err());
        assert_eq!(
            <More as Payload>::TYPES,
            &[
                FieldType::DateTime,
                FieldType::Guid,
                FieldType::String,
                FieldType::Array(payload::ElementType::Double),
                FieldType::Array(payload::ElementType::Boolean),
            ]
        );
    }

    #[test]
    fn no_detach_while_the_runtime_may_call_into_the_library() {
        let fake = FakeRuntime::with_info_version(14);
        let rt = handle(&fake);
        let session = rt
            .event_pipe_start_session(&[ProviderConfig::new("S", 1, Level::Verbose)], false)
            .unwrap();
        let refused = rt.request_profiler_detach(100).unwrap_err();
        assert!(matches!(refused, Error::Refused { .. }), "{refused:?}");
        drop(session);
        rt.request_profiler_detach(100).unwrap();

        // A provider callback stays with the runtime for good.
        let other = FakeRuntime::with_info_version(14);
        let rt = handle(&other);
        rt.event_pipe_create_provider_with_callback("Cb", |_| {})
            .unwrap();
        assert!(matches!(
            rt.request_profiler_detach(100),
            Err(Error::Refused { .. })
        ));
        assert_eq!(other.call_count("RequestProfilerDetach"), 0);
    }

    #[test]
    fn values_are_send_and_sync() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Provider>();
        check::<Event<(i32, String)>>();
        check::<Session>();
    }
}
