//! Naming the frames of a tick after the runtime resumed: the
//! [`UnloadFence`], which keeps unloads from freeing the functions of the
//! frames being named.

use super::{FrameBuffer, SamplingThread, StackSample};
use crate::error::Result;
use crate::event_mask::{EventMask, EventMasks, HighEventMask};
use crate::ids::{ClassId, ModuleId, RawFunctionId};
use crate::info::ProfilerInfo;
use crate::names::NameCache;
use crate::runtimes::RuntimeSlot;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Weak};

/// Name used for a run of unmanaged frames (a `FunctionID` of 0).
pub const UNMANAGED_FRAME: &str = "[unmanaged]";
/// Name used for a function whose name could not be resolved.
pub const UNKNOWN_FRAME: &str = "[unknown]";
/// Name used for an address of a stack that neither the code map nor the
/// runtime could place in a function, and that lies in no native module
/// ([`UNPLACED`]).
pub const UNPLACED_FRAME: &str = "[unplaced]";

/// The frame of a [`FrameBuffer`] for an address nothing could place (a
/// value no `FunctionID` has: function descriptors are aligned). Never
/// handed to the runtime; named [`UNPLACED_FRAME`].
pub const UNPLACED: RawFunctionId = RawFunctionId(usize::MAX);

/// Unloads begun in this process, counted by every fence after its hooks
/// ran and before its own count: a stack taken outside any fence (a signal
/// handler's) carries the epoch it was taken in, and its reader drops it
/// when the epoch has moved since.
static UNLOAD_EPOCH: AtomicU64 = AtomicU64::new(0);

// signal-context: async-signal-safe: one atomic load
/// The process-wide unload epoch (see [`UNLOAD_EPOCH`]). Async-signal-safe.
pub(crate) fn unload_epoch() -> u64 {
    UNLOAD_EPOCH.load(SeqCst)
}

/// What began to unload, as the fence tells its hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unloading {
    /// `ClassUnloadStarted` (the raw `ClassID`).
    Class(usize),
    /// `ModuleUnloadStarted` (the raw `ModuleID`).
    Module(usize),
    /// `DynamicMethodUnloaded`.
    DynamicMethod(RawFunctionId),
}

/// SDK parts that keep something of loaded code and must drop it before an
/// unload is counted (the [`CodeMap`](super::CodeMap)).
pub(crate) trait UnloadHook: Send + Sync {
    /// Called at the start of the unload callback, before the fence counts
    /// the unload and before the runtime frees anything of it.
    fn unloading(&self, what: Unloading);
}

/// Distinguishes fences, so a buffer stamped by one is not resolved
/// against another's count.
static NEXT_FENCE: AtomicU64 = AtomicU64::new(1);

/// Keeps the `FunctionID`s of a tick nameable after the runtime resumed.
///
/// A sampler walks stacks while the runtime is suspended and names their
/// functions afterwards, when the runtime runs again (naming may take locks
/// and allocate, which rule 4 of the [module](crate::stackwalk) forbids during a
/// suspension). By then a class or module may have begun unloading, and a
/// `FunctionID` is only valid until its class unloads (BOTR, "Profiling":
/// IDs are valid until the matching unload callback); the runtime does not
/// check an ID it is handed, so naming a dangling one reads freed memory.
///
/// The fence closes that window. It is an SDK component that hears
/// `ClassUnloadStarted`, `ModuleUnloadStarted` and `DynamicMethodUnloaded`;
/// each of them counts an unload and then waits until no
/// [`resolve`](UnloadFence::resolve) is running, so the unload cannot
/// proceed while frames are being named. A resolve lets its frames reach
/// the runtime only when no unload was counted since the buffer was
/// stamped ([`UnloadFence::begin_tick`]), which happens before the walk
/// that filled it, and only for frames the SDK itself walked this tick
/// ([`StackSample::walked`]) or functions whose ELT record is live. Any
/// other frame (one pushed through [`FrameBuffer::push`](crate::stackwalk::FrameBuffer::push),
/// a shadow-stack frame) is named from the cache or as
/// [`UNKNOWN_FRAME`].
pub struct UnloadFence {
    id: u64,
    slot: RuntimeSlot,
    unloads: AtomicU64,
    /// How many resolves are running.
    resolving: AtomicUsize,
    /// Dynamic methods unloaded since the last [`take_forgotten`](Self::take_forgotten).
    forgotten: Mutex<Vec<RawFunctionId>>,
    /// Called at each unload before it is counted.
    hooks: Mutex<Vec<Weak<dyn UnloadHook>>>,
}

