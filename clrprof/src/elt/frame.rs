//! What the WithInfo hooks can read: `GetFunctionEnter3Info`,
//! `GetFunctionLeave3Info` and `GetFunctionTailcall3Info`.
//!
//! The `eltInfo` handle the runtime passes is valid only during the hook
//! call, so the contexts borrow the call. Nothing here allocates: argument
//! ranges are read into a fixed buffer on the hook's stack
//! ([`MAX_ARGUMENT_RANGES`] ranges, more is an error).

use crate::error::{check, Result};
use crate::ids::RawFunctionId;
use clrprof_sys as sys;
use core::marker::PhantomData;

/// The most argument ranges [`EnterContext::arguments`] reads (`this` counts).
pub const MAX_ARGUMENT_RANGES: usize = 32;

/// `COR_PRF_FRAME_INFO`: an opaque handle to the hooked frame, valid during
/// the hook call only (for `GetFunctionInfo2` with a frame, which resolves
/// generic type arguments of shared code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo<'a> {
    raw: usize,
    _call: PhantomData<&'a ()>,
}

impl FrameInfo<'_> {
    /// The raw handle.
    pub fn as_raw(&self) -> usize {
        self.raw
    }
}

impl crate::info::sealed::Sealed for FrameInfo<'_> {}

impl crate::info::FrameHandle for FrameInfo<'_> {
    fn raw_frame(&self) -> sys::COR_PRF_FRAME_INFO {
        self.raw
    }
}

/// One argument's bytes: a `COR_PRF_FUNCTION_ARGUMENT_RANGE` the runtime
/// reported for the hook call `'a`. Only the SDK makes one (from
/// `GetFunctionEnter3Info` / `GetFunctionLeave3Info`), so its bytes can be
/// read safely for as long as the call lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgumentRange<'a> {
    start: usize,
    length: u32,
    _call: PhantomData<&'a [u8]>,
}

impl<'a> ArgumentRange<'a> {
    const EMPTY: ArgumentRange<'a> = ArgumentRange {
        start: 0,
        length: 0,
        _call: PhantomData,
    };

    /// # Safety
    /// `start` must be readable for `length` bytes during `'a`.
    pub(crate) const unsafe fn new(start: usize, length: u32) -> Self {
        ArgumentRange {
            start,
            length,
            _call: PhantomData,
        }
    }

    /// Where the value starts (a copy of the register or the stack slot).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Its length in bytes.
    pub fn len(&self) -> u32 {
        self.length
    }

    /// `true` for an empty range (`void`, or no `ENABLE_FUNCTION_RETVAL`).
    pub fn is_empty(&self) -> bool {
        self.start == 0 || self.length == 0
    }

    /// The bytes of the range, for the hook call.
    pub fn bytes(&self) -> &'a [u8] {
        if self.is_empty() {
            return &[];
        }
        // SAFETY: [elt-frame] the range was reported by the runtime for the hook call
        // `'a` (only `ArgumentRange::new` makes one, from
        // GetFunctionEnter3Info / GetFunctionLeave3Info), and corprof.idl
        // guarantees those bytes readable during the hook call.
        unsafe { core::slice::from_raw_parts(self.start as *const u8, self.length as usize) }
    }
}

/// A leave hook's return value: its range, and the function it belongs to
/// (so [`decode_return`](super::args::decode_return) can check its shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnValue<'a> {
    function: Binding,
    range: ArgumentRange<'a>,
    /// On runtimes whose `GetFunctionLeave3Info` reports every value
    /// returned in registers at the saved `rax` (see `legacy_stub`): the
    /// return registers the stub saved, when the range is that slot.
    registers: Option<ReturnRegisters>,
}

pub use super::return_registers::EightByte;
pub(crate) use super::return_registers::ReturnRegisters;

impl<'a> ReturnValue<'a> {
    /// The function that returns it.
    pub fn function(&self) -> RawFunctionId {
        self.function.function
    }

    /// The record binding of the hook call (see [`Binding`]).
    pub(crate) fn binding(&self) -> Binding {
        self.function
    }

