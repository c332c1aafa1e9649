//! The driver proper (x86_64 Linux).

use clrprof::sys;
use clrprof::testing::fake::{FakeFunction, FakeMetaData, FakeModule, FakeRuntime};
use core::ffi::c_void;
use std::sync::Arc;
use windows_core::{Interface, GUID, HRESULT};

type Error = Box<dyn std::error::Error>;

// The loops that call a hook as its caller does. Each takes the hook's
// address, the ID (and for WithInfo the eltInfo handle) and a count >= 1,
// keeps them in callee-saved registers, and calls the hook from a 16-byte
// aligned stack (five pushes after the call's return address).
core::arch::global_asm!(
    ".text",
    // Every loop keeps its state in the callee-saved registers: saved on
    // entry (five pushes: the stack is 16-byte aligned at each call) and
    // restored on the way out.
    ".macro elt_drive_save",
    "  push rbx",
    "  push r12",
    "  push r13",
    "  push r14",
    "  push r15",
    ".endm",
    ".macro elt_drive_restore",
    "  pop r15",
    "  pop r14",
    "  pop r13",
    "  pop r12",
    "  pop rbx",
    "  ret",
    ".endm",
    // A hook that does nothing: the loops' own cost.
    ".p2align 4",
    ".globl elt_driver_null_hook",
    ".type elt_driver_null_hook, @function",
    "elt_driver_null_hook:",
    "  ret",
    ".size elt_driver_null_hook, . - elt_driver_null_hook",
    // Fast-path enter: ID in r14, argument registers expected back.
    ".p2align 4",
    ".globl elt_drive_enter",
    ".type elt_drive_enter, @function",
    "elt_drive_enter:",
    "  elt_drive_save",
    "  mov r12, rdi",
    "  mov r14, rsi",
    "  mov r13, rdx",
    "2:",
    "  call r12",
    "  dec r13",
    "  jnz 2b",
    "  elt_drive_restore",
    ".size elt_drive_enter, . - elt_drive_enter",
    // Fast-path leave and tailcall: ID in rdi, only the return registers
    // expected back.
    ".p2align 4",
    ".globl elt_drive_leave",
    ".type elt_drive_leave, @function",
    "elt_drive_leave:",
    "  elt_drive_save",
    "  mov r12, rdi",
    "  mov r14, rsi",
    "  mov r13, rdx",
    "2:",
    "  mov rdi, r14",
    "  call r12",
    "  dec r13",
    "  jnz 2b",
    "  elt_drive_restore",
    ".size elt_drive_leave, . - elt_drive_leave",
    // WithInfo: C ABI, (ID, eltInfo) in rdi, rsi.
    ".p2align 4",
    ".globl elt_drive_with_info",
    ".type elt_drive_with_info, @function",
    "elt_drive_with_info:",
    "  elt_drive_save",
    "  mov r12, rdi",
    "  mov r14, rsi",
    "  mov r15, rdx",
    "  mov r13, rcx",
    "2:",
    "  mov rdi, r14",
    "  mov rsi, r15",
    "  call r12",
    "  dec r13",
    "  jnz 2b",
    "  elt_drive_restore",
    ".size elt_drive_with_info, . - elt_drive_with_info",
);

extern "C" {
    fn elt_driver_null_hook();
    fn elt_drive_enter(hook: usize, id: usize, calls: u64);
    fn elt_drive_leave(hook: usize, id: usize, calls: u64);
    fn elt_drive_with_info(hook: usize, id: usize, elt_info: usize, calls: u64);
}

/// Which hook to call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hook {
    Enter,
    Leave,
    EnterWithInfo,
    LeaveWithInfo,
}

impl Hook {
    fn parse(s: &str) -> Result<Hook, Error> {
        Ok(match s {
            "enter" => Hook::Enter,
            "leave" => Hook::Leave,
            "enter-with-info" => Hook::EnterWithInfo,
            "leave-with-info" => Hook::LeaveWithInfo,
            other => return Err(format!("unknown hook `{other}`").into()),
        })
    }

    fn with_info(self) -> bool {
        matches!(self, Hook::EnterWithInfo | Hook::LeaveWithInfo)
    }
}