impl UnloadFence {
    /// A fence for the runtime of `info`, registered as an SDK component
    /// (call it from `Initialize` or `InitializeForAttach`). The SDK adds
    /// `MONITOR_CLASS_LOADS`, `MONITOR_MODULE_LOADS` and, where the runtime
    /// has `ICorProfilerInfo10`, `HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS` to
    /// the event mask.
    pub fn register(info: &ProfilerInfo) -> Result<Arc<UnloadFence>> {
        let fence = Arc::new(UnloadFence {
            id: NEXT_FENCE.fetch_add(1, SeqCst),
            slot: info.runtime_slot(),
            unloads: AtomicU64::new(0),
            resolving: AtomicUsize::new(0),
            forgotten: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
        });
        info.register(Arc::new(FenceComponent {
            fence: fence.clone(),
            dynamic_unloads: info.has_info(10),
        }))?;
        Ok(fence)
    }

    // provenance: sample-buffer
    /// Clears `buffer` for a new tick and stamps it with this fence and its
    /// unload count; returns that count. Call it before the walk that fills
    /// the buffer: an unload counted after the stamp keeps the buffer's
    /// frames from the runtime.
    pub fn begin_tick(&self, buffer: &mut FrameBuffer) -> u64 {
        buffer.clear();
        let count = self.unloads.load(SeqCst);
        buffer.stamp = Some((self.id, count));
        count
    }

    /// How many unloads the fence has counted. Names cached by
    /// `FunctionID` should be dropped when it changes: the runtime may give
    /// an unloaded method's ID to another method.
    pub fn unloads(&self) -> u64 {
        self.unloads.load(SeqCst)
    }

    /// Dynamic methods unloaded since the last call
    /// (`DynamicMethodUnloaded`): forget anything cached under their IDs.
    pub fn take_forgotten(&self) -> Vec<RawFunctionId> {
        std::mem::take(&mut *self.forgotten.lock().unwrap_or_else(|p| p.into_inner()))
    }

