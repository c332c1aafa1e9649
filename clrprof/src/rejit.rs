//! Interfaces the runtime lends to a callback for the duration of the call:
//! `ICorProfilerFunctionControl` (ReJIT parameters) and
//! `ICorProfilerAssemblyReferenceProvider` (extra assembly references).

use crate::error::{check, Result};
use clrprof_sys as sys;
use core::ffi::c_void;
use windows_core::{IUnknown, Interface};

/// `ICorProfilerFunctionControl`, lent by the runtime to
/// [`Profiler::get_rejit_parameters`](crate::Profiler::get_rejit_parameters).
pub struct FunctionControl {
    raw: sys::ICorProfilerFunctionControl,
}

impl FunctionControl {
    /// Wraps the borrowed pointer the runtime passes (taking a reference of
    /// our own, released on drop).
    ///
    /// # Safety
    /// `ptr` is null or an `ICorProfilerFunctionControl*` valid for the call.
    pub unsafe fn from_raw_borrowed(ptr: *mut c_void) -> Option<Self> {
        // SAFETY: guaranteed by the caller; `cloned` AddRefs.
        let unknown = unsafe { IUnknown::from_raw_borrowed(&ptr) }?;
        unknown.cast().ok().map(|raw| FunctionControl { raw })
    }

    /// The raw interface.
    pub fn raw(&self) -> &sys::ICorProfilerFunctionControl {
        &self.raw
    }

    /// `SetCodegenFlags` (`COR_PRF_CODEGEN_FLAGS`).
    pub fn set_codegen_flags(&self, flags: u32) -> Result<()> {
        // SAFETY: plain value argument.
        check(
            unsafe { self.raw.SetCodegenFlags(flags) },
            "ICorProfilerFunctionControl::SetCodegenFlags",
        )
        .map(|_| ())
    }

    /// `SetILFunctionBody`: the new method header and IL. The runtime copies
    /// the bytes, so no special allocator is needed here.
    pub fn set_il_function_body(&self, body: &[u8]) -> Result<()> {
        let len = u32::try_from(body.len())
            .map_err(|_| crate::Error::InvalidArgument("IL body larger than 4 GiB"))?;
        // SAFETY: `body` is `len` readable bytes for the call.
        check(
            unsafe { self.raw.SetILFunctionBody(len, body.as_ptr()) },
            "ICorProfilerFunctionControl::SetILFunctionBody",
        )
        .map(|_| ())
    }

    /// `SetILInstrumentedCodeMap`: old-to-new IL offset map.
    pub fn set_il_instrumented_code_map(&self, map: &[sys::COR_IL_MAP]) -> Result<()> {
        let len = u32::try_from(map.len())
            .map_err(|_| crate::Error::InvalidArgument("IL map too long"))?;
        // SAFETY: `map` is `len` readable entries for the call.
        check(
            unsafe { self.raw.SetILInstrumentedCodeMap(len, map.as_ptr()) },
            "ICorProfilerFunctionControl::SetILInstrumentedCodeMap",
        )
        .map(|_| ())
    }
}

/// `ICorProfilerAssemblyReferenceProvider`, lent by the runtime to
/// [`Profiler::get_assembly_references`](crate::Profiler::get_assembly_references).
pub struct AssemblyReferenceProvider {
    raw: sys::ICorProfilerAssemblyReferenceProvider,
}

impl AssemblyReferenceProvider {
    /// Wraps the borrowed pointer the runtime passes.
    ///
    /// # Safety
    /// `ptr` is null or an `ICorProfilerAssemblyReferenceProvider*` valid for the call.
    pub unsafe fn from_raw_borrowed(ptr: *mut c_void) -> Option<Self> {
        // SAFETY: guaranteed by the caller; `cast` AddRefs.
        let unknown = unsafe { IUnknown::from_raw_borrowed(&ptr) }?;
        unknown
            .cast()
            .ok()
            .map(|raw| AssemblyReferenceProvider { raw })
    }

    /// `AddAssemblyReference` with the raw description.
    ///
    /// # Safety
    /// Every pointer inside `info` must be valid for the call.
    pub unsafe fn add_assembly_reference(
        &self,
        info: &sys::COR_PRF_ASSEMBLY_REFERENCE_INFO,
    ) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        check(
            unsafe { self.raw.AddAssemblyReference(info) },
            "ICorProfilerAssemblyReferenceProvider::AddAssemblyReference",
        )
        .map(|_| ())
    }
}