/// Stands in for the runtime stub's frame.
#[repr(C, align(16))]
struct StubFrame([u8; 0x200]);

const FUNCTION: usize = 0x1000;
const MODULE: usize = 0x2000;
const CLASS: usize = 0x3000;

/// A fake runtime with one function, `Bench.Workload::Step`, as the ELT
/// benchmark's workload has.
fn fake_runtime(info_version: u8) -> FakeRuntime {
    let fake = FakeRuntime::with_info_version(info_version);
    let md = FakeMetaData::default()
        .with_type(0x0200_0002, "Bench.Workload")
        .with_method(0x0600_0001, 0x0200_0002, "Step");
    let mut st = fake.state();
    st.modules.insert(
        MODULE,
        FakeModule {
            name: "workload.dll".into(),
            metadata: Arc::new(md),
            ..Default::default()
        },
    );
    st.functions.insert(
        FUNCTION,
        FakeFunction {
            class: CLASS,
            module: MODULE,
            token: 0x0600_0001,
            ..Default::default()
        },
    );
    drop(st);
    fake
}

fn parse_clsid(s: &str) -> Result<GUID, Error> {
    let hex: String = s
        .chars()
        .filter(|c| !matches!(c, '{' | '}' | '-'))
        .collect();
    if hex.len() != 32 {
        return Err(format!("bad CLSID `{s}`").into());
    }
    Ok(GUID::from_u128(u128::from_str_radix(&hex, 16)?))
}

fn check(hr: HRESULT, what: &str) -> Result<(), Error> {
    if hr.is_ok() {
        Ok(())
    } else {
        Err(format!("{what} failed: {:#010x}", hr.0 as u32).into())
    }
}

/// `IID_IClassFactory`.
const IID_ICLASSFACTORY: GUID = GUID::from_u128(0x00000001_0000_0000_c000_000000000046);

type DllGetClassObject =
    unsafe extern "system" fn(*const GUID, *const GUID, *mut *mut c_void) -> HRESULT;
type CreateInstance =
    unsafe extern "system" fn(*mut c_void, *mut c_void, *const GUID, *mut *mut c_void) -> HRESULT;
type Initialize = unsafe extern "system" fn(*mut c_void, *mut c_void) -> HRESULT;

/// Loads the profiler and runs its `Initialize` against `fake`, as the
/// runtime does at startup.
fn load_profiler(
    library: &str,
    clsid: &str,
    fake: &FakeRuntime,
) -> Result<libloading::Library, Error> {
    // SAFETY: loading a profiler library, which a runtime would load the
    // same way; its initialisers are a cdylib's.
    let lib = unsafe { libloading::Library::new(library)? };
    // SAFETY: `DllGetClassObject` has this signature in every COM server.
    let get: libloading::Symbol<DllGetClassObject> = unsafe { lib.get(b"DllGetClassObject")? };
    let clsid = parse_clsid(clsid)?;
    let mut factory: *mut c_void = core::ptr::null_mut();
    // SAFETY: valid GUIDs and out pointer.
    check(
        unsafe { get(&clsid, &IID_ICLASSFACTORY, &mut factory) },
        "DllGetClassObject",
    )?;
    // SAFETY: `factory` is an IClassFactory; slot 3 is CreateInstance.
    let create: CreateInstance = unsafe { *(*(factory as *const *const CreateInstance)).add(3) };
    let mut profiler: *mut c_void = core::ptr::null_mut();
    check(
        // SAFETY: no aggregation, ICorProfilerCallback asked, valid out
        // pointer.
        unsafe {
            create(
                factory,
                core::ptr::null_mut(),
                &sys::ICorProfilerCallback::IID,
                &mut profiler,
            )
        },
        "IClassFactory::CreateInstance",
    )?;
    // SAFETY: `profiler` is an ICorProfilerCallback; slot 3 is Initialize.
    let initialize: Initialize = unsafe { *(*(profiler as *const *const Initialize)).add(3) };
    let unknown = fake.unknown();
    check(
        // SAFETY: the fake is a live COM object answering ICorProfilerInfo*;
        // the profiler AddRefs what it keeps. Both objects are leaked with
        // the process, like a runtime's.
        unsafe { initialize(profiler, unknown.as_raw()) },
        "ICorProfilerCallback::Initialize",
    )?;
    core::mem::forget(unknown);
    Ok(lib)
}

