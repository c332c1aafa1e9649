//! Frame-pointer walks of a thread's own stack, every word checked before
//! it is read.
//!
//! A function that keeps a frame pointer saves its caller's frame pointer
//! and return address side by side (x86-64: `push rbp; mov rbp, rsp`, so
//! `[rbp]` is the caller's `rbp` and `[rbp + 8]` the return address;
//! aarch64: the frame record `stp x29, x30`, `[x29]` and `[x29 + 8]`), so
//! the frames of a stack form a chain from the innermost frame pointer to
//! the outermost. Following it reads only the stack.
//!
//! What keeps which chain (read in the runtime's sources, and measured):
//! - **Managed code, x86-64 Unix**: the JIT reserves `rbp` as the frame
//!   pointer (`ETW_EBP_FRAMED` is 1 for `UNIX_AMD64_ABI` in
//!   `src/coreclr/jit/targetamd64.h`, so `rbp` is never a scratch register)
//!   and points it at the saved `rbp` (`genSPtoFPdelta` is the whole frame
//!   on Unix, "frame chaining ... to support native tool unwinding").
//!   `rpMustCreateEBPFrame` gives a frame to every method compiled without
//!   optimization (tier 0, MinOpts) and to every optimized method with more
//!   than 16 bytes of IL, more than three basic blocks, a loop, two calls
//!   or an indirect call. A small optimized method without one keeps its
//!   caller's `rbp`: the walk skips its caller (the chain goes from the
//!   small method straight to its caller's caller), it never reads
//!   outside the stack.
//! - **Managed code, arm64**: the JIT always makes a frame record
//!   (`rpMustCreateEBPFrame`, "Temporary ARM64 force frame pointer"), with
//!   `x29` at it.
//! - **The runtime's native code** (`libcoreclr.so`, `libclrjit.so`,
//!   `libSystem.Native.so`) is built with frame pointers (measured on the
//!   legs: `push rbp; mov rbp, rsp` opens about as many functions as `ret`
//!   closes in `libcoreclr.so` of 3.1 to 11); its assembly helpers (write
//!   barriers, stubs) keep their caller's.
//! - **The C library** is built without them: inside `libc` the `rbp`
//!   register may hold anything. A walk that starts there takes the
//!   interrupted `rbp` as it is; the checks below stop it at the first word
//!   that is not a plausible frame of this stack, and what it found is
//!   placed later (the code map says which return addresses are managed).
//!
//! Every frame pointer is checked before a word is read through it: it is
//! aligned, at or above the interrupted stack pointer, its two words lie
//! inside the thread's stack bounds, and it is strictly above the frame
//! pointer before it (so the walk ends, and never goes back down the stack).
//! The bounds are those the system gives for the thread
//! (`pthread_getattr_np`), and a walk runs on that thread, so every word read
//! is in the live part of its own stack, which is mapped.

use core::marker::PhantomData;

/// Why a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum WalkEnd {
    /// A frame pointer of 0, or a return address of 0: the outermost frame.
    Outermost = 0,
    /// A frame pointer outside the stack, below the stack pointer or not
    /// above the one before.
    OffStack = 1,
    /// A frame pointer not aligned to a word.
    Misaligned = 2,
    /// The output had no room for more frames (the stack is cut at the
    /// root end: the frames nearest the leaf are kept).
    Full = 3,
    /// The interrupted stack pointer was not inside the thread's stack
    /// (an alternate signal stack, the runtime's stack-overflow stack):
    /// nothing was walked.
    NotOnStack = 4,
}

/// The registers a walk starts from: the interrupted (or current) program
/// counter, stack pointer and frame pointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartRegisters {
    /// The program counter: the leaf frame.
    pub pc: usize,
    /// The stack pointer.
    pub sp: usize,
    /// The frame pointer (`rbp`, `x29`).
    pub fp: usize,
}

/// A walk's result: how many frames were written and why it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    /// Frames written (the program counter first, then return addresses).
    pub frames: usize,
    /// Why the walk ended.
    pub end: WalkEnd,
}

const WORD: usize = core::mem::size_of::<usize>();