    /// The value's range, as `GetFunctionLeave3Info` reported it.
    ///
    /// On .NET Core 3.x for Linux x64 the runtime reports the saved `rax`
    /// for every value returned in registers, so for a struct returned in
    /// `xmm0`/`xmm1` or in two registers these bytes are not the value;
    /// [`decode_return`](super::args::decode_return) reads the right
    /// registers there, or refuses.
    pub fn range(&self) -> ArgumentRange<'a> {
        self.range
    }

    /// The saved return registers, on the runtime that needs them.
    pub(crate) fn registers(&self) -> Option<&ReturnRegisters> {
        self.registers.as_ref()
    }

    #[cfg(test)]
    pub(crate) fn for_tests(
        function: Binding,
        range: &'static [u8],
        registers: Option<ReturnRegisters>,
    ) -> ReturnValue<'static> {
        ReturnValue {
            function,
            // SAFETY: [local-memory] `range` is readable for its length forever ('static).
            range: unsafe { ArgumentRange::new(range.as_ptr() as usize, range.len() as u32) },
            registers,
        }
    }
}

/// Which hooked function a hook call belongs to: its `FunctionID` and the
/// serial number of the SDK's record for it.
///
/// The runtime recycles `FunctionID`s: a freed dynamic method's
/// `MethodDesc` is reused for the next one (same token, class and module),
/// and collectible code's method descriptors live in memory that is reused
/// after the unload. A record, and its serial, serve exactly one function:
/// the SDK frees it when the function goes (module unload,
/// `ClassUnloadStarted`, `DynamicMethodUnloaded`) and a recycled ID gets a
/// new record with a new serial. So what is bound to a serial (a
/// [`MethodShape`](super::args::MethodShape)) can never be applied to
/// another function that reused the ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)] // the function ID first (see `shadow_stack`)
pub struct Binding {
    pub(crate) function: RawFunctionId,
    pub(crate) serial: u64,
}

impl Binding {
    /// The function's ID.
    pub fn function(&self) -> RawFunctionId {
        self.function
    }

    /// The serial number of the record (never 0 for a record the SDK made).
    pub fn serial(&self) -> u64 {
        self.serial
    }
}

/// The argument ranges of one enter hook call, left to right (`this` first
/// for instance methods), as `GetFunctionEnter3Info` reports them.
#[derive(Clone, Copy, Debug)]
pub struct Arguments<'a> {
    function: Binding,
    count: usize,
    total_size: u32,
    ranges: [ArgumentRange<'a>; MAX_ARGUMENT_RANGES],
}

impl<'a> Arguments<'a> {
    /// The function whose arguments these are.
    pub fn function(&self) -> RawFunctionId {
        self.function.function
    }

    /// The record binding of the hook call (see [`Binding`]).
    pub(crate) fn binding(&self) -> Binding {
        self.function
    }

    /// The ranges.
    pub fn ranges(&self) -> &[ArgumentRange<'a>] {
        &self.ranges[..self.count]
    }

    /// `totalArgumentSize`: the sum of the ranges' lengths.
    pub fn total_size(&self) -> u32 {
        self.total_size
    }

    /// The bytes of range `index`, borrowed for the hook call.
    pub fn bytes(&self, index: usize) -> Option<&'a [u8]> {
        Some(self.ranges().get(index)?.bytes())
    }
}

#[cfg(test)]
impl Arguments<'static> {
    /// Arguments over static byte ranges, for unit tests.
    pub(crate) fn for_tests(function: Binding, ranges: &[&'static [u8]]) -> Self {
        let mut out = [ArgumentRange::EMPTY; MAX_ARGUMENT_RANGES];
        for (o, r) in out.iter_mut().zip(ranges) {
            // SAFETY: [local-memory] `r` is readable for its length forever ('static).
            *o = unsafe { ArgumentRange::new(r.as_ptr() as usize, r.len() as u32) };
        }
        Arguments {
            function,
            count: ranges.len(),
            total_size: ranges.iter().map(|r| r.len() as u32).sum(),
            ranges: out,
        }
    }
}

/// The WithInfo enter hook's view of the call.
pub struct EnterContext<'a> {
    shared: &'a super::EltShared,
    function: &'a Binding,
    elt_info: usize,
    /// On runtimes whose enter stub shares its xmm0/xmm1 save area with
    /// the struct-copy buffer: what keeps it (see `legacy_stub`).
    #[cfg(all(target_arch = "x86_64", unix))]
    stub_save_area: Option<&'a super::legacy_stub::SaveAreaGuard>,
}

