//! What the WithInfo hooks can read: `GetFunctionEnter3Info`,
//! `GetFunctionLeave3Info` and `GetFunctionTailcall3Info`.
//!
//! The `eltInfo` handle the runtime passes is valid only during the hook
//! call, so the contexts borrow the call. Nothing here allocates: argument
//! ranges are read into a fixed buffer on the hook's stack
//! ([`MAX_ARGUMENT_RANGES`] ranges, more is an error).

use crate::error::{check, Error, Result};
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

/// One argument's bytes: `COR_PRF_FUNCTION_ARGUMENT_RANGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ArgumentRange {
    /// Where the argument's value starts (a copy of the register or the
    /// stack slot, valid during the hook call).
    pub start: usize,
    /// Its length in bytes.
    pub length: u32,
}

impl ArgumentRange {
    /// The bytes of the range.
    ///
    /// # Safety
    /// Only during the hook call that produced the range (the runtime's
    /// guarantee for `GetFunctionEnter3Info` / `GetFunctionLeave3Info`).
    pub unsafe fn bytes(&self) -> &[u8] {
        if self.start == 0 || self.length == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller: the runtime's range is readable
        // for `length` bytes during the hook call.
        unsafe { core::slice::from_raw_parts(self.start as *const u8, self.length as usize) }
    }
}

/// The argument ranges of one enter hook call, left to right (`this` first
/// for instance methods), as `GetFunctionEnter3Info` reports them.
#[derive(Clone, Copy, Debug)]
pub struct Arguments<'a> {
    count: usize,
    total_size: u32,
    ranges: [ArgumentRange; MAX_ARGUMENT_RANGES],
    _call: PhantomData<&'a ()>,
}

impl<'a> Arguments<'a> {
    /// The ranges.
    pub fn ranges(&self) -> &[ArgumentRange] {
        &self.ranges[..self.count]
    }

    /// `totalArgumentSize`: the sum of the ranges' lengths.
    pub fn total_size(&self) -> u32 {
        self.total_size
    }

    /// The bytes of range `index`, borrowed for the hook call.
    pub fn bytes(&self, index: usize) -> Option<&'a [u8]> {
        let range = self.ranges().get(index)?;
        // SAFETY: `Arguments<'a>` only exists during the hook call ('a).
        Some(unsafe { core::mem::transmute::<&[u8], &'a [u8]>(range.bytes()) })
    }
}

#[cfg(test)]
impl Arguments<'static> {
    /// Arguments over static byte ranges, for unit tests.
    pub(crate) fn for_tests(ranges: &[&'static [u8]]) -> Self {
        let mut out = [ArgumentRange::default(); MAX_ARGUMENT_RANGES];
        for (o, r) in out.iter_mut().zip(ranges) {
            *o = ArgumentRange {
                start: r.as_ptr() as usize,
                length: r.len() as u32,
            };
        }
        Arguments {
            count: ranges.len(),
            total_size: ranges.iter().map(|r| r.len() as u32).sum(),
            ranges: out,
            _call: PhantomData,
        }
    }
}

/// The WithInfo enter hook's view of the call.
pub struct EnterContext<'a> {
    info3: &'a sys::ICorProfilerInfo3,
    function: RawFunctionId,
    elt_info: usize,
}

/// The WithInfo leave hook's view of the call.
pub struct LeaveContext<'a> {
    info3: &'a sys::ICorProfilerInfo3,
    function: RawFunctionId,
    elt_info: usize,
}

/// The WithInfo tailcall hook's view of the call.
pub struct TailcallContext<'a> {
    info3: &'a sys::ICorProfilerInfo3,
    function: RawFunctionId,
    elt_info: usize,
}

/// Buffer for `COR_PRF_FUNCTION_ARGUMENT_INFO` with room for the maximum.
#[repr(C)]
struct ArgumentInfoBuffer {
    num_ranges: u32,
    total_argument_size: u32,
    ranges: [sys::COR_PRF_FUNCTION_ARGUMENT_RANGE; MAX_ARGUMENT_RANGES],
}

const E_INSUFFICIENT_BUFFER: i32 = 0x8007_007A_u32 as i32;

