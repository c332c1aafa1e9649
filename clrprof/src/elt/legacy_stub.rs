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

use clrprof_sys as sys;
use core::cell::Cell;

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
pub(super) fn applies(info_version: u8) -> bool {
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
    // SAFETY: on these runtimes `eltInfo` points to the runtime's
    // `COR_PRF_ELT_INFO_INTERNAL` on `ProfileEnter`'s stack, whose first
    // field is the platform-specific handle (the stub's data), valid for
    // the whole hook call.
    let handle = unsafe { core::ptr::read(elt_info as *const usize) };
    if handle == 0 || handle % 16 != 0 {
        return None;
    }
    let address = (handle + SAVE_AREA_OFFSET) & !15;
    let mut bytes = [0u8; 32];
    // SAFETY: the stub's frame (0x158 bytes from `handle`) holds these 32
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
    // SAFETY: as in `save`: the stub's frame is still live (its hook call
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
            // SAFETY: a guard is only made by the WithInfo enter handler of
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
            // SAFETY: saved in this hook call; the caller is its enter
            // handler, after the hook.
            unsafe { restore(saved) };
        }
    }
}
