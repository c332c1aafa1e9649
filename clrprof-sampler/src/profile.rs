//! The sampled profile: distinct stacks per thread, with counts.

use super::interner::Names;
use super::labels::Contexts;
use super::stacks::StackMap;
use clrprof::context::TraceContext;
use clrprof::ids::RawThreadId;
use clrprof::output::push_json_string;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::SystemTime;

/// Distinct stacks (root first, as indices into the frame names) and how
/// often each was seen, per thread.
///
/// Besides the sampled stacks a profile can hold allocations
/// ([`Profile::add_allocations`]): an allocation tracer that resolves its
/// stacks with the same [`intern_frame`](Profile::intern_frame) feeds the
/// same profile, and the pprof output ([`Profile::write_pprof`]) then carries
/// `alloc_objects`/`alloc_space` sample types beside the CPU ones.
/// The wall weight of a kept sample time that is not a wall-time sample
/// (a signal source's CPU-time sample; [`Profile::add_weighted_time`]).
pub const NOT_WALL: u64 = u64::MAX;

/// A kept sample time: (Unix time in ns, CPU ns, wall ns).
pub(crate) type SampleTime = (u64, u64, u64);

#[derive(Default, Debug, Clone)]
pub struct Profile {
    names: Names,
    /// The module (file name) of each frame name, where known, as an index
    /// into `module_names`.
    modules: Vec<Option<u32>>,
    module_names: Vec<Arc<str>>,
    /// Samples per (thread, stack): counting one allocates nothing unless
    /// the stack is new.
    stacks: StackMap<u64>,
    /// Allocation counts and bytes per stack (an allocation tracer's).
    allocations: StackMap<(u64, u64)>,
    /// CPU time per (thread, stack), in nanoseconds: what the thread's OS
    /// thread used between the tick before and the tick that took the stack.
    cpu: StackMap<u64>,
    /// Whether CPU time was measured (the pprof output then has a
    /// `cpu/nanoseconds` sample type).
    cpu_measured: bool,
    /// Wall time per (thread, stack), in nanoseconds, for samples that
    /// carry their own weight (the signal source's); the `wall` column is
    /// `count × period` for the others.
    wall: StackMap<u64>,
    /// Whether samples with their own wall-time weight were added.
    wall_weighted: bool,
    /// Thread names (`Thread.Name`, from `ThreadNameChanged`), kept across
    /// periods: the pprof `thread` label.
    thread_names: HashMap<RawThreadId, Arc<str>>,
    samples: u64,
    truncated: u64,
    empty: u64,
    /// When the profile (or its period) began and ended.
    start: Option<SystemTime>,
    end: Option<SystemTime>,
    /// The runtime's version (`major.minor.build`), a label in pprof output.
    runtime: Option<Arc<str>>,
    /// The sampling period, in nanoseconds (0: unknown).
    period_nanos: u64,
    /// The distinct trace contexts of the samples: a sample's entry in
    /// `stacks` and `cpu` is tagged with its context's index here.
    contexts: Contexts,
    /// How many samples were taken in a trace context.
    labelled: u64,
    /// Whether each sample's time (and CPU time) is kept, not only counts
    /// ([`Profile::set_keep_times`]; OTLP's per-sample timestamps).
    keep_times: bool,
    /// Per (thread, context tag, stack): (Unix time in ns, CPU ns, wall ns)
    /// of each sample, when `keep_times` (wall 0: one period; a signal
    /// source's CPU-time sample has wall [`NOT_WALL`]).
    times: StackMap<Vec<SampleTime>>,
}

