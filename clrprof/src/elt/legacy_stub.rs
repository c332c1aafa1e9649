//! A defect of the WithInfo enter stub of CoreCLR before .NET 5 on Unix
//! x86-64, and what the SDK does about it.
//!
//! The runtime calls a WithInfo enter hook from its assembly stub
//! `ProfileEnterNaked` (`vm/amd64/asmhelpers.S`) through the C++
//! `ProfileEnter`. The stub of .NET Core 3.x:
//!
//! * builds `PROFILE_PLATFORM_SPECIFIC_DATA` at its stack pointer (16-byte
//!   aligned there): saved registers, then at offset `0xB0` a 16-word
//!   buffer into which `ProfileArgIterator::CopyStructFromRegisters` copies
//!   structs passed in registers, so that `GetFunctionEnter3Info` can
//!   report each as one contiguous range;
//! * saves all 128 bits of `xmm0` and `xmm1` at `(sp + 0xB8) & !15`, i.e.
//!   at offset `0xB0`: the first four words of that same buffer;
//! * after `ProfileEnter` returns, reloads `xmm0` and `xmm1` from there
//!   (and reloads no other floating-point register: those are what
//!   clrprof-sys's trampoline keeps).
//!
//! So when the hook asks for the arguments of a method that takes a struct
//! in registers, the runtime writes the struct over the saved `xmm0`/`xmm1`
//! and the method starts with wrong floating-point arguments in them (seen
//! on 3.1.23: a `{int; double}` struct, passed in `rdi` and `xmm0`, arrived
//! with `6.9e-310` for its `1.0`). .NET 5 gave the save area its own place
//! and restores `xmm0`-`xmm7` from the saved fields.
//!
//! The SDK's enter handler therefore copies those 32 bytes before the
//! runtime first writes the buffer in a hook call (the first
//! `GetFunctionEnter3Info` through [`EnterContext::arguments`](super::EnterContext::arguments))
//! and writes them back after the user's hook returned, on runtimes that
//! have this stub; a hook that reads no arguments costs nothing more. They
//! are told apart by their interfaces: CoreCLR before .NET 5 offers at most
//! `ICorProfilerInfo11` (.NET 5 added `Info12`), and reports its version as
//! 4.0.30319, so the interface count is the reliable signal.
//!
//! The same stub restores none of `xmm2`-`xmm7` after the enter hook, so
//! on these runtimes the enter hook is clrprof-sys's `xmm2`-`xmm7`-keeping
//! WithInfo trampoline (see `set_with_info`).

//!
//! # The leave stub and return values
//!
//! The same runtimes' `GetFunctionLeave3Info` (`ProfileArgIterator::GetReturnBufferAddr`
//! in `vm/amd64/profiler.cpp`) reports, for every value not returned
//! through a return buffer, the address of the stub's saved `rax`
//! (`PROFILE_PLATFORM_SPECIFIC_DATA::rax`, offset `0x28`; for `float` and
//! `double` it first copies the saved `xmm0` there). A struct returned in
//! `xmm0`/`xmm1`, or in two registers, is then reported as the bytes of
//! `rax` and of the field after it. The leave stub (`ProfileLeaveNaked`)
//! saved the real return registers in its frame before calling the hook,
//! and they stay there until it returns: the low 8 bytes of `xmm0` and
//! `xmm1` in `flt0`/`flt1` (offsets `0x38`, `0x40`), `rax` at `0x28`, and
//! `rdx` pushed just above the frame (`0x158`: the frame is
//! `0xB8 + 0x20 + 0x80` bytes). [`return_registers`] copies them, and
//! [`decode_return`](super::args::decode_return) assembles the struct from
//! the registers its System V classification names (or refuses when the
//! classification is unknown). .NET 5 fixed the runtime's answer.

use clrprof_sys as sys;
use core::cell::Cell;

/// Offset of the saved `rax` in the stub's `PROFILE_PLATFORM_SPECIFIC_DATA`.
const RAX_OFFSET: usize = 0x28;
/// Offset of the saved low 8 bytes of `xmm0` (`flt0`); `xmm1` follows.
const FLT0_OFFSET: usize = 0x38;
/// Offset of `rdx`, pushed by the leave stub just above its frame.
const RDX_OFFSET: usize = 0x158;

/// The return registers the leave stub saved, when `range_start` (the
/// start of the range `GetFunctionLeave3Info` reported) is the saved `rax`,
/// i.e. the value was returned in registers; `None` otherwise (a return
/// buffer, no value, or no usable handle).
///
/// # Safety
///
/// Must be called from a WithInfo leave hook call with the `eltInfo` the
/// runtime passed to it, on a runtime for which [`applies`] is true.
pub(super) unsafe fn return_registers(
    elt_info: sys::COR_PRF_ELT_INFO,
    range_start: usize,
) -> Option<super::return_registers::ReturnRegisters> {
    if elt_info == 0 {
        return None;
    }
    // SAFETY: [caller-contract, elt-frame] on these runtimes `eltInfo` points to the runtime's
    // `COR_PRF_ELT_INFO_INTERNAL` on `ProfileLeave`'s stack, whose first
    // field is the platform-specific handle (the stub's data), valid for
    // the whole hook call.
    let handle = unsafe { core::ptr::read(elt_info as *const usize) };
    if handle == 0 || handle % 16 != 0 || range_start != handle + RAX_OFFSET {
        return None;
    }
    let word = |offset: usize| {
        // SAFETY: [caller-contract, elt-frame] the leave stub's frame spans `handle` to `handle + 0x160`
        // (its data, the fp spill and struct buffer, then the pushed rdx
        // and rbx); it is this thread's stack, live until the stub returns
        // after this hook call, and the runtime wrote only the rax slot of
        // it for this call (for R4/R8 returns, not read from here).
        unsafe { core::ptr::read_unaligned((handle + offset) as *const u64) }
    };
    Some(super::return_registers::ReturnRegisters::new(
        word(RAX_OFFSET),
        word(RDX_OFFSET),
        word(FLT0_OFFSET),
        word(FLT0_OFFSET + 8),
    ))
}