impl<'a> EnterContext<'a> {
    pub(crate) fn new(
        info3: &'a sys::ICorProfilerInfo3,
        function: RawFunctionId,
        elt_info: usize,
    ) -> Self {
        EnterContext {
            info3,
            function,
            elt_info,
        }
    }

    /// The raw `COR_PRF_ELT_INFO` handle.
    pub fn raw_elt_info(&self) -> usize {
        self.elt_info
    }

    /// `GetFunctionEnter3Info`: frame info and argument ranges. The ranges
    /// are empty unless `ENABLE_FUNCTION_ARGS` is set; the frame info needs
    /// `ENABLE_FRAME_INFO`.
    pub fn arguments(&self) -> Result<(FrameInfo<'a>, Arguments<'a>)> {
        let mut buffer = ArgumentInfoBuffer {
            num_ranges: 0,
            total_argument_size: 0,
            ranges: [sys::COR_PRF_FUNCTION_ARGUMENT_RANGE::default(); MAX_ARGUMENT_RANGES],
        };
        let mut size = core::mem::size_of::<ArgumentInfoBuffer>() as u32;
        let mut frame = 0usize;
        // SAFETY: `function` and `elt_info` are the ones the runtime passed
        // to this hook call; `buffer` is a writable COR_PRF_FUNCTION_ARGUMENT_INFO
        // with `size` bytes (a header plus MAX_ARGUMENT_RANGES ranges).
        let hr = unsafe {
            self.info3.GetFunctionEnter3Info(
                self.function.0,
                self.elt_info,
                &mut frame,
                &mut size,
                &mut buffer as *mut ArgumentInfoBuffer as *mut sys::COR_PRF_FUNCTION_ARGUMENT_INFO,
            )
        };
        if hr.0 == E_INSUFFICIENT_BUFFER {
            return Err(Error::Usage(format!(
                "the method has more than {MAX_ARGUMENT_RANGES} argument ranges ({size} bytes of argument info)"
            )));
        }
        check(hr, "ICorProfilerInfo3::GetFunctionEnter3Info")?;
        let count = (buffer.num_ranges as usize).min(MAX_ARGUMENT_RANGES);
        let mut ranges = [ArgumentRange::default(); MAX_ARGUMENT_RANGES];
        for (out, raw) in ranges.iter_mut().zip(&buffer.ranges[..count]) {
            *out = ArgumentRange {
                start: raw.startAddress,
                length: raw.length,
            };
        }
        Ok((
            FrameInfo {
                raw: frame,
                _call: PhantomData,
            },
            Arguments {
                count,
                total_size: buffer.total_argument_size,
                ranges,
                _call: PhantomData,
            },
        ))
    }
}

impl<'a> LeaveContext<'a> {
    pub(crate) fn new(
        info3: &'a sys::ICorProfilerInfo3,
        function: RawFunctionId,
        elt_info: usize,
    ) -> Self {
        LeaveContext {
            info3,
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
    pub fn return_value(&self) -> Result<(FrameInfo<'a>, ArgumentRange)> {
        let mut frame = 0usize;
        let mut range = sys::COR_PRF_FUNCTION_ARGUMENT_RANGE::default();
        check(
            // SAFETY: IDs from this hook call; valid out pointers.
            unsafe {
                self.info3.GetFunctionLeave3Info(
                    self.function.0,
                    self.elt_info,
                    &mut frame,
                    &mut range,
                )
            },
            "ICorProfilerInfo3::GetFunctionLeave3Info",
        )?;
        Ok((
            FrameInfo {
                raw: frame,
                _call: PhantomData,
            },
            ArgumentRange {
                start: range.startAddress,
                length: range.length,
            },
        ))
    }
}

impl<'a> TailcallContext<'a> {
    pub(crate) fn new(
        info3: &'a sys::ICorProfilerInfo3,
        function: RawFunctionId,
        elt_info: usize,
    ) -> Self {
        TailcallContext {
            info3,
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
            // SAFETY: IDs from this hook call; valid out pointer.
            unsafe {
                self.info3
                    .GetFunctionTailcall3Info(self.function.0, self.elt_info, &mut frame)
            },
            "ICorProfilerInfo3::GetFunctionTailcall3Info",
        )?;
        Ok(FrameInfo {
            raw: frame,
            _call: PhantomData,
        })
    }
}