    // provenance: sample-buffer
    /// Runs `body` with a [`FrameNamer`] for the frames of `buffer`; unloads
    /// wait until it returns. The namer holds `buffer` and names its frames
    /// by position ([`FrameNamer::frames`], [`FrameNamer::name`]), so only
    /// `FunctionID`s of this buffer can reach the runtime, and only if
    /// `buffer` was stamped by this fence, no unload was counted since, and
    /// `thread` samples this fence's runtime.
    ///
    /// Keep `body` short: every unload of the process waits for it.
    pub fn resolve<R>(
        &self,
        thread: &SamplingThread,
        buffer: &FrameBuffer,
        body: impl FnOnce(&FrameNamer<'_>) -> R,
    ) -> R {
        self.resolving.fetch_add(1, SeqCst);
        let _done = Resolving(&self.resolving);
        // Announce, then check: an unload counted after this load waits for
        // `_done`; one counted before it changed the count.
        let unchanged = buffer.stamp == Some((self.id, self.unloads.load(SeqCst)))
            && thread.runtime().runtime_slot() == self.slot;
        body(&FrameNamer {
            info: thread.info(),
            buffer,
            serial: NEXT_RESOLVE.fetch_add(1, SeqCst),
            unloads_unchanged: unchanged,
        })
    }

    /// A fence of runtime `slot` that hears nothing, for the SDK's tests.
    #[cfg(test)]
    pub(crate) fn for_test(slot: RuntimeSlot) -> Arc<UnloadFence> {
        Arc::new(UnloadFence {
            id: NEXT_FENCE.fetch_add(1, SeqCst),
            slot,
            unloads: AtomicU64::new(0),
            resolving: AtomicUsize::new(0),
            forgotten: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
        })
    }

    /// The runtime whose unloads the fence hears.
    pub(crate) fn runtime_slot(&self) -> RuntimeSlot {
        self.slot
    }

    /// Adds a hook called at every unload, before it is counted.
    pub(crate) fn add_hook(&self, hook: Weak<dyn UnloadHook>) {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
    }

    fn unloading(&self, what: Unloading) {
        let hooks: Vec<Arc<dyn UnloadHook>> = self
            .hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for hook in hooks {
            hook.unloading(what);
        }
        UNLOAD_EPOCH.fetch_add(1, SeqCst);
        self.unloads.fetch_add(1, SeqCst);
        while self.resolving.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

/// Ends a resolve, also when its body panics.
struct Resolving<'f>(&'f AtomicUsize);

impl Drop for Resolving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// A function's name as a [`FrameNamer`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameName {
    /// `Namespace.Type::Method`, [`UNMANAGED_FRAME`] or [`UNKNOWN_FRAME`].
    pub function: Arc<str>,
    /// The file name of the function's module, when the runtime was asked
    /// (`None` for dynamic modules and frames named from the cache).
    pub module: Option<String>,
    /// `false` for a frame the namer could not name now but might later
    /// (do not cache it under its `FunctionID`).
    pub is_final: bool,
}

/// Names the frames of one tick inside [`UnloadFence::resolve`].
///
/// The namer holds the buffer being resolved and hands out its frames as
/// [`FrameRef`]s, by position; [`name`](Self::name) takes only those. So
/// the `FunctionID` that may reach the runtime is always read from this
/// buffer, for a frame of a stack this buffer holds, whose walk mark and
/// unload stamp the fence checked: no caller-supplied ID (a forged one, or
/// one kept from an earlier tick whose dynamic method has gone since) and
/// no sample of another buffer can make the namer call the runtime.
pub struct FrameNamer<'t> {
    info: ProfilerInfo<'t>,
    buffer: &'t FrameBuffer,
    /// Tells this resolve's frames from another's.
    serial: u64,
    unloads_unchanged: bool,
}

/// Distinguishes resolves, so a [`FrameRef`] of one namer is refused by
/// another (nested resolves both live at once).
static NEXT_RESOLVE: AtomicU64 = AtomicU64::new(1);

/// A frame of the buffer a [`FrameNamer`] resolves: the position of a frame
/// in it, made only by that namer ([`FrameNamer::frames`]) and usable only
/// while it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef<'n> {
    serial: u64,
    sample: usize,
    index: usize,
    function: RawFunctionId,
    _namer: PhantomData<&'n ()>,
}