/// Highest `ICorProfilerInfoN` of the runtimes whose Unix x86-64 enter
/// stub shares its xmm0/xmm1 save area with the struct-copy buffer.
const LAST_INFO_VERSION_WITH_SHARED_SAVE_AREA: u8 = 11;

/// Offset of the stub's struct-copy buffer (and the save area) from the
/// platform-specific data, before rounding down to 16 bytes.
const SAVE_AREA_OFFSET: usize = 0xB8;

/// The stub's saved `xmm0` and `xmm1`, copied out of its frame.
pub(super) struct SavedArea {
    address: usize,
    bytes: [u8; 32],
}

/// Whether a runtime whose highest `ICorProfilerInfoN` is `info_version`
/// has the stub whose save area the enter handler must keep.
#[inline(always)]
pub(crate) fn applies(info_version: u8) -> bool {
    info_version <= LAST_INFO_VERSION_WITH_SHARED_SAVE_AREA
}

/// Copies the stub's xmm0/xmm1 save area out of its frame (`None` if the
/// runtime passed no usable handle).
///
/// # Safety
///
/// Must be called from the WithInfo enter handler, with the `eltInfo` the
/// runtime passed to it, before the user's hook runs, and only on a
/// runtime for which [`applies`] is true.
pub(super) unsafe fn save(elt_info: sys::COR_PRF_ELT_INFO) -> Option<SavedArea> {
    if elt_info == 0 {
        return None;
    }
    // SAFETY: [caller-contract, elt-frame] on these runtimes `eltInfo` points to the runtime's
    // `COR_PRF_ELT_INFO_INTERNAL` on `ProfileEnter`'s stack, whose first
    // field is the platform-specific handle (the stub's data), valid for
    // the whole hook call.
    let handle = unsafe { core::ptr::read(elt_info as *const usize) };
    if handle == 0 || handle % 16 != 0 {
        return None;
    }
    let address = (handle + SAVE_AREA_OFFSET) & !15;
    let mut bytes = [0u8; 32];
    // SAFETY: [caller-contract, elt-frame] the stub's frame (0x158 bytes from `handle`) holds these 32
    // bytes; it is this thread's stack, live until the stub returns, and
    // only this thread's hook call touches it meanwhile.
    unsafe { core::ptr::copy_nonoverlapping(address as *const u8, bytes.as_mut_ptr(), 32) };
    Some(SavedArea { address, bytes })
}

/// Writes the saved area back, after the user's hook returned.
///
/// # Safety
///
/// `saved` must come from [`save`] in the same hook call.
pub(super) unsafe fn restore(saved: SavedArea) {
    // SAFETY: [caller-contract, elt-frame] as in `save`: the stub's frame is still live (its hook call
    // has not returned), and the only writes to it since `save` were the
    // runtime's struct copies made for the hook, which end with the hook.
    unsafe { core::ptr::copy_nonoverlapping(saved.bytes.as_ptr(), saved.address as *mut u8, 32) };
}

/// The save area of one enter hook call: copied at most once, before the
/// first argument query of the call, and written back when the hook is
/// done.
pub(crate) struct SaveAreaGuard {
    elt_info: sys::COR_PRF_ELT_INFO,
    saved: Cell<Option<SavedArea>>,
}

impl SaveAreaGuard {
    /// A guard for the enter hook call that received `elt_info`.
    #[inline(always)]
    pub(super) fn new(elt_info: sys::COR_PRF_ELT_INFO) -> Self {
        SaveAreaGuard {
            elt_info,
            saved: Cell::new(None),
        }
    }

    /// Copies the save area if this call has not yet: called before every
    /// `GetFunctionEnter3Info` of the call.
    pub(crate) fn save_once(&self) {
        let already = self.saved.take();
        let saved = match already {
            Some(s) => Some(s),
            // SAFETY: [elt-frame] a guard is only made by the WithInfo enter handler of
            // a runtime for which `applies` holds, with the runtime's
            // eltInfo, and lives in that handler's frame: this runs during
            // the hook call, before the runtime writes the buffer.
            None => unsafe { save(self.elt_info) },
        };
        self.saved.set(saved);
    }

    /// Writes the save area back if this call copied it.
    ///
    /// # Safety
    ///
    /// Called by the enter handler that made the guard, after the user's
    /// hook returned.
    #[inline(always)]
    pub(super) unsafe fn restore(self) {
        if let Some(saved) = self.saved.take() {
            // SAFETY: [caller-contract, elt-frame] saved in this hook call; the caller is its enter
            // handler, after the hook.
            unsafe { restore(saved) };
        }
    }
}