type Mapper2 = unsafe extern "system" fn(sys::FunctionID, *mut c_void, *mut sys::BOOL) -> usize;

pub fn run(args: Vec<String>) -> Result<(), Error> {
    let [library, clsid, hook, calls, rest @ ..] = &args[..] else {
        return Err("usage: elt-driver LIBRARY CLSID HOOK CALLS [INFO_VERSION]".into());
    };
    let hook = Hook::parse(hook)?;
    let calls: u64 = calls.parse()?;
    if calls == 0 {
        return Err("CALLS must be at least 1".into());
    }
    let info_version: u8 = match rest.first() {
        Some(v) => v.parse()?,
        None => 14,
    };
    // The eltInfo handle: the runtime's points at its
    // COR_PRF_ELT_INFO_INTERNAL, whose first word points at the stub's
    // 16-byte aligned frame (PROFILE_PLATFORM_SPECIFIC_DATA and, on .NET
    // Core 3.x for Unix x64, the struct buffer / xmm0-xmm1 save area at
    // 0xB0). Both are zeroed memory here, as large as the runtime's.
    let frame = Box::leak(Box::new(StubFrame([0u8; 0x200])));
    let elt_info_block = Box::leak(Box::new([0usize; 8]));
    elt_info_block[0] = frame.0.as_ptr() as usize;
    let elt_info = elt_info_block.as_ptr() as usize;

    let (address, id) = if library == "none" {
        (
            elt_driver_null_hook as unsafe extern "C" fn() as usize,
            FUNCTION,
        )
    } else {
        // SAFETY: single-threaded here; the profiler reads these in Initialize.
        unsafe {
            std::env::set_var(
                "CLRPROF_ELT",
                if hook.with_info() {
                    "withinfo"
                } else {
                    "fastpath"
                },
            );
            std::env::set_var("CLRPROF_ELT_LEAVE", "1");
            std::env::set_var("CLRPROF_OUTPUT", "/dev/null");
        }
        let fake = Box::leak(Box::new(fake_runtime(info_version)));
        let lib = load_profiler(library, clsid, fake)?;
        core::mem::forget(lib);
        let elt = fake.state().elt;
        if elt.mapper == 0 {
            return Err("the profiler registered no FunctionIDMapper2".into());
        }
        // SAFETY: the address was registered as a FunctionIDMapper2.
        let mapper: Mapper2 = unsafe { core::mem::transmute::<usize, Mapper2>(elt.mapper) };
        let mut hooked: sys::BOOL = 0;
        // SAFETY: called as the runtime does, with the registered client
        // data, for a function the fake knows.
        let client =
            unsafe { mapper(FUNCTION, elt.mapper_client_data as *mut c_void, &mut hooked) };
        if hooked == 0 {
            return Err("the profiler's mapper did not hook the function".into());
        }
        let address = match hook {
            Hook::Enter => elt.hooks3[0],
            Hook::Leave => elt.hooks3[1],
            Hook::EnterWithInfo => elt.hooks3_with_info[0],
            Hook::LeaveWithInfo => elt.hooks3_with_info[1],
        };
        if address == 0 {
            return Err("the profiler registered no such hook".into());
        }
        (address, client)
    };
    let started = std::time::Instant::now();
    // SAFETY: `address` is the hook the profiler registered for this kind
    // (or the null hook) and `id` the client ID its mapper returned; each
    // loop calls it with the convention of its kind.
    unsafe {
        match hook {
            Hook::Enter => elt_drive_enter(address, id, calls),
            Hook::Leave => elt_drive_leave(address, id, calls),
            Hook::EnterWithInfo | Hook::LeaveWithInfo => {
                elt_drive_with_info(address, id, elt_info, calls)
            }
        }
    }
    let ns = started.elapsed().as_nanos();
    println!("called {calls} elapsed_ns {ns}");
    Ok(())
}