impl Profile {
    /// An empty profile.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of frame name `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        self.names.intern(name)
    }

    /// The index of frame name `name` of module `module` (a file name,
    /// e.g. `hot.exe`), adding it if new. A name seen first without a module
    /// gets the module given later.
    pub fn intern_frame(&mut self, name: &str, module: Option<&str>) -> u32 {
        let i = self.intern(name);
        let slot = i as usize;
        if self.modules.len() <= slot {
            self.modules.resize(slot + 1, None);
        }
        if let (None, Some(module)) = (self.modules[slot], module) {
            let m = match self.module_names.iter().position(|m| &**m == module) {
                Some(m) => m as u32,
                None => {
                    self.module_names.push(module.into());
                    (self.module_names.len() - 1) as u32
                }
            };
            self.modules[slot] = Some(m);
        }
        i
    }

    /// Counts one sample of `thread` with `stack` (root first, interned).
    pub fn add(&mut self, thread: RawThreadId, stack: &[u32], truncated: bool) {
        self.add_n(thread, stack, 1, truncated);
    }

    /// Counts `n` samples of `thread` with `stack` (root first, interned).
    pub fn add_n(&mut self, thread: RawThreadId, stack: &[u32], n: u64, truncated: bool) {
        self.add_n_in_context(thread, stack, n, truncated, None);
    }

    /// Counts `n` samples of `thread` with `stack` (root first, interned),
    /// taken while the thread worked in trace context `context` (see
    /// [`crate::labels`]): samples of different contexts are kept apart.
    pub fn add_n_in_context(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        n: u64,
        truncated: bool,
        context: Option<&TraceContext>,
    ) {
        self.samples += n;
        if truncated {
            self.truncated += n;
        }
        if stack.is_empty() {
            self.empty += n;
        }
        if context.is_some() {
            self.labelled += n;
        }
        let tag = self.contexts.tag(context);
        self.stacks.update_tagged(thread, tag, stack, |c| *c += n);
    }

    /// Counts `count` allocations of `bytes` bytes in all made by `thread`
    /// at `stack` (root first, interned): how an allocation tracer feeds the
    /// profile (e.g. from `ObjectAllocated`, with the object's size from
    /// `GetObjectSize2` and the stack from a walk of the allocating thread).
    pub fn add_allocations(&mut self, thread: RawThreadId, stack: &[u32], count: u64, bytes: u64) {
        self.allocations.update(thread, stack, |e| {
            e.0 += count;
            e.1 += bytes;
        });
    }

    /// Counts one sample of `thread` with `stack` (root first, interned)
    /// that stands for `nanos` of wall time (a signal source's sample of one
    /// thread of several asked in turn: its weight is the tick's period
    /// times the threads per thread asked). A profile with such samples
    /// writes their weights in its `wall` column.
    pub fn add_wall(&mut self, thread: RawThreadId, stack: &[u32], nanos: u64, truncated: bool) {
        self.add_wall_in_context(thread, stack, nanos, truncated, None);
    }

    /// [`add_wall`](Self::add_wall) of a sample taken in trace context
    /// `context`.
    pub fn add_wall_in_context(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        nanos: u64,
        truncated: bool,
        context: Option<&TraceContext>,
    ) {
        self.add_n_in_context(thread, stack, 1, truncated, context);
        self.add_wall_ns_in_context(thread, stack, nanos, context);
    }

    /// Adds `nanos` of wall time to (`thread`, `stack`) without counting a
    /// sample (see [`add_wall`](Self::add_wall)).
    pub fn add_wall_ns(&mut self, thread: RawThreadId, stack: &[u32], nanos: u64) {
        self.add_wall_ns_in_context(thread, stack, nanos, None);
    }

    /// [`add_wall_ns`](Self::add_wall_ns) in trace context `context`.
    pub fn add_wall_ns_in_context(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        nanos: u64,
        context: Option<&TraceContext>,
    ) {
        self.wall_weighted = true;
        let tag = self.contexts.tag(context);
        self.wall.update_tagged(thread, tag, stack, |c| *c += nanos);
    }

    /// Whether samples carry their own wall-time weight
    /// ([`add_wall`](Self::add_wall)).
    pub fn wall_weighted(&self) -> bool {
        self.wall_weighted
    }

    /// Weighted wall time per stack: (thread, root-first frame indices,
    /// nanoseconds).
    pub fn wall_stacks(&self) -> impl Iterator<Item = (RawThreadId, &[u32], u64)> {
        self.wall.iter().map(|(t, s, n)| (t, s, *n))
    }

    /// Adds `nanos` of CPU time to (`thread`, `stack`) (root first,
    /// interned) and marks the profile as one that measures CPU time.
    pub fn add_cpu(&mut self, thread: RawThreadId, stack: &[u32], nanos: u64) {
        self.add_cpu_in_context(thread, stack, nanos, None);
    }

    /// Adds `nanos` of CPU time to (`thread`, `stack`) in trace context
    /// `context`.
    pub fn add_cpu_in_context(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        nanos: u64,
        context: Option<&TraceContext>,
    ) {
        self.cpu_measured = true;
        let tag = self.contexts.tag(context);
        self.cpu.update_tagged(thread, tag, stack, |c| *c += nanos);
    }

    /// Sampled stacks with the trace context they were taken in: (thread,
    /// context, root-first frame indices, count).
    pub fn stacks_in_context(
        &self,
    ) -> impl Iterator<Item = (RawThreadId, Option<&TraceContext>, &[u32], u64)> {
        self.stacks
            .iter_tagged()
            .map(|(t, tag, s, n)| (t, self.contexts.get(tag), s, *n))
    }

    /// CPU time per stack with the trace context it was used in: (thread,
    /// context, root-first frame indices, nanoseconds).
    pub fn cpu_stacks_in_context(
        &self,
    ) -> impl Iterator<Item = (RawThreadId, Option<&TraceContext>, &[u32], u64)> {
        self.cpu
            .iter_tagged()
            .map(|(t, tag, s, n)| (t, self.contexts.get(tag), s, *n))
    }

    /// The endpoint of a sample's trace context: the name read from a file,
    /// else the process's endpoint table's (see [`crate::labels`]).
    pub fn endpoint_of(&self, context: &TraceContext) -> Option<std::sync::Arc<str>> {
        self.contexts.endpoint(self.contexts.find(context)?)
    }

    /// Keeps (or stops keeping) the time of every sample beside the counts
    /// (8 + 8 bytes a sample until its period is taken); what OTLP
    /// profiles' per-sample timestamps need.
    pub fn set_keep_times(&mut self, keep: bool) {
        self.keep_times = keep;
    }

    /// Whether sample times are kept.
    pub fn keeps_times(&self) -> bool {
        self.keep_times
    }

    /// Records when a sample of (`thread`, `stack`, `context`) was taken
    /// (Unix time in nanoseconds) and the CPU time it was given, if the
    /// profile keeps times ([`set_keep_times`](Self::set_keep_times)).
    ///
    /// A sample taken before the period's start (a tick whose threads were
    /// still being walked when [`take_period`](Self::take_period) began the
    /// period) moves the start back to it: a period covers its samples'
    /// times, and may overlap the previous period by that much.
    pub fn add_time(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        context: Option<&TraceContext>,
        at_unix_nanos: u64,
        cpu_nanos: u64,
    ) {
        self.add_weighted_time(thread, stack, context, at_unix_nanos, cpu_nanos, 0);
    }

    /// [`add_time`](Self::add_time) of a sample that carries its own
    /// wall-time weight (`wall_nanos`; [`NOT_WALL`] for a CPU-time sample,
    /// 0 for one period).
    pub fn add_weighted_time(
        &mut self,
        thread: RawThreadId,
        stack: &[u32],
        context: Option<&TraceContext>,
        at_unix_nanos: u64,
        cpu_nanos: u64,
        wall_nanos: u64,
    ) {
        if !self.keep_times {
            return;
        }
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(at_unix_nanos);
        if self.start.is_some_and(|s| at < s) {
            self.start = Some(at);
        }
        let tag = self.contexts.tag(context);
        self.times.update_tagged(thread, tag, stack, |v| {
            v.push((at_unix_nanos, cpu_nanos, wall_nanos))
        });
    }

    /// Sample times per (thread, context tag, stack) (for encoders).
    pub(crate) fn tagged_times(
        &self,
    ) -> impl Iterator<Item = (RawThreadId, u32, &[u32], &[SampleTime])> {
        self.times
            .iter_tagged()
            .map(|(t, g, s, v)| (t, g, s, v.as_slice()))
    }

    /// Samples taken in a trace context.
    pub fn labelled_samples(&self) -> u64 {
        self.labelled
    }

    /// Distinct trace contexts the samples were taken in.
    pub fn distinct_contexts(&self) -> usize {
        self.contexts.len()
    }

    /// The tag of `context` in this profile (for decoders).
    pub(crate) fn context_tag(&mut self, context: Option<&TraceContext>) -> u32 {
        self.contexts.tag(context)
    }

    /// The trace contexts of this profile (for encoders).
    pub(crate) fn contexts(&self) -> &Contexts {
        &self.contexts
    }

    /// Samples per (thread, context tag, stack) (for encoders).
    pub(crate) fn tagged_stacks(&self) -> impl Iterator<Item = (RawThreadId, u32, &[u32], u64)> {
        self.stacks.iter_tagged().map(|(t, g, s, n)| (t, g, s, *n))
    }

    /// Weighted wall time per (thread, context tag, stack) (for encoders).
    pub(crate) fn tagged_wall(&self) -> impl Iterator<Item = (RawThreadId, u32, &[u32], u64)> {
        self.wall.iter_tagged().map(|(t, g, s, n)| (t, g, s, *n))
    }

    /// CPU time per (thread, context tag, stack) (for encoders).
    pub(crate) fn tagged_cpu(&self) -> impl Iterator<Item = (RawThreadId, u32, &[u32], u64)> {
        self.cpu.iter_tagged().map(|(t, g, s, n)| (t, g, s, *n))
    }

    /// Gives context `tag` its endpoint name (for decoders).
    pub(crate) fn set_context_endpoint(&mut self, tag: u32, name: &str) {
        self.contexts.set_endpoint(tag, name);
    }

    /// Marks the profile as one that measures CPU time (a `cpu/nanoseconds`
    /// sample type in pprof, zero where no CPU time was added) or not.
    pub fn set_cpu_measured(&mut self, measured: bool) {
        self.cpu_measured = measured;
    }

    /// Whether the profile measures CPU time.
    pub fn cpu_measured(&self) -> bool {
        self.cpu_measured
    }

    /// CPU time per stack: (thread, root-first frame indices, nanoseconds).
    pub fn cpu_stacks(&self) -> impl Iterator<Item = (RawThreadId, &[u32], u64)> {
        self.cpu.iter().map(|(t, s, n)| (t, s, *n))
    }

    /// Names `thread` (its `Thread.Name`; an empty name removes it); the
    /// name outlives the periods.
    pub fn set_thread_name(&mut self, thread: RawThreadId, name: &str) {
        if name.is_empty() {
            self.thread_names.remove(&thread);
        } else {
            self.thread_names.insert(thread, name.into());
        }
    }

    /// The name of `thread`, if it has one.
    pub fn thread_name(&self, thread: RawThreadId) -> Option<&str> {
        self.thread_names.get(&thread).map(|n| &**n)
    }

    /// Marks when the profile began (its period's start).
    pub fn set_start(&mut self, at: SystemTime) {
        self.start = Some(at);
    }

    /// Marks when the profile ended (its period's end).
    pub fn set_end(&mut self, at: SystemTime) {
        self.end = Some(at);
    }

    /// When the profile began and ended, where known.
    pub fn time_range(&self) -> (Option<SystemTime>, Option<SystemTime>) {
        (self.start, self.end)
    }

    /// Sets the runtime version label and the sampling period.
    pub fn set_origin(&mut self, runtime: Option<&str>, period_nanos: u64) {
        self.runtime = runtime.map(Into::into);
        self.period_nanos = period_nanos;
    }

    /// The runtime version label, if set.
    pub fn runtime(&self) -> Option<&str> {
        self.runtime.as_deref()
    }

    /// The sampling period in nanoseconds (0: unknown).
    pub fn period_nanos(&self) -> u64 {
        self.period_nanos
    }

    /// Ends the current period at `now`: returns the profile of the period
    /// (its stacks, counts, times and every frame name) and leaves this one
    /// empty, starting at `now`, keeping only its frame names (so that
    /// indices handed out by [`intern`](Self::intern) stay valid). Memory
    /// held between periods is the frame names, one per distinct function.
    pub fn take_period(&mut self, now: SystemTime) -> Profile {
        let period = Profile {
            names: self.names.clone(),
            modules: self.modules.clone(),
            module_names: self.module_names.clone(),
            stacks: self.stacks.take(),
            allocations: self.allocations.take(),
            cpu: self.cpu.take(),
            cpu_measured: self.cpu_measured,
            wall: self.wall.take(),
            wall_weighted: self.wall_weighted,
            thread_names: self.thread_names.clone(),
            samples: std::mem::take(&mut self.samples),
            truncated: std::mem::take(&mut self.truncated),
            empty: std::mem::take(&mut self.empty),
            start: self.start.replace(now),
            end: Some(now),
            runtime: self.runtime.clone(),
            period_nanos: self.period_nanos,
            contexts: std::mem::take(&mut self.contexts),
            labelled: std::mem::take(&mut self.labelled),
            keep_times: self.keep_times,
            times: self.times.take(),
        };
        self.end = None;
        period
    }

    /// Distinct frame names so far.
    pub fn frame_names(&self) -> &[Arc<str>] {
        self.names.as_slice()
    }

    /// The module of frame `index`, where known.
    pub fn frame_module(&self, index: u32) -> Option<&str> {
        let m = (*self.modules.get(index as usize)?)?;
        self.module_names.get(m as usize).map(|m| &**m)
    }

    /// Distinct (thread, stack) pairs held.
    pub fn distinct_stacks(&self) -> usize {
        self.stacks.len() + self.allocations.len()
    }

    /// Sampled stacks: (thread, root-first frame indices, count).
    pub fn stacks(&self) -> impl Iterator<Item = (RawThreadId, &[u32], u64)> {
        self.stacks.iter().map(|(t, s, n)| (t, s, *n))
    }

    /// Allocation stacks: (thread, root-first frame indices, count, bytes).
    pub fn allocations(&self) -> impl Iterator<Item = (RawThreadId, &[u32], u64, u64)> {
        self.allocations.iter().map(|(t, s, (n, b))| (t, s, *n, *b))
    }

    /// Samples counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples whose stack was cut at the depth limit.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Samples with no frame at all (left out of the folded output).
    pub fn empty(&self) -> u64 {
        self.empty
    }

    /// Distinct threads sampled.
    pub fn threads(&self) -> usize {
        let mut t: Vec<RawThreadId> = self.stacks.iter().map(|(t, _, _)| t).collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    }

    /// Stacks as frame names joined with `;` (root first), merged over
    /// threads, with counts, sorted by stack text.
    pub fn folded_lines(&self) -> Vec<(String, u64)> {
        let mut merged: BTreeMap<String, u64> = BTreeMap::new();
        for (_, stack, n) in self.stacks.iter() {
            if stack.is_empty() {
                continue;
            }
            *merged.entry(self.stack_text(stack)).or_default() += n;
        }
        merged.into_iter().collect()
    }

    fn stack_text(&self, stack: &[u32]) -> String {
        let mut line = String::new();
        for (k, &i) in stack.iter().enumerate() {
            if k > 0 {
                line.push(';');
            }
            // Folded format separators must not appear inside a frame.
            let name = self.names.get(i).unwrap_or("?");
            line.extend(name.chars().map(|c| match c {
                ';' => ':',
                '\n' | '\r' => ' ',
                c => c,
            }));
        }
        line
    }

    /// Reads folded stacks (`root;...;leaf N` per line) into a profile of
    /// one thread (thread ID 0): the inverse of [`write_folded`](Self::write_folded).
    pub fn from_folded(text: &str) -> Result<Profile, String> {
        let mut p = Profile::new();
        let mut stack = Vec::new();
        for (k, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            let (frames, n) = line
                .rsplit_once(' ')
                .ok_or_else(|| format!("line {}: no count: {line:?}", k + 1))?;
            let n: u64 = n
                .parse()
                .map_err(|_| format!("line {}: bad count: {line:?}", k + 1))?;
            stack.clear();
            for f in frames.split(';') {
                stack.push(p.intern(f));
            }
            p.add_n(RawThreadId(0), &stack, n, false);
        }
        Ok(p)
    }

    /// Writes folded stacks: `root;...;leaf N`, one line per distinct stack.
    pub fn write_folded(&self, out: &mut impl Write) -> io::Result<()> {
        for (stack, n) in self.folded_lines() {
            writeln!(out, "{stack} {n}")?;
        }
        Ok(())
    }

    /// Writes a speedscope file (`https://www.speedscope.app/file-format-schema.json`):
    /// one sampled profile per thread, frames shared.
    pub fn write_speedscope(&self, name: &str, out: &mut impl Write) -> io::Result<()> {
        let mut s = String::with_capacity(1024);
        s.push_str("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"clrprof\",\"name\":");
        push_json_string(&mut s, name);
        s.push_str(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
        for (i, n) in self.names.as_slice().iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"name\":");
            push_json_string(&mut s, n);
            s.push('}');
        }
        s.push_str("]},\"profiles\":[");
        let mut by_thread: BTreeMap<RawThreadId, Vec<(&[u32], u64)>> = BTreeMap::new();
        for (t, stack, n) in self.stacks.iter() {
            by_thread.entry(t).or_default().push((stack, *n));
        }
        for (k, (thread, mut stacks)) in by_thread.into_iter().enumerate() {
            stacks.sort();
            if k > 0 {
                s.push(',');
            }
            let total: u64 = stacks.iter().map(|(_, n)| n).sum();
            let _ = write!(
                s,
                "{{\"type\":\"sampled\",\"name\":\"thread {:#x}\",\"unit\":\"none\",\"startValue\":0,\"endValue\":{total},\"samples\":[",
                thread.0
            );
            for (j, (stack, _)) in stacks.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                s.push('[');
                for (m, i) in stack.iter().enumerate() {
                    if m > 0 {
                        s.push(',');
                    }
                    let _ = write!(s, "{i}");
                }
                s.push(']');
            }
            s.push_str("],\"weights\":[");
            for (j, (_, n)) in stacks.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{n}");
            }
            s.push_str("]}");
        }
        s.push_str("]}");
        out.write_all(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_covers_a_sample_taken_before_it_began() {
        use std::time::{Duration, UNIX_EPOCH};
        let mut p = Profile::new();
        p.set_keep_times(true);
        let main = p.intern("App::Main");
        let t = RawThreadId(0x10);
        let boundary = UNIX_EPOCH + Duration::from_secs(100);
        p.set_start(boundary - Duration::from_secs(2));
        p.add_time(t, &[main], None, 99_000_000_000, 1);
        let first = p.take_period(boundary);
        assert_eq!(
            first.time_range().0,
            Some(boundary - Duration::from_secs(2))
        );
        // A tick taken 64 ms before the boundary, added after it.
        p.add_time(t, &[main], None, 99_936_000_000, 1);
        p.add_time(t, &[main], None, 100_500_000_000, 1);
        let second = p.take_period(boundary + Duration::from_secs(2));
        assert_eq!(
            second.time_range(),
            (
                Some(UNIX_EPOCH + Duration::from_nanos(99_936_000_000)),
                Some(boundary + Duration::from_secs(2))
            )
        );
        // Without kept times nothing moves.
        let mut q = Profile::new();
        q.set_start(boundary);
        q.add_time(t, &[main], None, 1, 1);
        assert_eq!(q.time_range().0, Some(boundary));
    }

    fn profile() -> Profile {
        let mut p = Profile::new();
        let main = p.intern("Hot.Program::Main");
        let spin = p.intern("Hot.Program::Spin");
        let odd = p.intern("A;B\nC");
        let (t1, t2) = (RawThreadId(0x10), RawThreadId(0x20));
        p.add(t1, &[main, spin], false);
        p.add(t1, &[main, spin], false);
        p.add(t2, &[main, spin], true);
        p.add(t2, &[main], false);
        p.add(t2, &[odd], false);
        p
    }

    #[test]
    fn folded_merges_threads_one_line_per_distinct_stack() {
        let p = profile();
        let mut out = Vec::new();
        p.write_folded(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "A:B C 1\nHot.Program::Main 1\nHot.Program::Main;Hot.Program::Spin 3\n"
        );
        assert_eq!((p.samples(), p.truncated(), p.threads()), (5, 1, 2));
    }

    #[test]
    fn speedscope_is_valid_json_with_one_profile_per_thread() {
        let p = profile();
        let mut out = Vec::new();
        p.write_speedscope("test", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Shape checks without a JSON parser in this crate.
        assert!(
            text.starts_with("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"")
        );
        assert_eq!(text.matches("\"type\":\"sampled\"").count(), 2);
        assert!(text.contains("{\"name\":\"A;B\\nC\"}"));
        assert!(text.contains("\"name\":\"thread 0x10\",\"unit\":\"none\",\"startValue\":0,\"endValue\":2,\"samples\":[[0,1]],\"weights\":[2]"));
        assert_eq!(text.matches('{').count(), text.matches('}').count());
        assert_eq!(text.matches('[').count(), text.matches(']').count());
    }
}