// signal-context: async-signal-safe: reads words of [lo, hi) only, writes `out` only; no call
/// Follows the frame-pointer chain from `regs` inside `[lo, hi)` into `out`:
/// `out[0]` is the program counter, the rest are return addresses, leaf
/// first. Allocation-free, lock-free, calls nothing.
///
/// # Safety
/// Every word of `[lo, hi)` must be readable for the whole call (the
/// calling thread's own stack, with `regs` taken on that thread).
pub(crate) unsafe fn walk(regs: StartRegisters, lo: usize, hi: usize, out: &mut [usize]) -> Walked {
    // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
    unsafe { walk_recording(regs, lo, hi, out, &mut []) }
}

// signal-context: async-signal-safe: reads words of [lo, hi) only, writes `out` and `records` only; no call
/// [`walk`], also writing into `records[i]` (for the first `records.len()`
/// frames) the address of the frame record that gave `out[i]` (`records[0]`
/// is the stack pointer: the leaf has no record).
///
/// # Safety
/// As for [`walk`].
pub(crate) unsafe fn walk_recording(
    regs: StartRegisters,
    lo: usize,
    hi: usize,
    out: &mut [usize],
    records: &mut [usize],
) -> Walked {
    if out.is_empty() {
        return Walked {
            frames: 0,
            end: WalkEnd::Full,
        };
    }
    if regs.sp < lo || regs.sp >= hi {
        return Walked {
            frames: 0,
            end: WalkEnd::NotOnStack,
        };
    }
    out[0] = regs.pc;
    if let Some(r) = records.first_mut() {
        *r = regs.sp;
    }
    let mut n = 1;
    let mut fp = regs.fp;
    // The lowest address the next frame pointer may have.
    let mut floor = regs.sp;
    let end = loop {
        if fp == 0 {
            break WalkEnd::Outermost;
        }
        if fp % WORD != 0 {
            break WalkEnd::Misaligned;
        }
        // Two words at fp: both inside [floor, hi).
        if fp < floor || fp < lo || fp > hi.saturating_sub(2 * WORD) {
            break WalkEnd::OffStack;
        }
        if n == out.len() {
            break WalkEnd::Full;
        }
        // SAFETY: [interrupted-stack] `fp` is word-aligned and `fp`,
        // `fp + WORD` lie inside [lo, hi), which the caller guarantees
        // readable (checked just above).
        let (next, ret) = unsafe {
            (
                core::ptr::read_volatile(fp as *const usize),
                core::ptr::read_volatile((fp + WORD) as *const usize),
            )
        };
        if ret == 0 {
            break WalkEnd::Outermost;
        }
        // signal-context: bounds: `n < out.len()`: the walk ends when `n == out.len()` above
        out[n] = ret;
        if let Some(r) = records.get_mut(n) {
            *r = fp;
        }
        n += 1;
        // Strictly increasing: the next frame is above this one's two words.
        floor = fp + 2 * WORD;
        fp = next;
    };
    Walked { frames: n, end }
}

