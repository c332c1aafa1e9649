//! The fake's `ICorProfilerInfo4` … `ICorProfilerInfo9` and
//! `ICorProfilerInfo11` methods (Info10's are in `info10.rs`).
//!
//! They follow the runtime's conventions (dotnet/runtime
//! `proftoeeinterfaceimpl.cpp`): `GetNativeCodeStartAddresses` and
//! `GetDynamicFunctionInfo` answer `ERROR_INSUFFICIENT_BUFFER` with the
//! needed size when the buffer is short; the code-info and map methods
//! report the full count and fill what fits; `GetFunctionFromIP2` fails for
//! dynamic methods where `GetFunctionFromIP3` finds them; the in-memory
//! symbol methods answer the module flag `COR_PRF_MODULE_DYNAMIC` (4, a
//! success code) for a dynamic module, as CoreCLR does.

use super::info::FakeInfo_Impl;
use super::objects::info4::{FakeMethodEnum, FakeThreadEnum};
use super::objects::FakeFunctionEnum;
use super::{give, give_str, put, Buffer, FakeState, E_FAIL, E_INVALIDARG, S_OK};
use crate::error::KnownHresult;
use clrprof_sys::*;

const SHORT: HRESULT = HRESULT(KnownHresult::ERROR_INSUFFICIENT_BUFFER as i32);
const NOT_COMPILED: HRESULT = HRESULT(KnownHresult::CORPROF_E_FUNCTION_NOT_COMPILED as i32);
const DATAINCOMPLETE: HRESULT = HRESULT(KnownHresult::CORPROF_E_DATAINCOMPLETE as i32);
/// `HRESULT_FROM_WIN32(ERROR_ENVVAR_NOT_FOUND)`.
const ENVVAR_NOT_FOUND: HRESULT = HRESULT(0x8007_00CB_u32 as i32);

/// A code version's chunks and IL map.
type Version = (Vec<(usize, usize)>, Vec<(u32, u32, u32)>);

/// The code versions of `function` for `rejit`.
fn versions_of(st: &FakeState, function: usize, rejit: usize) -> Option<Vec<Version>> {
    let f = st.functions.get(&function)?;
    Some(
        f.all_versions()
            .into_iter()
            .filter(|(r, _, _)| *r == rejit)
            .map(|(_, code, map)| (code.to_vec(), map.to_vec()))
            .collect(),
    )
}

/// The version whose code starts at `start`.
fn version_at(st: &FakeState, start: usize) -> Option<Version> {
    st.functions.values().find_map(|f| {
        f.all_versions()
            .into_iter()
            .find(|(_, code, _)| code.first().map(|c| c.0) == Some(start))
            .map(|(_, code, map)| (code.to_vec(), map.to_vec()))
    })
}

/// The function and ReJIT ID whose code contains `ip`.
fn function_at(st: &FakeState, ip: usize, with_dynamic: bool) -> Option<(usize, usize)> {
    st.functions.iter().find_map(|(&id, f)| {
        if f.dynamic.is_some() && !with_dynamic {
            return None;
        }
        f.all_versions()
            .into_iter()
            .find(|(_, code, _)| code.iter().any(|&(s, n)| ip.wrapping_sub(s) < n))
            .map(|(r, _, _)| (id, r))
    })
}

fn chunks(code: &[(usize, usize)]) -> Vec<COR_PRF_CODE_INFO> {
    code.iter()
        .map(|&(s, n)| COR_PRF_CODE_INFO {
            startAddress: s,
            size: n,
        })
        .collect()
}

fn map_entries(map: &[(u32, u32, u32)]) -> Vec<COR_DEBUG_IL_TO_NATIVE_MAP> {
    map.iter()
        .map(|&(il, s, e)| COR_DEBUG_IL_TO_NATIVE_MAP {
            ilOffset: il,
            nativeStartOffset: s,
            nativeEndOffset: e,
        })
        .collect()
}

/// Reads a NUL-terminated UTF-16 string.
///
/// # Safety
/// `p` is null or points to a NUL-terminated UTF-16 string.
unsafe fn read_wide(p: *const WCHAR) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut len = 0usize;
    // SAFETY: [caller-contract] the string is NUL-terminated (guaranteed by the caller).
    while unsafe { *p.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: [local-memory] `len` units were just read.
    String::from_utf16(unsafe { core::slice::from_raw_parts(p, len) }).ok()
}