impl FrameRef<'_> {
    /// The frame's function as the walk reported it (`RawFunctionId(0)`
    /// for a run of unmanaged frames), e.g. as a cache key.
    pub fn function(&self) -> RawFunctionId {
        self.function
    }
    /// The number of its stack in the buffer ([`FrameBuffer::samples`]).
    pub fn sample(&self) -> usize {
        self.sample
    }
    /// Its position in that stack, leaf first.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl<'t> FrameNamer<'t> {
    /// A namer outside a fence, for the SDK's unit tests.
    #[cfg(test)]
    pub(crate) fn for_test(info: ProfilerInfo<'t>, buffer: &'t FrameBuffer) -> Self {
        FrameNamer {
            info,
            buffer,
            serial: NEXT_RESOLVE.fetch_add(1, SeqCst),
            unloads_unchanged: true,
        }
    }

    /// The scope the namer calls the runtime in (the sampling thread's).
    pub(crate) fn info(&self) -> &ProfilerInfo<'t> {
        &self.info
    }

    /// Whether no unload was counted between the buffer's stamp and this
    /// resolve (then no unload can proceed until it ends).
    pub(crate) fn unloads_unchanged(&self) -> bool {
        self.unloads_unchanged
    }

    /// The stacks of the buffer being resolved.
    pub fn samples(&self) -> &'t [StackSample] {
        self.buffer.samples()
    }

    /// The frames of stack number `sample` of the buffer being resolved,
    /// leaf first (none for a number beyond [`samples`](Self::samples)).
    pub fn frames(&self, sample: usize) -> impl DoubleEndedIterator<Item = FrameRef<'_>> + '_ {
        let frames = match self.buffer.samples().get(sample) {
            Some(s) => self.buffer.frames(s),
            None => &[],
        };
        let serial = self.serial;
        frames
            .iter()
            .enumerate()
            .map(move |(index, &function)| FrameRef {
                serial,
                sample,
                index,
                function,
                _namer: PhantomData,
            })
    }

    // provenance: sample-buffer
    /// The name of `frame`, a frame of the buffer this namer resolves.
    ///
    /// The runtime is asked only for a frame of a stack the SDK walked
    /// itself this tick in this runtime (or of a function whose ELT record
    /// is live), when no unload began since the buffer was stamped; any
    /// other frame is named from `names`' cache or as [`UNKNOWN_FRAME`].
    /// A frame of another namer (a nested resolve) is refused with
    /// [`Error::WrongPartner`](crate::error::Error::WrongPartner).
    pub fn name(&self, names: &NameCache, frame: FrameRef<'_>) -> Result<FrameName> {
        let sample = match self.buffer.samples().get(frame.sample()) {
            Some(s) if frame.serial == self.serial => s,
            _ => {
                return Err(crate::error::Error::WrongPartner {
                    call: "stackwalk::FrameNamer::name",
                    why: format!(
                        "frame {} of stack {} belongs to another resolve's buffer; a namer \
                         names only the frames it hands out (FrameNamer::frames)",
                        frame.index, frame.sample
                    ),
                })
            }
        };
        // Read from the held buffer, not from the caller: the ID is this
        // buffer's frame at that position.
        let Some(&function) = self.buffer.frames(sample).get(frame.index()) else {
            return Err(crate::error::Error::WrongPartner {
                call: "stackwalk::FrameNamer::name",
                why: format!(
                    "stack {} has no frame {}; a namer names only the frames it hands out",
                    frame.sample, frame.index
                ),
            });
        };
        let slot = self.info.runtime_slot();
        let may_call_runtime = runtime_may_name(sample, slot, self.unloads_unchanged, || {
            crate::elt::current_binding(slot, function).is_some()
        });
        Ok(frame_name(&self.info, names, function, may_call_runtime))
    }
}

/// Whether a frame of `sample` may be handed to the runtime for naming:
/// only if no unload began during the tick (`unloads_unchanged`), and
/// only if the SDK knows the function is loaded now: a stack the SDK
/// walked itself this tick in the same runtime (`slot`), or a function the ELT mapper hooked whose
/// record is still live (`hooked_now`: the SDK releases an ELT record at
/// the function's `ClassUnloadStarted`, `ModuleUnloadStarted` or
/// `DynamicMethodUnloaded`, and the fence's callbacks for those wait for
/// running resolves before the unload proceeds).
pub(crate) fn runtime_may_name(
    sample: &StackSample,
    slot: RuntimeSlot,
    unloads_unchanged: bool,
    hooked_now: impl FnOnce() -> bool,
) -> bool {
    unloads_unchanged && (sample.walked_in(slot) || hooked_now())
}