// signal-context: async-signal-safe: reads words of [lo, hi) only, calls `function_of` (the code map's look-up)
/// Puts back the caller of a method that on-stack replacement (OSR)
/// moved, found by [`walk_recording`] as two frames of one function.
///
/// A method running a loop at tier 0 that OSR transfers to optimized code
/// keeps its tier-0 frame, and the OSR body is entered below it as if
/// called (the runtime's `JIT_Patchpoint`: the stack pointer of the tier-0
/// frame minus a word, which holds the return address of the patchpoint
/// helper's call). The OSR body's frame record then holds that return
/// address, which lies in the tier-0 code of the same method, and the frame
/// pointer of the tier-0 frame's *caller*: the chain skips the tier-0
/// frame's own record, and with it the method's real caller. Seen on .NET
/// 10 (x86-64): `Spin` (OSR) → `Spin` (tier 0, the patchpoint's return)
/// → `Main`, `Work` missing. On .NET 11 the slot holds the OSR body's own
/// entry address instead (a "return address" at the start of a code
/// version of the same function).
///
/// So where frame `i + 1` is in the same function as frame `i` but in
/// another of its code versions, or lies at the very start of a code
/// version of it (`function_of`, the code map: the function and the start
/// of the code range holding an address; `leaf` for frame 0, whose address
/// is an instruction, not a return address), the words between frame
/// `i + 1`'s record and the next record are searched for the skipped one:
/// a word equal to the next record's address followed by a managed return
/// address. When found, that return address replaces frame `i + 1` (the
/// patchpoint's return, which is not a frame of its own). Plain recursion
/// (one code version calling itself) is left alone.
///
/// A native leaf whose frame pointer was still the OSR body's (a runtime
/// helper without a frame of its own, called from the loop) leaves the
/// OSR body out as well: the chain's first frame is the patchpoint's
/// return, standing for the method, and its record is the OSR body's. So
/// when frame 0 is not managed and frame 1 came from a record (not from the
/// stack pointer), the same search runs between frame 1's record and the
/// next, and the return address found is put in after frame 1 (`frames`
/// grows by one, if `out` has room). Returns how many frames were put
/// back or in.
///
/// # Safety
/// As for [`walk`]: every word of `[lo, hi)` readable, and `records` as
/// [`walk_recording`] wrote it for `out[..frames]` in the same bounds.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) unsafe fn restore_osr_callers(
    out: &mut [usize],
    records: &mut [usize],
    frames: &mut usize,
    lo: usize,
    hi: usize,
    function_of: impl Fn(usize, bool) -> Option<(usize, usize)>,
) -> usize {
    let total = (*frames).min(out.len());
    let mut restored = 0;
    let mut prev = if total > 0 {
        function_of(out[0], true)
    } else {
        None
    };
    // A native leaf, frame 1 from a record: the OSR body may be missing.
    if prev.is_none() && total >= 3 && total < out.len() && records.len() >= 3 {
        // signal-context: bounds: `records.len() >= 3`, checked just above
        let (r0, record, to) = (records[0], records[1], records[2]);
        // signal-context: bounds: `total >= 3`, and `total <= out.len()`
        let first = out[1];
        let managed = function_of(first, false).is_some();
        let found = if record != r0 && managed {
            // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
            unsafe { skipped_record(record, to, lo, hi, &function_of) }
        } else {
            None
        };
        if let Some((x, r)) = found {
            // Room for one more: `total < out.len()`, checked above.
            let mut k = total;
            while k > 2 {
                // signal-context: bounds: `2 < k <= total < out.len()`
                out[k] = out[k - 1];
                if k < records.len() {
                    // signal-context: bounds: `0 < k - 1 < k < records.len()`, just checked
                    records[k] = records[k - 1];
                }
                k -= 1;
            }
            // signal-context: bounds: `total >= 3`, checked above
            out[2] = r;
            // signal-context: bounds: `records.len() >= 3`, checked above
            records[2] = x;
            *frames = total + 1;
            restored += 1;
        }
    }
    let n = (*frames).min(out.len()).min(records.len());
    let mut i = 0;
    while i + 2 < n {
        // signal-context: bounds: `i + 2 < n`, and `n` is at most both lengths
        let (here, record, next_record) = (out[i + 1], records[i + 1], records[i + 2]);
        let next = function_of(here, false);
        // .NET 10: another code version (tier 0) of the same function.
        let other_version = matches!((prev, next), (Some(a), Some(b)) if a.0 == b.0 && a.1 != b.1);
        // .NET 11: the OSR body's own entry address, the start of a code
        // version of the same function.
        let entry = matches!((prev, function_of(here, true)),
            (Some(a), Some(b)) if a.0 == b.0 && b.1 == here);
        let mut now = here;
        if other_version || entry {
            // SAFETY: [interrupted-stack] the caller's guarantee, passed on.
            let found = unsafe { skipped_record(record, next_record, lo, hi, &function_of) };
            if let Some((_, r)) = found {
                now = r;
                restored += 1;
            }
        }
        if now != here {
            // signal-context: bounds: `i + 1 < n <= out.len()`
            out[i + 1] = now;
        }
        prev = function_of(now, false);
        i += 1;
    }
    restored
}