impl ICorProfilerInfo4_Impl for FakeInfo_Impl {
    unsafe fn EnumThreads(&self, ppEnum: *mut Option<ICorProfilerThreadEnum>) -> HRESULT {
        let st = enter!(self, "EnumThreads");
        put(
            ppEnum,
            Some(FakeThreadEnum::create(
                st.threads.keys().copied().collect(),
                &st.live_enumerators,
            )),
        );
        S_OK
    }
    unsafe fn InitializeCurrentThread(&self) -> HRESULT {
        let _st = enter!(self, "InitializeCurrentThread");
        S_OK
    }
    unsafe fn RequestReJIT(
        &self,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
    ) -> HRESULT {
        let _st = enter!(self, "RequestReJIT", cFunctions);
        S_OK
    }
    unsafe fn RequestRevert(
        &self,
        cFunctions: ULONG,
        moduleIds: *const ModuleID,
        methodIds: *const mdMethodDef,
        status: *mut HRESULT,
    ) -> HRESULT {
        let _st = enter!(self, "RequestRevert", cFunctions);
        if !status.is_null() {
            for i in 0..cFunctions as usize {
                // SAFETY: [caller-contract] the caller gives `cFunctions` status slots.
                unsafe { status.add(i).write(S_OK) };
            }
        }
        S_OK
    }
    unsafe fn GetCodeInfo3(
        &self,
        functionID: FunctionID,
        reJitId: ReJITID,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        let st = enter!(self, "GetCodeInfo3", functionID, reJitId, cCodeInfos);
        let Some(versions) = versions_of(&st, functionID, reJitId) else {
            return E_INVALIDARG;
        };
        // The runtime picks the first native version of that IL version.
        let Some((code, _)) = versions.first() else {
            return NOT_COMPILED;
        };
        give(
            &chunks(code),
            cCodeInfos,
            pcCodeInfos,
            codeInfos,
            Buffer::FillReportTotal,
        )
    }
    unsafe fn GetFunctionFromIP2(
        &self,
        ip: LPCBYTE,
        pFunctionId: *mut FunctionID,
        pReJitId: *mut ReJITID,
    ) -> HRESULT {
        let st = enter!(self, "GetFunctionFromIP2", ip);
        match function_at(&st, ip as usize, false) {
            Some((f, r)) => {
                put(pFunctionId, f);
                put(pReJitId, r);
                S_OK
            }
            None => E_FAIL,
        }
    }
    unsafe fn GetReJITIDs(
        &self,
        functionId: FunctionID,
        cReJitIds: ULONG,
        pcReJitIds: *mut ULONG,
        reJitIds: *mut ReJITID,
    ) -> HRESULT {
        let st = enter!(self, "GetReJITIDs", functionId, cReJitIds);
        let f = get!(st.functions, functionId);
        let mut ids: Vec<usize> = f
            .versions
            .iter()
            .map(|v| v.rejit_id)
            .filter(|&r| r != 0)
            .collect();
        ids.dedup();
        give(
            &ids,
            cReJitIds,
            pcReJitIds,
            reJitIds,
            Buffer::FillReportTotal,
        )
    }
    unsafe fn GetILToNativeMapping2(
        &self,
        functionId: FunctionID,
        reJitId: ReJITID,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        let st = enter!(self, "GetILToNativeMapping2", functionId, reJitId, cMap);
        let Some(versions) = versions_of(&st, functionId, reJitId) else {
            return E_INVALIDARG;
        };
        let Some((_, il_map)) = versions.first() else {
            return E_INVALIDARG;
        };
        give(
            &map_entries(il_map),
            cMap,
            pcMap,
            map,
            Buffer::FillReportTotal,
        )
    }
    unsafe fn EnumJITedFunctions2(&self, ppEnum: *mut Option<ICorProfilerFunctionEnum>) -> HRESULT {
        let st = enter!(self, "EnumJITedFunctions2");
        put(
            ppEnum,
            Some(FakeFunctionEnum::create(
                st.jitted.clone(),
                &st.live_enumerators,
            )),
        );
        S_OK
    }
    unsafe fn GetObjectSize2(&self, objectId: ObjectID, pcSize: *mut SIZE_T) -> HRESULT {
        let st = enter!(self, "GetObjectSize2", objectId);
        put(pcSize, get!(st.objects, objectId).size as usize);
        S_OK
    }
}

