//! The fake's `ICorProfilerInfo4` … `ICorProfilerInfo9` and
//! `ICorProfilerInfo11`: every method answers `E_NOTIMPL`. They are here
//! because the fake implements `ICorProfilerInfo15`, whose vtable has them
//! all; a fake that answers them from its state replaces this file.

use super::info::FakeInfo_Impl;
use super::E_NOTIMPL;
use clrprof_sys::*;
impl ICorProfilerInfo4_Impl for FakeInfo_Impl {
    unsafe fn EnumThreads(&self, ppEnum: *mut Option<ICorProfilerThreadEnum>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn InitializeCurrentThread(&self) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn RequestReJIT(
        &self,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn RequestRevert(
        &self,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
        status: *mut HRESULT,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCodeInfo3(
        &self,
        functionID: FunctionID,
        reJitId: ReJITID,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFunctionFromIP2(
        &self,
        ip: LPCBYTE,
        pFunctionId: *mut FunctionID,
        pReJitId: *mut ReJITID,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetReJITIDs(
        &self,
        functionId: FunctionID,
        cReJitIds: ULONG,
        pcReJitIds: *mut ULONG,
        reJitIds: *mut ReJITID,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetILToNativeMapping2(
        &self,
        functionId: FunctionID,
        reJitId: ReJITID,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumJITedFunctions2(&self, ppEnum: *mut Option<ICorProfilerFunctionEnum>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetObjectSize2(&self, objectId: ObjectID, pcSize: *mut SIZE_T) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo5_Impl for FakeInfo_Impl {
    unsafe fn GetEventMask2(&self, pdwEventsLow: *mut DWORD, pdwEventsHigh: *mut DWORD) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn SetEventMask2(&self, dwEventsLow: DWORD, dwEventsHigh: DWORD) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo6_Impl for FakeInfo_Impl {
    unsafe fn EnumNgenModuleMethodsInliningThisMethod(
        &self,
        inlinersModuleId: ModuleID,
        inlineeModuleId: ModuleID,
        inlineeMethodId: mdMethodDef,
        incompleteData: *mut BOOL,
        ppEnum: *mut Option<ICorProfilerMethodEnum>,
    ) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo7_Impl for FakeInfo_Impl {
    unsafe fn ApplyMetaData(&self, moduleId: ModuleID) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetInMemorySymbolsLength(
        &self,
        moduleId: ModuleID,
        pCountSymbolBytes: *mut DWORD,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn ReadInMemorySymbols(
        &self,
        moduleId: ModuleID,
        symbolsReadOffset: DWORD,
        pSymbolBytes: *mut BYTE,
        countSymbolBytes: DWORD,
        pCountSymbolBytesRead: *mut DWORD,
    ) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo8_Impl for FakeInfo_Impl {
    unsafe fn IsFunctionDynamic(&self, functionId: FunctionID, isDynamic: *mut BOOL) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFunctionFromIP3(
        &self,
        ip: LPCBYTE,
        functionId: *mut FunctionID,
        pReJitId: *mut ReJITID,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetDynamicFunctionInfo(
        &self,
        functionId: FunctionID,
        moduleId: *mut ModuleID,
        ppvSig: *mut PCCOR_SIGNATURE,
        pbSig: *mut ULONG,
        cchName: ULONG,
        pcchName: *mut ULONG,
        wszName: *mut WCHAR,
    ) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo9_Impl for FakeInfo_Impl {
    unsafe fn GetNativeCodeStartAddresses(
        &self,
        functionID: FunctionID,
        reJitId: ReJITID,
        cCodeStartAddresses: ULONG32,
        pcCodeStartAddresses: *mut ULONG32,
        codeStartAddresses: *mut UINT_PTR,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetILToNativeMapping3(
        &self,
        pNativeCodeStartAddress: UINT_PTR,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCodeInfo4(
        &self,
        pNativeCodeStartAddress: UINT_PTR,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        E_NOTIMPL
    }
}

impl ICorProfilerInfo11_Impl for FakeInfo_Impl {
    unsafe fn GetEnvironmentVariable(
        &self,
        szName: *const WCHAR,
        cchValue: ULONG,
        pcchValue: *mut ULONG,
        szValue: *mut WCHAR,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn SetEnvironmentVariable(
        &self,
        szName: *const WCHAR,
        szValue: *const WCHAR,
    ) -> HRESULT {
        E_NOTIMPL
    }
}