// signal-context: async-signal-safe: reads words of [lo, hi) only, calls `function_of` (the code map's look-up)
/// The frame record that an OSR body's record skipped, between `record`
/// (the OSR body's) and `to` (the next record of the chain): the first
/// word pair `(to, r)` there with `r` a managed return address. Its
/// address and `r`.
///
/// # Safety
/// Every word of `[lo, hi)` readable.
unsafe fn skipped_record(
    record: usize,
    to: usize,
    lo: usize,
    hi: usize,
    function_of: &impl Fn(usize, bool) -> Option<(usize, usize)>,
) -> Option<(usize, usize)> {
    let mut x = record.saturating_add(2 * WORD);
    // Both words of a record inside (record, to) and inside the stack.
    while x >= lo && x % WORD == 0 && x + 2 * WORD <= to && x + 2 * WORD <= hi {
        // SAFETY: [interrupted-stack] `x` and `x + WORD` lie inside [lo, hi),
        // checked by the loop condition; the caller guarantees it readable.
        let (w, r) = unsafe {
            (
                core::ptr::read_volatile(x as *const usize),
                core::ptr::read_volatile((x + WORD) as *const usize),
            )
        };
        if w == to && function_of(r, false).is_some() {
            return Some((x, r));
        }
        x += WORD;
    }
    None
}

/// The stack of the calling thread: the memory the system reserved for it
/// (`pthread_getattr_np`), without its guard page.
///
/// Neither `Send` nor `Sync`: bounds describe the stack of the thread that
/// asked for them, and a walk is sound only on that thread (on another the
/// words below its own frames are not live, or not mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackBounds {
    lo: usize,
    hi: usize,
    _this_thread: PhantomData<*const ()>,
}

impl StackBounds {
    /// The calling thread's stack, where the system tells (Linux; `None`
    /// elsewhere, or when the query fails). Normal context only: for the
    /// main thread the C library reads `/proc/self/maps`.
    pub fn current() -> Option<StackBounds> {
        let (lo, hi) = current_thread_stack()?;
        Some(StackBounds {
            lo,
            hi,
            _this_thread: PhantomData,
        })
    }

    /// The lowest address of the stack.
    pub fn low(&self) -> usize {
        self.lo
    }

    /// The address just above the stack (its base: stacks grow down).
    pub fn high(&self) -> usize {
        self.hi
    }

    /// Whether `address` lies inside the stack.
    pub fn contains(&self, address: usize) -> bool {
        (self.lo..self.hi).contains(&address)
    }

    /// Walks the calling thread's own stack from the caller of this
    /// function, by its frame pointers, into `out` (return addresses, leaf
    /// first; `out[0]` is the return address into the caller). No
    /// allocation, no lock, no call into the runtime: a profiler can take a
    /// stack of instruction pointers from any callback this way and name
    /// them later through a [`CodeMap`](super::CodeMap).
    ///
    /// Only frames that keep a frame pointer are found (see the
    /// [module docs](self)); the walk ends at the first word that is not a
    /// plausible frame of this stack. `None` on targets without a
    /// frame-pointer walk (other than x86-64 and aarch64).
    #[inline(never)]
    pub fn walk_from_caller(&self, out: &mut [usize]) -> Option<Walked> {
        let (sp, fp) = current_stack_and_frame_pointer()?;
        // This function's own frame record: [fp] is the caller's frame
        // pointer, [fp + WORD] the return address into the caller. The
        // program counter slot is a placeholder, dropped below.
        let regs = StartRegisters { pc: 0, sp, fp };
        // SAFETY: [interrupted-stack] `self` describes the calling thread's own stack (StackBounds
        // is neither Send nor Sync), the thread this walk runs on, and `sp`
        // is its stack pointer now: every word from `sp` to the stack's base
        // is mapped and belongs to live frames.
        let walked = unsafe { walk(regs, self.lo, self.hi, out) };
        if walked.frames > 0 {
            out.copy_within(1..walked.frames, 0);
        }
        Some(Walked {
            frames: walked.frames.saturating_sub(1),
            end: walked.end,
        })
    }
}

