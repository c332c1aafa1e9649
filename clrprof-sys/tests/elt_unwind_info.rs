//! Windows x64 unwind data of the ELT trampolines (`src/elt/x86_64_win64.rs`),
//! checked through the operating system's own unwinder in the linked test
//! executable (run under Wine on the `win-x64` cross leg): for every
//! trampoline, `RtlLookupFunctionEntry` finds a function-table entry that
//! starts at it, and `RtlVirtualUnwind` started inside it (in the prologue,
//! in the body, at the final `ret`) arrives at the caller's return address
//! with the caller's stack pointer. That is what exceptions, debuggers and
//! crash dumps need from a frame of a hooked method.
//!
//! The same assembler text is what `x86_64-pc-windows-msvc` builds get;
//! `cargo xtask msvc` checks the `.pdata`/`.xdata` of that object too.
#![cfg(all(windows, target_arch = "x86_64", clrprof_elt))]

use clrprof_sys::elt;
use core::ffi::c_void;

/// `RUNTIME_FUNCTION` (winnt.h), image-relative addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RuntimeFunction {
    begin: u32,
    end: u32,
    unwind_data: u32,
}

/// `CONTEXT` for x64 (winnt.h): 1232 bytes, 16-byte aligned; only `Rsp`
/// (offset 0x98) and `Rip` (offset 0xF8) are used here.
#[repr(C, align(16))]
struct Context([u8; 1232]);

const CONTEXT_RSP: usize = 0x98;
const CONTEXT_RIP: usize = 0xF8;
/// `CONTEXT_AMD64 | CONTEXT_CONTROL | CONTEXT_INTEGER`, at offset 0x30.
const CONTEXT_FLAGS: u32 = 0x0010_0003;
const UNW_FLAG_NHANDLER: u32 = 0;

impl Context {
    fn new(rip: u64, rsp: u64) -> Context {
        let mut c = Context([0; 1232]);
        c.0[0x30..0x34].copy_from_slice(&CONTEXT_FLAGS.to_le_bytes());
        c.set(CONTEXT_RSP, rsp);
        c.set(CONTEXT_RIP, rip);
        c
    }
    fn set(&mut self, offset: usize, value: u64) {
        self.0[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    }
    fn get(&self, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[offset..offset + 8]);
        u64::from_le_bytes(b)
    }
}

#[link(name = "kernel32")]
extern "system" {
    fn RtlLookupFunctionEntry(
        control_pc: u64,
        image_base: *mut u64,
        history_table: *mut c_void,
    ) -> *mut RuntimeFunction;
    fn RtlVirtualUnwind(
        handler_type: u32,
        image_base: u64,
        control_pc: u64,
        function_entry: *mut RuntimeFunction,
        context: *mut Context,
        handler_data: *mut *mut c_void,
        establisher_frame: *mut u64,
        context_pointers: *mut c_void,
    ) -> *mut c_void;
}