/// The WithInfo leave hook's view of the call.
pub struct LeaveContext<'a> {
    shared: &'a super::EltShared,
    function: &'a Binding,
    elt_info: usize,
}

/// The WithInfo tailcall hook's view of the call.
pub struct TailcallContext<'a> {
    shared: &'a super::EltShared,
    function: &'a Binding,
    elt_info: usize,
}

/// Buffer for `COR_PRF_FUNCTION_ARGUMENT_INFO` with room for the maximum.
#[repr(C)]
struct ArgumentInfoBuffer {
    num_ranges: u32,
    total_argument_size: u32,
    ranges: [sys::COR_PRF_FUNCTION_ARGUMENT_RANGE; MAX_ARGUMENT_RANGES],
}

impl<'a> EnterContext<'a> {
    /// The hooked function.
    pub fn function(&self) -> RawFunctionId {
        self.function.function
    }

    #[inline(always)]
    pub(crate) fn new(
        shared: &'a super::EltShared,
        function: &'a Binding,
        elt_info: usize,
    ) -> Self {
        EnterContext {
            shared,
            function,
            elt_info,
            #[cfg(all(target_arch = "x86_64", unix))]
            stub_save_area: None,
        }
    }

    /// The context of a call on a runtime with the legacy Unix x64 stub:
    /// [`arguments`](Self::arguments) keeps the stub's save area first.
    #[cfg(all(target_arch = "x86_64", unix))]
    pub(crate) fn keeping_stub_save_area(
        mut self,
        guard: &'a super::legacy_stub::SaveAreaGuard,
    ) -> Self {
        self.stub_save_area = Some(guard);
        self
    }

    /// The raw `COR_PRF_ELT_INFO` handle.
    ///
    /// Prefer [`arguments`](Self::arguments) to calling
    /// `GetFunctionEnter3Info` with it yourself: on .NET Core 3.x for Unix
    /// x64, that call may overwrite the runtime stub's saved `xmm0`/`xmm1`
    /// (see the `elt` module docs), which `arguments` protects and a direct
    /// call does not.
    pub fn raw_elt_info(&self) -> usize {
        self.elt_info
    }

    /// `GetFunctionEnter3Info`: frame info and argument ranges. The ranges
    /// are empty unless `ENABLE_FUNCTION_ARGS` is set; the frame info needs
    /// `ENABLE_FRAME_INFO`.
    pub fn arguments(&self) -> Result<(FrameInfo<'a>, Arguments<'a>)> {
        #[cfg(all(target_arch = "x86_64", unix))]
        if let Some(guard) = self.stub_save_area {
            guard.save_once();
        }
        let mut buffer = ArgumentInfoBuffer {
            num_ranges: 0,
            total_argument_size: 0,
            ranges: [sys::COR_PRF_FUNCTION_ARGUMENT_RANGE::default(); MAX_ARGUMENT_RANGES],
        };
        let mut size = core::mem::size_of::<ArgumentInfoBuffer>() as u32;
        let mut frame = 0usize;
        // SAFETY: [elt-frame, buffer-protocol] `function` and `elt_info` are the ones the runtime passed
        // to this hook call; `buffer` is a writable COR_PRF_FUNCTION_ARGUMENT_INFO
        // with `size` bytes (a header plus MAX_ARGUMENT_RANGES ranges).
        let hr = unsafe {
            self.shared.info3.GetFunctionEnter3Info(
                self.function.function.0,
                self.elt_info,
                &mut frame,
                &mut size,
                &mut buffer as *mut ArgumentInfoBuffer as *mut sys::COR_PRF_FUNCTION_ARGUMENT_INFO,
            )
        };
        // More than MAX_ARGUMENT_RANGES ranges: the runtime's own
        // ERROR_INSUFFICIENT_BUFFER comes back as the error.
        check(hr, "ICorProfilerInfo3::GetFunctionEnter3Info")?;
        let count = (buffer.num_ranges as usize).min(MAX_ARGUMENT_RANGES);
        let mut ranges = [ArgumentRange::EMPTY; MAX_ARGUMENT_RANGES];
        for (out, raw) in ranges.iter_mut().zip(&buffer.ranges[..count]) {
            // SAFETY: [elt-frame] GetFunctionEnter3Info reported this range for the hook
            // call 'a; corprof.idl: the argument values it points to stay
            // readable until the hook returns.
            *out = unsafe { ArgumentRange::new(raw.startAddress, raw.length) };
        }
        Ok((
            FrameInfo {
                raw: frame,
                _call: PhantomData,
            },
            Arguments {
                function: *self.function,
                count,
                total_size: buffer.total_argument_size,
                ranges,
            },
        ))
    }
}