/// The stack pointer and frame pointer of the calling function.
#[inline(always)]
fn current_stack_and_frame_pointer() -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        let (sp, fp): (usize, usize);
        // SAFETY: [local-memory] copies two registers; no memory is touched.
        unsafe {
            core::arch::asm!("mov {}, rsp", "mov {}, rbp", out(reg) sp, out(reg) fp,
                options(nomem, nostack, preserves_flags))
        };
        Some((sp, fp))
    }
    #[cfg(target_arch = "aarch64")]
    {
        let (sp, fp): (usize, usize);
        // SAFETY: [local-memory] copies two registers; no memory is touched.
        unsafe {
            core::arch::asm!("mov {}, sp", "mov {}, x29", out(reg) sp, out(reg) fp,
                options(nomem, nostack, preserves_flags))
        };
        Some((sp, fp))
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// `[lo, hi)` of the calling thread's stack (`pthread_getattr_np`).
pub(crate) fn current_thread_stack() -> Option<(usize, usize)> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [ffi-abi] pthread_attr_t is a plain C struct, valid when zeroed.
        let mut attr: libc::pthread_attr_t = unsafe { core::mem::zeroed() };
        // SAFETY: [os-api] the calling thread's own handle and a valid out struct.
        if unsafe { libc::pthread_getattr_np(libc::pthread_self(), &mut attr) } != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = core::ptr::null_mut();
        let mut size: libc::size_t = 0;
        // SAFETY: [os-api] `attr` was filled by pthread_getattr_np; valid out pointers.
        let got = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
        // SAFETY: [os-api] destroys the attributes pthread_getattr_np initialised, once.
        unsafe { libc::pthread_attr_destroy(&mut attr) };
        if got != 0 || addr.is_null() || size == 0 {
            return None;
        }
        let lo = addr as usize;
        Some((lo, lo.checked_add(size)?))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake stack: `words` in a vector, addressed by index.
    struct Fake {
        words: Vec<usize>,
    }

    impl Fake {
        fn new(n: usize) -> Fake {
            Fake { words: vec![0; n] }
        }
        fn addr(&self, i: usize) -> usize {
            self.words.as_ptr() as usize + i * WORD
        }
        fn bounds(&self) -> (usize, usize) {
            (self.addr(0), self.addr(self.words.len()))
        }
        /// A frame record at word `i`: caller's frame pointer, return address.
        fn frame(&mut self, i: usize, next: usize, ret: usize) {
            self.words[i] = next;
            self.words[i + 1] = ret;
        }
        fn walk(&self, regs: StartRegisters, out: &mut [usize]) -> Walked {
            let (lo, hi) = self.bounds();
            // SAFETY: [test-fake] the bounds are the vector's own memory.
            unsafe { walk(regs, lo, hi, out) }
        }
    }

    #[test]
    fn a_chain_is_followed_to_its_outermost_frame() {
        let mut s = Fake::new(64);
        let (f1, f2, f3) = (s.addr(4), s.addr(20), s.addr(40));
        s.frame(4, f2, 0x1111);
        s.frame(20, f3, 0x2222);
        s.frame(40, 0, 0x3333);
        let mut out = [0usize; 8];
        let w = s.walk(
            StartRegisters {
                pc: 0xaaaa,
                sp: s.addr(2),
                fp: f1,
            },
            &mut out,
        );
        assert_eq!(w.end, WalkEnd::Outermost);
        assert_eq!(&out[..w.frames], &[0xaaaa, 0x1111, 0x2222, 0x3333]);
    }

    #[test]
    fn every_frame_pointer_is_checked_before_it_is_read() {
        let mut s = Fake::new(64);
        let (lo, hi) = s.bounds();
        let sp = s.addr(2);
        let regs = |fp| StartRegisters { pc: 1, sp, fp };
        let mut out = [0usize; 8];
        // Outside the stack, above and below.
        for fp in [hi, hi + 4096, lo - 64, 0x10] {
            let w = s.walk(regs(fp), &mut out);
            assert_eq!((w.frames, w.end), (1, WalkEnd::OffStack), "fp {fp:#x}");
        }
        // The last word of the stack: its pair would cross the base.
        let w = s.walk(regs(hi - WORD), &mut out);
        assert_eq!(w.end, WalkEnd::OffStack);
        // Below the stack pointer.
        let w = s.walk(regs(s.addr(1)), &mut out);
        assert_eq!(w.end, WalkEnd::OffStack);
        // Misaligned.
        let w = s.walk(regs(s.addr(8) + 3), &mut out);
        assert_eq!(w.end, WalkEnd::Misaligned);
        // A chain that goes back down, or stays put, ends there.
        let a = s.addr(10);
        s.frame(10, s.addr(6), 0x10);
        let w = s.walk(regs(a), &mut out);
        assert_eq!((w.frames, w.end), (2, WalkEnd::OffStack));
        s.frame(10, a, 0x10);
        let w = s.walk(regs(a), &mut out);
        assert_eq!((w.frames, w.end), (2, WalkEnd::OffStack));
        // Overlapping the frame before (next fp inside its two words).
        s.frame(10, a + WORD, 0x10);
        let w = s.walk(regs(a), &mut out);
        assert_eq!((w.frames, w.end), (2, WalkEnd::OffStack));
    }

    #[test]
    fn a_stack_pointer_off_the_stack_walks_nothing() {
        let s = Fake::new(16);
        let (_, hi) = s.bounds();
        let mut out = [0usize; 4];
        let w = s.walk(
            StartRegisters {
                pc: 5,
                sp: hi + 64,
                fp: s.addr(4),
            },
            &mut out,
        );
        assert_eq!((w.frames, w.end), (0, WalkEnd::NotOnStack));
    }

    #[test]
    fn a_full_output_keeps_the_leaf_end() {
        let mut s = Fake::new(64);
        let mut at = 4;
        for k in 0..10 {
            let next = if k == 9 { 0 } else { s.addr(at + 4) };
            s.frame(at, next, 0x100 + k);
            at += 4;
        }
        let mut out = [0usize; 3];
        let w = s.walk(
            StartRegisters {
                pc: 7,
                sp: s.addr(0),
                fp: s.addr(4),
            },
            &mut out,
        );
        assert_eq!(w.end, WalkEnd::Full);
        assert_eq!(out, [7, 0x100, 0x101]);
        let w = s.walk(
            StartRegisters {
                pc: 7,
                sp: s.addr(0),
                fp: s.addr(4),
            },
            &mut [],
        );
        assert_eq!((w.frames, w.end), (0, WalkEnd::Full));
    }

    /// An OSR body's record skips its tier-0 frame: the caller is found
    /// between the two records and put back (the layout measured on .NET
    /// 10, x86-64).
    #[test]
    fn the_caller_of_an_osr_method_is_put_back() {
        let mut s = Fake::new(64);
        // Functions by address: 0x1000.. Spin (OSR and tier 0 code),
        // 0x2000.. Work, 0x3000.. Main.
        // Spin's tier-0 code at 0x1000, its OSR code at 0x1100.
        let function_of = |ip: usize, leaf: bool| {
            let at = if leaf { ip } else { ip - 1 };
            match at {
                0x1000..=0x10ff => Some((1, 0x1000)),
                0x1100..=0x1fff => Some((1, 0x1100)),
                0x2000..=0x2fff => Some((2, 0x2000)),
                0x3000..=0x3fff => Some((3, 0x3000)),
                _ => None,
            }
        };
        let (osr, tier0, work) = (4, 20, 40);
        // OSR record: the tier-0 frame's caller's record, and the
        // patchpoint's return address in tier-0 Spin.
        s.frame(osr, s.addr(work), 0x1050);
        // The tier-0 record the chain skips: Work's record, return into Work.
        s.frame(tier0, s.addr(work), 0x2030);
        // Work's record: return into Main.
        s.frame(work, 0, 0x3010);
        let mut out = [0usize; 8];
        let mut records = [0usize; 8];
        let regs = StartRegisters {
            pc: 0x1100,
            sp: s.addr(0),
            fp: s.addr(osr),
        };
        let (lo, hi) = s.bounds();
        // SAFETY: [test-fake] the bounds are the vector's own memory.
        let w = unsafe { walk_recording(regs, lo, hi, &mut out, &mut records) };
        assert_eq!(&out[..w.frames], &[0x1100, 0x1050, 0x3010], "Work skipped");
        let mut frames = w.frames;
        // SAFETY: [test-fake] the bounds are the vector's own memory; `records` from this walk.
        let n = unsafe {
            restore_osr_callers(&mut out, &mut records, &mut frames, lo, hi, function_of)
        };
        assert_eq!(frames, w.frames);
        assert_eq!(n, 1);
        assert_eq!(
            &out[..w.frames],
            &[0x1100, 0x2030, 0x3010],
            "Spin, Work, Main"
        );
        // .NET 11: the slot holds the OSR body's entry (0x1100, the start
        // of the OSR code version).
        s.frame(osr, s.addr(work), 0x1100);
        // SAFETY: [test-fake] as above.
        let w = unsafe { walk_recording(regs, lo, hi, &mut out, &mut records) };
        let mut frames = w.frames;
        // SAFETY: [test-fake] the bounds are the vector's own memory; `records` from this walk.
        let n = unsafe {
            restore_osr_callers(&mut out, &mut records, &mut frames, lo, hi, function_of)
        };
        assert_eq!(frames, w.frames);
        assert_eq!(n, 1);
        assert_eq!(&out[..w.frames], &[0x1100, 0x2030, 0x3010]);
        // Plain recursion (one code version) is left alone, even with a
        // word in between that looks like a record.
        let mut s = Fake::new(64);
        s.frame(4, s.addr(20), 0x1150);
        s.frame(10, s.addr(20), 0x2030);
        s.frame(20, 0, 0x3010);
        let regs = StartRegisters {
            pc: 0x1120,
            sp: s.addr(0),
            fp: s.addr(4),
        };
        let (lo, hi) = s.bounds();
        let mut out = [0usize; 8];
        // SAFETY: [test-fake] as above.
        let w = unsafe { walk_recording(regs, lo, hi, &mut out, &mut records) };
        let mut frames = w.frames;
        // SAFETY: [test-fake] the bounds are the vector's own memory; `records` from this walk.
        let n = unsafe {
            restore_osr_callers(&mut out, &mut records, &mut frames, lo, hi, function_of)
        };
        assert_eq!(frames, w.frames);
        assert_eq!(n, 0);
        assert_eq!(&out[..w.frames], &[0x1120, 0x1150, 0x3010]);
    }

    /// Garbage in the stack never makes the walk read outside it: random
    /// words as frame pointers, many times over.
    #[test]
    fn random_words_never_lead_off_the_stack() {
        let mut s = Fake::new(256);
        let (lo, hi) = s.bounds();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as usize
        };
        for _ in 0..2000 {
            for i in 0..s.words.len() {
                // Half of the words point into the stack, at any offset.
                s.words[i] = if next() % 2 == 0 {
                    lo + next() % (hi - lo + 64)
                } else {
                    next()
                };
            }
            let mut out = [0usize; 64];
            let fp = lo + next() % (hi - lo);
            let w = s.walk(StartRegisters { pc: 1, sp: lo, fp }, &mut out);
            assert!(w.frames >= 1 && w.frames <= out.len());
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_own_stack_is_walked_from_the_caller() {
        #[inline(never)]
        fn inner(out: &mut [usize]) -> Walked {
            let bounds = StackBounds::current().expect("bounds");
            let here = &bounds as *const _ as usize;
            assert!(bounds.contains(here), "a local lies on the stack");
            bounds.walk_from_caller(out).expect("a walk on this target")
        }
        #[inline(never)]
        fn outer(out: &mut [usize]) -> Walked {
            let w = inner(out);
            std::hint::black_box(w)
        }
        let mut out = [0usize; 64];
        let w = outer(&mut out);
        // Test binaries keep frame pointers only where the compiler chose
        // to; at least the return address into `outer` is found when this
        // crate is built with them, and the walk always ends cleanly.
        assert!(w.frames <= out.len());
        assert_ne!(w.end, WalkEnd::NotOnStack);
    }
}