/// Each trampoline: its name, address and the frame its prologue
/// allocates (`sub rsp, FRAME`): the home area only for enter, plus `xmm0`
/// and `rax` for leave and tailcall, every volatile register for WithInfo.
fn trampolines() -> [(&'static str, usize, u64); 6] {
    [
        ("enter3", elt::enter3_trampoline() as usize, 0x28),
        ("leave3", elt::leave3_trampoline() as usize, 0x38),
        ("tailcall3", elt::tailcall3_trampoline() as usize, 0x38),
        (
            "enter3_with_info",
            elt::enter3_with_info_hook() as usize,
            0xA8,
        ),
        (
            "leave3_with_info",
            elt::leave3_with_info_hook() as usize,
            0xA8,
        ),
        (
            "tailcall3_with_info",
            elt::tailcall3_with_info_hook() as usize,
            0xA8,
        ),
    ]
}

fn lookup(pc: u64) -> Option<(u64, RuntimeFunction)> {
    let mut base = 0u64;
    // SAFETY: RtlLookupFunctionEntry reads the loaded images' function
    // tables; it takes any address and a null history table.
    let entry = unsafe { RtlLookupFunctionEntry(pc, &mut base, core::ptr::null_mut()) };
    // SAFETY: a non-null result points into the image's .pdata, which
    // stays mapped while the executable runs.
    (!entry.is_null()).then(|| (base, unsafe { *entry }))
}

/// Unwinds one frame from `pc` with `rsp`; returns the caller's (rip, rsp).
fn unwind(pc: u64, rsp: u64) -> (u64, u64) {
    let (base, mut entry) = lookup(pc).expect("function entry");
    let mut context = Context::new(pc, rsp);
    let mut handler_data = core::ptr::null_mut();
    let mut establisher = 0u64;
    // SAFETY: the entry is the one the OS found for `pc`; the context's
    // stack pointer points into `stack` of the caller, which holds the
    // return address where the unwind data says it is; nothing is executed.
    unsafe {
        RtlVirtualUnwind(
            UNW_FLAG_NHANDLER,
            base,
            pc,
            &mut entry,
            &mut context,
            &mut handler_data,
            &mut establisher,
            core::ptr::null_mut(),
        );
    }
    (context.get(CONTEXT_RIP), context.get(CONTEXT_RSP))
}

/// Prologue size of the unwind info at `base + entry.unwind_data`
/// (`UNWIND_INFO`: version/flags byte, then the prologue size).
fn prologue_size(base: u64, entry: &RuntimeFunction) -> u64 {
    let info = (base + u64::from(entry.unwind_data)) as *const u8;
    // SAFETY: UnwindData is the image-relative address of the function's
    // UNWIND_INFO in the mapped image; its second byte is SizeOfProlog.
    u64::from(unsafe { *info.add(1) })
}

#[test]
fn every_trampoline_has_a_function_table_entry_starting_at_it() {
    for (name, address, _) in trampolines() {
        let (base, entry) =
            lookup(address as u64).unwrap_or_else(|| panic!("{name}: no function table entry"));
        assert_eq!(
            base + u64::from(entry.begin),
            address as u64,
            "{name}: entry does not start at the trampoline"
        );
        assert!(entry.end > entry.begin, "{name}: empty entry");
        assert!(
            prologue_size(base, &entry) > 0,
            "{name}: no prologue described"
        );
    }
}

#[test]
fn unwinding_from_inside_a_trampoline_reaches_its_caller() {
    const RETURN_ADDRESS: u64 = 0x0000_7FF6_1234_5678;
    for (name, address, frame) in trampolines() {
        let start = address as u64;
        let (base, entry) = lookup(start).expect("function entry");
        let end = base + u64::from(entry.end);
        let body = start + prologue_size(base, &entry);

        // A stack as the trampoline sees it: the return address on top at
        // entry, FRAME bytes below it once the prologue ran.
        let mut stack = [0u64; 64];
        let top = 40;
        stack[top] = RETURN_ADDRESS;
        let entry_rsp = &stack[top] as *const u64 as u64;

        // At the first instruction: nothing allocated yet.
        assert_eq!(
            unwind(start, entry_rsp),
            (RETURN_ADDRESS, entry_rsp + 8),
            "{name}: from the first instruction"
        );
        // In the body, after `sub rsp, frame`.
        assert_eq!(
            unwind(body, entry_rsp - frame),
            (RETURN_ADDRESS, entry_rsp + 8),
            "{name}: from the body"
        );
        // At the last instruction, the `ret` after the epilogue.
        // SAFETY: `end - 1` is inside the trampoline's code.
        assert_eq!(
            unsafe { *((end - 1) as *const u8) },
            0xC3,
            "{name}: does not end with ret"
        );
        assert_eq!(
            unwind(end - 1, entry_rsp),
            (RETURN_ADDRESS, entry_rsp + 8),
            "{name}: from the final ret"
        );
    }
}
