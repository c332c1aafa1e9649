//! Preallocated storage for walks made while threads are suspended.
//!
//! Nothing here grows after construction: pushing into a full buffer drops
//! the value and marks the result truncated, so no allocator call happens
//! while the runtime is suspended (rule 5 of the [module](super)).

use crate::context::TraceContext;
use crate::ids::{RawFunctionId, RawThreadId};
use crate::runtimes::RuntimeSlot;

/// Frames of many stacks, in one fixed-capacity array.
///
/// Each stack is a [`StackSample`]: a thread and a range of frames, stored
/// leaf first as the runtime reports them.
pub struct FrameBuffer {
    frames: Vec<RawFunctionId>,
    samples: Vec<StackSample>,
    frame_capacity: usize,
    sample_capacity: usize,
    max_depth: usize,
    /// The [`UnloadFence`](super::UnloadFence) that stamped the buffer and
    /// its unload count then ([`UnloadFence::begin_tick`](super::UnloadFence::begin_tick)).
    pub(crate) stamp: Option<(u64, u64)>,
}

/// One walked stack inside a [`FrameBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackSample {
    /// The thread that was walked.
    pub thread: RawThreadId,
    start: usize,
    len: usize,
    /// `true` if the stack had more frames than fitted.
    pub truncated: bool,
    /// The runtime whose suspended `DoStackSnapshot` walked this stack, if
    /// the SDK walked it itself (see [`walked`](Self::walked)).
    walked_in: Option<RuntimeSlot>,
    /// The thread's trace context when it was sampled, where it had one
    /// ([`crate::context`]).
    pub context: Option<TraceContext>,
}

impl StackSample {
    /// Whether every frame of this stack came from the SDK's own walk of the
    /// thread during this tick (a suspended `DoStackSnapshot`), rather than
    /// from [`FrameBuffer::push`]. Only such frames are known to name a live
    /// function (BOTR "Lifetime & Stability": a `FunctionID` is valid until
    /// its class unloads, and a function with a frame on a stack has not
    /// unloaded); the sampler hands only these to the runtime. Frames pushed
    /// through the public API (a user's stack source, the shadow stacks,
    /// which can keep frames of methods unloaded since) are named from the
    /// name cache or as unknown frames ([`super::UnloadFence`]).
    pub fn walked(&self) -> bool {
        self.walked_in.is_some()
    }

    /// Whether the SDK walked this stack itself in the runtime `slot`.
    pub(crate) fn walked_in(&self, slot: RuntimeSlot) -> bool {
        self.walked_in == Some(slot)
    }
}

// provenance: sample-buffer
impl FrameBuffer {
    /// Room for `max_stacks` stacks of up to `max_depth` frames each.
    pub fn new(max_stacks: usize, max_depth: usize) -> Self {
        let frame_capacity = max_stacks.saturating_mul(max_depth);
        FrameBuffer {
            frames: Vec::with_capacity(frame_capacity),
            samples: Vec::with_capacity(max_stacks),
            frame_capacity,
            sample_capacity: max_stacks,
            max_depth,
            stamp: None,
        }
    }