/// The name of a sampled function; see [`FrameName`].
///
/// `may_call_runtime` is true only for frames [`runtime_may_name`]
/// accepts; any other frame is named from the cache or as an unknown frame,
/// since the runtime does not check a `FunctionID` and one of an unloaded
/// class is dangling (BOTR: a FunctionID is valid until its class unloads).
pub(crate) fn frame_name(
    info: &ProfilerInfo,
    names: &NameCache,
    f: RawFunctionId,
    may_call_runtime: bool,
) -> FrameName {
    if f.0 == 0 {
        return FrameName {
            function: UNMANAGED_FRAME.into(),
            module: None,
            is_final: true,
        };
    }
    if f == UNPLACED {
        return FrameName {
            function: UNPLACED_FRAME.into(),
            module: None,
            is_final: true,
        };
    }
    if !may_call_runtime {
        return match names.cached_function_name(f) {
            Some(n) => FrameName {
                function: n,
                module: None,
                is_final: true,
            },
            None => FrameName {
                function: UNKNOWN_FRAME.into(),
                module: None,
                is_final: false,
            },
        };
    }
    // SAFETY: [id-scope] `may_call_runtime` is set only for frames read by position from
    // the buffer being resolved (FrameNamer::name), of a stack that
    // the SDK walked with DoStackSnapshot this tick (`StackSample::walked`,
    // which no public push can keep set), or of a function whose ELT record
    // is live (released at its unload callbacks): the function was loaded
    // when the buffer was stamped, and no ClassUnloadStarted,
    // ModuleUnloadStarted or DynamicMethodUnloaded has begun since (the
    // fence's count is unchanged, and any later one waits in the fence for
    // this resolve to end before it returns and lets the unload proceed),
    // so the FunctionID still names that function (BOTR: a FunctionID is
    // valid until its class unloads).
    let id = unsafe { f.assume_valid() };
    let module = info
        .function_info(id)
        .and_then(|fi| info.module_info(fi.module))
        .ok()
        .and_then(|m| module_file_name(&m.name));
    let function = match names.function_name(info, id) {
        Ok(n) if !n.is_empty() => n,
        _ => UNKNOWN_FRAME.into(),
    };
    FrameName {
        function,
        module,
        is_final: true,
    }
}

/// The file name of a module path (either separator: Windows runtimes give
/// `C:\...\x.dll`), `None` for dynamic modules (no path).
fn module_file_name(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    (!name.is_empty()).then(|| name.to_string())
}

/// The SDK component behind [`UnloadFence::register`].
struct FenceComponent {
    fence: Arc<UnloadFence>,
    dynamic_unloads: bool,
}

impl crate::component::Component for FenceComponent {
    fn name(&self) -> &'static str {
        "unload-fence"
    }

    fn masks(&self) -> EventMasks {
        EventMasks {
            low: EventMask::MONITOR_CLASS_LOADS | EventMask::MONITOR_MODULE_LOADS,
            high: if self.dynamic_unloads {
                HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS
            } else {
                HighEventMask::empty()
            },
        }
    }

    fn class_unload_started(&self, _info: &ProfilerInfo, class: ClassId<'_>) {
        self.fence.unloading(Unloading::Class(class.to_raw().0));
    }

    fn module_unload_started(&self, _info: &ProfilerInfo, module: ModuleId<'_>) {
        self.fence.unloading(Unloading::Module(module.to_raw().0));
    }

    fn dynamic_method_unloaded(&self, _info: &ProfilerInfo, function: RawFunctionId) {
        self.fence
            .forgotten
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(function);
        self.fence.unloading(Unloading::DynamicMethod(function));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RawThreadId;

    #[test]
    fn module_file_names() {
        assert_eq!(module_file_name("/a/b/x.dll").as_deref(), Some("x.dll"));
        assert_eq!(module_file_name("C:\\a\\y.dll").as_deref(), Some("y.dll"));
        assert_eq!(module_file_name(""), None);
    }

    #[test]
    fn only_walked_frames_of_an_unchanged_tick_reach_the_runtime() {
        let mut b = FrameBuffer::new(2, 2);
        let (a, b2) = (RuntimeSlot(0), RuntimeSlot(1));
        assert!(b.begin_walked(RawThreadId(1), a));
        assert!(b.begin(RawThreadId(2)));
        let (walked, pushed) = (b.samples()[0], b.samples()[1]);
        assert!(runtime_may_name(&walked, a, true, || false));
        assert!(
            !runtime_may_name(&walked, b2, true, || false),
            "another runtime's walk"
        );
        assert!(!runtime_may_name(&walked, a, false, || true));
        assert!(!runtime_may_name(&pushed, a, true, || false));
        assert!(runtime_may_name(&pushed, a, true, || true));
    }
}