impl ICorProfilerInfo5_Impl for FakeInfo_Impl {
    unsafe fn GetEventMask2(&self, pdwEventsLow: *mut DWORD, pdwEventsHigh: *mut DWORD) -> HRESULT {
        let st = enter!(self, "GetEventMask2");
        put(pdwEventsLow, st.event_mask);
        put(pdwEventsHigh, st.event_mask_high);
        S_OK
    }
    unsafe fn SetEventMask2(&self, dwEventsLow: DWORD, dwEventsHigh: DWORD) -> HRESULT {
        let mut st = enter!(self, "SetEventMask2", dwEventsLow, dwEventsHigh);
        if let Some(hr) = super::info::mask_refusal(&st, dwEventsLow, dwEventsHigh) {
            return hr;
        }
        st.event_mask = dwEventsLow;
        st.event_mask_high = dwEventsHigh;
        S_OK
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
        let st = enter!(
            self,
            "EnumNgenModuleMethodsInliningThisMethod",
            inlinersModuleId,
            inlineeModuleId,
            inlineeMethodId
        );
        get!(st.modules, inlineeModuleId);
        let inliners = get!(st.modules, inlinersModuleId);
        let Some(table) = inliners.inliners else {
            return DATAINCOMPLETE;
        };
        let (methods, incomplete) = table
            .iter()
            .find(|(key, _, _)| *key == (inlineeModuleId, inlineeMethodId))
            .map(|(_, m, i)| (m.clone(), *i))
            .unwrap_or_default();
        put(incompleteData, incomplete as BOOL);
        let methods = methods
            .into_iter()
            .map(|(moduleId, methodId)| COR_PRF_METHOD { moduleId, methodId })
            .collect();
        put(
            ppEnum,
            Some(FakeMethodEnum::create(methods, &st.live_enumerators)),
        );
        S_OK
    }
}

impl ICorProfilerInfo7_Impl for FakeInfo_Impl {
    unsafe fn ApplyMetaData(&self, moduleId: ModuleID) -> HRESULT {
        let st = enter!(self, "ApplyMetaData", moduleId);
        get!(st.modules, moduleId);
        S_OK
    }
    unsafe fn GetInMemorySymbolsLength(
        &self,
        moduleId: ModuleID,
        pCountSymbolBytes: *mut DWORD,
    ) -> HRESULT {
        let st = enter!(self, "GetInMemorySymbolsLength", moduleId);
        let m = get!(st.modules, moduleId);
        put(pCountSymbolBytes, 0);
        if m.flags & COR_PRF_MODULE_DYNAMIC != 0 {
            return HRESULT(COR_PRF_MODULE_DYNAMIC as i32);
        }
        put(
            pCountSymbolBytes,
            m.symbols.as_ref().map_or(0, |s| s.len() as u32),
        );
        S_OK
    }
    unsafe fn ReadInMemorySymbols(
        &self,
        moduleId: ModuleID,
        symbolsReadOffset: DWORD,
        pSymbolBytes: *mut BYTE,
        countSymbolBytes: DWORD,
        pCountSymbolBytesRead: *mut DWORD,
    ) -> HRESULT {
        let st = enter!(
            self,
            "ReadInMemorySymbols",
            moduleId,
            symbolsReadOffset,
            countSymbolBytes
        );
        if pSymbolBytes.is_null() || pCountSymbolBytesRead.is_null() {
            return E_INVALIDARG;
        }
        put(pCountSymbolBytesRead, 0);
        let m = get!(st.modules, moduleId);
        if m.flags & COR_PRF_MODULE_DYNAMIC != 0 {
            return HRESULT(COR_PRF_MODULE_DYNAMIC as i32);
        }
        let Some(symbols) = m.symbols else {
            return E_INVALIDARG;
        };
        let offset = symbolsReadOffset as usize;
        if offset >= symbols.len() {
            return E_INVALIDARG;
        }
        let n = (symbols.len() - offset).min(countSymbolBytes as usize);
        // SAFETY: [caller-contract] the caller gives `countSymbolBytes >= n` writable bytes.
        unsafe { core::ptr::copy_nonoverlapping(symbols[offset..].as_ptr(), pSymbolBytes, n) };
        put(pCountSymbolBytesRead, n as u32);
        S_OK
    }
}