    /// Empties the buffer, keeping its memory.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.samples.clear();
    }

    /// Starts a stack for `thread`; `false` if there is no room for another.
    /// Its frames are unverified: the sampler never passes them to the
    /// runtime (see [`StackSample::walked`]).
    pub fn begin(&mut self, thread: RawThreadId) -> bool {
        self.begin_as(thread, None)
    }

    /// Starts a stack the SDK walks itself (`DoStackSnapshot` under the
    /// sampler's suspension); frames must then come from
    /// [`push_walked`](Self::push_walked).
    pub(crate) fn begin_walked(&mut self, thread: RawThreadId, runtime: RuntimeSlot) -> bool {
        self.begin_as(thread, Some(runtime))
    }

    fn begin_as(&mut self, thread: RawThreadId, walked_in: Option<RuntimeSlot>) -> bool {
        if self.samples.len() >= self.sample_capacity {
            return false;
        }
        self.samples.push(StackSample {
            thread,
            start: self.frames.len(),
            len: 0,
            truncated: false,
            walked_in,
            context: None,
        });
        true
    }

    /// Sets the trace context of the current stack (the one [`begin`](Self::begin)
    /// started): what the sampled thread was working for when it was sampled.
    pub fn set_context(&mut self, context: Option<TraceContext>) {
        if let Some(s) = self.samples.last_mut() {
            s.context = context;
        }
    }

    /// Appends a frame the runtime reported to the SDK's own walk.
    pub(crate) fn push_walked(&mut self, function: RawFunctionId) -> bool {
        self.push_as(function, true)
    }

    /// Appends a frame (leaf first) to the current stack; `false` when the
    /// stack is full (it is then marked truncated). Any `RawFunctionId` is
    /// accepted, so the stack becomes unverified ([`StackSample::walked`]
    /// turns `false`): a pushed ID may be forged or belong to a function
    /// unloaded since, and the runtime does not check a `FunctionID` it is
    /// given.
    pub fn push(&mut self, function: RawFunctionId) -> bool {
        self.push_as(function, false)
    }

    fn push_as(&mut self, function: RawFunctionId, walked: bool) -> bool {
        let Some(s) = self.samples.last_mut() else {
            return false;
        };
        if !walked {
            s.walked_in = None;
        }
        if s.len >= self.max_depth || self.frames.len() >= self.frame_capacity {
            s.truncated = true;
            return false;
        }
        self.frames.push(function);
        s.len += 1;
        true
    }

    /// Drops the current stack (e.g. its walk failed).
    pub fn abandon(&mut self) {
        if let Some(s) = self.samples.pop() {
            self.frames.truncate(s.start);
        }
    }

    /// The stacks taken since the last [`clear`](Self::clear).
    pub fn samples(&self) -> &[StackSample] {
        &self.samples
    }

    // provenance: sample-buffer
    /// The frames of `sample`, leaf first (`RawFunctionId(0)` = unmanaged run).
    ///
    /// `sample` should be one of [`samples`](Self::samples); a sample of
    /// another buffer (it is `Copy`) gives the frames of this buffer at its
    /// range, or none when the range lies beyond them, never a panic. Such
    /// frames are data: only [`FrameNamer`](super::FrameNamer) hands frames
    /// to the runtime, and it reads them from its own buffer by position.
    pub fn frames(&self, sample: &StackSample) -> &[RawFunctionId] {
        sample
            .start
            .checked_add(sample.len)
            .and_then(|end| self.frames.get(sample.start..end))
            .unwrap_or(&[])
    }

    /// `true` if nothing has reallocated: the capacity is the one from `new`.
    pub fn capacity_unchanged(&self) -> bool {
        self.frames.capacity() >= self.frame_capacity
            && self.samples.capacity() >= self.sample_capacity
            && self.frames.len() <= self.frame_capacity
    }
}

/// A fixed-capacity list of `ThreadID`s, filled by `EnumThreads`.
pub struct ThreadList {
    threads: Vec<usize>,
    len: usize,
    /// Threads the runtime listed that did not fit.
    pub overflow: usize,
    /// The suspension that filled the list (0: none).
    pub(crate) serial: u64,
}

impl ThreadList {
    /// Room for `capacity` threads.
    pub fn new(capacity: usize) -> Self {
        ThreadList {
            threads: vec![0; capacity],
            len: 0,
            overflow: 0,
            serial: 0,
        }
    }

    /// The listed threads.
    pub fn threads(&self) -> impl Iterator<Item = RawThreadId> + '_ {
        self.threads[..self.len].iter().map(|&t| RawThreadId(t))
    }

    /// Number of listed threads.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` if no thread is listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.overflow = 0;
    }

    pub(crate) fn spare(&mut self) -> &mut [usize] {
        &mut self.threads[self.len..]
    }

    pub(crate) fn added(&mut self, n: usize) {
        self.len = (self.len + n).min(self.threads.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sdk_walks_are_walked() {
        let mut b = FrameBuffer::new(3, 4);
        assert!(b.begin_walked(RawThreadId(1), RuntimeSlot(0)));
        b.push_walked(RawFunctionId(8));
        assert!(b.begin_walked(RawThreadId(2), RuntimeSlot(0)));
        b.push_walked(RawFunctionId(8));
        b.push(RawFunctionId(0x4141_4141_4140));
        assert!(b.begin(RawThreadId(3)));
        b.push(RawFunctionId(8));
        let s = b.samples().to_vec();
        assert!(s[0].walked(), "the SDK's own walk");
        assert!(!s[1].walked(), "a public push taints the stack");
        assert!(!s[2].walked(), "a public stack");
    }

    #[test]
    fn stacks_are_bounded_and_memory_is_kept() {
        let mut b = FrameBuffer::new(2, 3);
        assert!(b.begin(RawThreadId(1)));
        for f in 1..=5 {
            b.push(RawFunctionId(f));
        }
        assert!(b.begin(RawThreadId(2)));
        b.push(RawFunctionId(9));
        assert!(!b.begin(RawThreadId(3)), "third stack does not fit");
        let s = b.samples().to_vec();
        assert_eq!(s.len(), 2);
        assert_eq!(
            b.frames(&s[0]),
            &[RawFunctionId(1), RawFunctionId(2), RawFunctionId(3)]
        );
        assert!(s[0].truncated);
        assert!(!s[0].walked() && !s[1].walked());
        assert_eq!(b.frames(&s[1]), &[RawFunctionId(9)]);
        assert!(!s[1].truncated);
        b.abandon();
        assert_eq!(b.samples().len(), 1);
        assert!(b.capacity_unchanged());
        b.clear();
        assert!(b.samples().is_empty());
        assert!(b.capacity_unchanged());
    }
}