impl<'a> LeaveContext<'a> {
    /// The hooked function.
    pub fn function(&self) -> RawFunctionId {
        self.function.function
    }

    #[inline(always)]
    pub(crate) fn new(
        shared: &'a super::EltShared,
        function: &'a Binding,
        elt_info: usize,
    ) -> Self {
        LeaveContext {
            shared,
            function,
            elt_info,
        }
    }

    /// The raw `COR_PRF_ELT_INFO` handle.
    pub fn raw_elt_info(&self) -> usize {
        self.elt_info
    }

    /// `GetFunctionLeave3Info`: frame info and the return value's range
    /// (empty for `void` methods and without `ENABLE_FUNCTION_RETVAL`).
    pub fn return_value(&self) -> Result<(FrameInfo<'a>, ReturnValue<'a>)> {
        let mut frame = 0usize;
        let mut range = sys::COR_PRF_FUNCTION_ARGUMENT_RANGE::default();
        check(
            // SAFETY: [elt-frame, plain-call] IDs from this hook call; valid out pointers.
            unsafe {
                self.shared.info3.GetFunctionLeave3Info(
                    self.function.function.0,
                    self.elt_info,
                    &mut frame,
                    &mut range,
                )
            },
            "ICorProfilerInfo3::GetFunctionLeave3Info",
        )?;
        #[cfg(all(target_arch = "x86_64", unix))]
        let registers = if self.shared.legacy_stub {
            // SAFETY: [elt-frame] this runtime's leave stub is the one `legacy_stub`
            // describes, and `elt_info` is the handle it passed to this hook
            // call, whose frame is live until the hook returns.
            unsafe { super::legacy_stub::return_registers(self.elt_info, range.startAddress) }
        } else {
            None
        };
        #[cfg(not(all(target_arch = "x86_64", unix)))]
        let registers = None;
        Ok((
            FrameInfo {
                raw: frame,
                _call: PhantomData,
            },
            ReturnValue {
                function: *self.function,
                registers,
                // SAFETY: [elt-frame] GetFunctionLeave3Info reported this range for the
                // hook call 'a; the return value stays readable until the
                // hook returns (corprof.idl).
                range: unsafe { ArgumentRange::new(range.startAddress, range.length) },
            },
        ))
    }
}

impl<'a> TailcallContext<'a> {
    /// The hooked function.
    pub fn function(&self) -> RawFunctionId {
        self.function.function
    }

    #[inline(always)]
    pub(crate) fn new(
        shared: &'a super::EltShared,
        function: &'a Binding,
        elt_info: usize,
    ) -> Self {
        TailcallContext {
            shared,
            function,
            elt_info,
        }
    }

    /// The raw `COR_PRF_ELT_INFO` handle.
    pub fn raw_elt_info(&self) -> usize {
        self.elt_info
    }

    /// `GetFunctionTailcall3Info`: the frame info.
    pub fn frame_info(&self) -> Result<FrameInfo<'a>> {
        let mut frame = 0usize;
        check(
            // SAFETY: [elt-frame, plain-call] IDs from this hook call; valid out pointer.
            unsafe {
                self.shared.info3.GetFunctionTailcall3Info(
                    self.function.function.0,
                    self.elt_info,
                    &mut frame,
                )
            },
            "ICorProfilerInfo3::GetFunctionTailcall3Info",
        )?;
        Ok(FrameInfo {
            raw: frame,
            _call: PhantomData,
        })
    }
}