impl ICorProfilerInfo8_Impl for FakeInfo_Impl {
    unsafe fn IsFunctionDynamic(&self, functionId: FunctionID, isDynamic: *mut BOOL) -> HRESULT {
        let st = enter!(self, "IsFunctionDynamic", functionId);
        put(
            isDynamic,
            get!(st.functions, functionId).dynamic.is_some() as BOOL,
        );
        S_OK
    }
    unsafe fn GetFunctionFromIP3(
        &self,
        ip: LPCBYTE,
        functionId: *mut FunctionID,
        pReJitId: *mut ReJITID,
    ) -> HRESULT {
        let st = enter!(self, "GetFunctionFromIP3", ip);
        match function_at(&st, ip as usize, true) {
            Some((f, r)) => {
                put(functionId, f);
                put(pReJitId, r);
                S_OK
            }
            None => E_FAIL,
        }
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
        let st = enter!(self, "GetDynamicFunctionInfo", functionId, cchName);
        let f = get!(st.functions, functionId);
        let Some(dynamic) = f.dynamic else {
            return E_INVALIDARG;
        };
        put(moduleId, f.module);
        // The pointer stays valid while the function stays in the state
        // (the state holds the same `Arc`).
        put(ppvSig, dynamic.signature.as_ptr());
        put(pbSig, dynamic.signature.len() as u32);
        give_str(
            &dynamic.name,
            cchName,
            pcchName,
            wszName,
            Buffer::ShortIsError,
        )
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
        let st = enter!(
            self,
            "GetNativeCodeStartAddresses",
            functionID,
            reJitId,
            cCodeStartAddresses
        );
        let Some(versions) = versions_of(&st, functionID, reJitId) else {
            return E_INVALIDARG;
        };
        let starts: Vec<usize> = versions
            .iter()
            .map(|(code, _)| code.first().map_or(0, |c| c.0))
            .collect();
        put(pcCodeStartAddresses, starts.len() as u32);
        if codeStartAddresses.is_null() {
            return S_OK;
        }
        if (cCodeStartAddresses as usize) < starts.len() {
            return SHORT;
        }
        give(
            &starts,
            cCodeStartAddresses,
            pcCodeStartAddresses,
            codeStartAddresses,
            Buffer::FillReportTotal,
        )
    }
    unsafe fn GetILToNativeMapping3(
        &self,
        pNativeCodeStartAddress: UINT_PTR,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        let st = enter!(self, "GetILToNativeMapping3", pNativeCodeStartAddress, cMap);
        let Some((_, il_map)) = version_at(&st, pNativeCodeStartAddress) else {
            return E_INVALIDARG;
        };
        give(
            &map_entries(&il_map),
            cMap,
            pcMap,
            map,
            Buffer::FillReportTotal,
        )
    }
    unsafe fn GetCodeInfo4(
        &self,
        pNativeCodeStartAddress: UINT_PTR,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        let st = enter!(self, "GetCodeInfo4", pNativeCodeStartAddress, cCodeInfos);
        let Some((code, _)) = version_at(&st, pNativeCodeStartAddress) else {
            return NOT_COMPILED;
        };
        give(
            &chunks(&code),
            cCodeInfos,
            pcCodeInfos,
            codeInfos,
            Buffer::FillReportTotal,
        )
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
        let st = enter!(self, "GetEnvironmentVariable", cchValue);
        // SAFETY: [caller-contract] the caller passes a NUL-terminated name (or null).
        let Some(name) = (unsafe { read_wide(szName) }) else {
            return E_INVALIDARG;
        };
        let Some(value) = st.environment.get(&name).cloned() else {
            put(pcchValue, 0);
            return ENVVAR_NOT_FOUND;
        };
        // Like GetEnvironmentVariableW: the size with the NUL when short,
        // the length without it when the value fits.
        let wide: Vec<u16> = value.encode_utf16().collect();
        if (cchValue as usize) < wide.len() + 1 {
            put(pcchValue, wide.len() as u32 + 1);
            return if szValue.is_null() { S_OK } else { SHORT };
        }
        // SAFETY: [caller-contract, local-memory] `szValue` has `cchValue > wide.len()` writable units.
        unsafe {
            core::ptr::copy_nonoverlapping(wide.as_ptr(), szValue, wide.len());
            szValue.add(wide.len()).write(0);
        }
        put(pcchValue, wide.len() as u32);
        S_OK
    }
    unsafe fn SetEnvironmentVariable(
        &self,
        szName: *const WCHAR,
        szValue: *const WCHAR,
    ) -> HRESULT {
        let mut st = enter!(self, "SetEnvironmentVariable", szValue.is_null());
        // SAFETY: [caller-contract] the caller passes NUL-terminated strings (or null).
        let (name, value) = unsafe { (read_wide(szName), read_wide(szValue)) };
        let Some(name) = name else {
            return E_INVALIDARG;
        };
        match value {
            Some(v) => st.environment.insert(name, v),
            None => st.environment.remove(&name),
        };
        S_OK
    }
}
