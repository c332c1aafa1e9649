//! The fake `ICorProfilerInfo` object: Info1–3 here; Info4–9 and 11 in
//! `info_newer.rs`, Info10 in `info10.rs`.

use super::metadata::FakeMetaDataImport;
use super::objects::{FakeFunctionEnum, FakeMethodMalloc, FakeModuleEnum, FakeObjectEnum};
use super::{
    give, give_str, put, Buffer, FakeState, E_FAIL, E_INVALIDARG, E_NOTIMPL, S_FALSE, S_OK,
};
use crate::error::KnownHresult;
use clrprof_sys::*;
use core::ffi::c_void;
use std::sync::{Arc, Mutex};
use windows_core::{implement, Interface};

#[implement(ICorProfilerInfo15)]
pub(crate) struct FakeInfo {
    pub(crate) state: Arc<Mutex<FakeState>>,
}

const E_NOINTERFACE: HRESULT = HRESULT(KnownHresult::E_NOINTERFACE as i32);
const CORPROF_E_FUNCTION_NOT_COMPILED: HRESULT =
    HRESULT(KnownHresult::CORPROF_E_FUNCTION_NOT_COMPILED as i32);
const CORPROF_E_FUNCTION_NOT_IL: HRESULT = HRESULT(KnownHresult::CORPROF_E_FUNCTION_NOT_IL as i32);
const CORPROF_E_CLASSID_IS_ARRAY: HRESULT =
    HRESULT(KnownHresult::CORPROF_E_CLASSID_IS_ARRAY as i32);
const CORPROF_E_NOT_MANAGED_THREAD: HRESULT =
    HRESULT(KnownHresult::CORPROF_E_NOT_MANAGED_THREAD as i32);
const CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER: HRESULT =
    HRESULT(KnownHresult::CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER as i32);

impl FakeInfo {
    unsafe fn do_GetClassFromObject(&self, objectId: ObjectID, pClassId: *mut ClassID) -> HRESULT {
        let st = enter!(self, "GetClassFromObject", objectId);
        put(pClassId, get!(st.objects, objectId).class);
        S_OK
    }

    unsafe fn do_GetClassFromToken(
        &self,
        moduleId: ModuleID,
        typeDef: mdTypeDef,
        pClassId: *mut ClassID,
    ) -> HRESULT {
        let st = enter!(self, "GetClassFromToken", moduleId, typeDef);
        let m = get!(st.modules, moduleId);
        put(pClassId, get!(m.classes_by_token, typeDef));
        S_OK
    }

    unsafe fn do_GetCodeInfo(
        &self,
        functionId: FunctionID,
        pStart: *mut LPCBYTE,
        pcSize: *mut ULONG,
    ) -> HRESULT {
        let st = enter!(self, "GetCodeInfo", functionId);
        let f = get!(st.functions, functionId);
        let Some(&(start, size)) = f.code.first() else {
            return CORPROF_E_FUNCTION_NOT_COMPILED;
        };
        put(pStart, start as LPCBYTE);
        put(pcSize, size as u32);
        S_OK
    }

    unsafe fn do_GetEventMask(&self, pdwEvents: *mut DWORD) -> HRESULT {
        let st = enter!(self, "GetEventMask");
        put(pdwEvents, st.event_mask);
        S_OK
    }

    unsafe fn do_GetFunctionFromIP(&self, ip: LPCBYTE, pFunctionId: *mut FunctionID) -> HRESULT {
        let st = enter!(self, "GetFunctionFromIP", ip);
        let ip = ip as usize;
        // Like the runtime: every native code version, never a dynamic method.
        let found = st.functions.iter().find(|(_, f)| {
            f.dynamic.is_none()
                && f.all_versions()
                    .iter()
                    .any(|(_, code, _)| code.iter().any(|&(s, n)| ip.wrapping_sub(s) < n))
        });
        match found {
            Some((&id, _)) => {
                put(pFunctionId, id);
                S_OK
            }
            None => E_FAIL,
        }
    }

    unsafe fn do_GetFunctionFromToken(
        &self,
        moduleId: ModuleID,
        token: mdToken,
        pFunctionId: *mut FunctionID,
    ) -> HRESULT {
        let st = enter!(self, "GetFunctionFromToken", moduleId, token);
        let m = get!(st.modules, moduleId);
        put(pFunctionId, get!(m.functions_by_token, token));
        S_OK
    }

    unsafe fn do_GetHandleFromThread(&self, threadId: ThreadID, phThread: *mut HANDLE) -> HRESULT {
        let st = enter!(self, "GetHandleFromThread", threadId);
        put(phThread, get!(st.threads, threadId).handle as HANDLE);
        S_OK
    }

    unsafe fn do_GetObjectSize(&self, objectId: ObjectID, pcSize: *mut ULONG) -> HRESULT {
        let st = enter!(self, "GetObjectSize", objectId);
        put(pcSize, get!(st.objects, objectId).size);
        S_OK
    }

    unsafe fn do_IsArrayClass(
        &self,
        classId: ClassID,
        pBaseElemType: *mut CorElementType,
        pBaseClassId: *mut ClassID,
        pcRank: *mut ULONG,
    ) -> HRESULT {
        let st = enter!(self, "IsArrayClass", classId);
        match get!(st.classes, classId).array {
            Some((et, elem, rank)) => {
                put(pBaseElemType, et);
                put(pBaseClassId, elem);
                put(pcRank, rank);
                S_OK
            }
            None => {
                put(pBaseClassId, 0);
                S_FALSE
            }
        }
    }

    unsafe fn do_GetThreadInfo(&self, threadId: ThreadID, pdwWin32ThreadId: *mut DWORD) -> HRESULT {
        let st = enter!(self, "GetThreadInfo", threadId);
        put(pdwWin32ThreadId, get!(st.threads, threadId).os_id);
        S_OK
    }

    unsafe fn do_GetCurrentThreadID(&self, pThreadId: *mut ThreadID) -> HRESULT {
        let st = enter!(self, "GetCurrentThreadID");
        match st.current_thread {
            Some(t) => {
                put(pThreadId, t);
                S_OK
            }
            None => CORPROF_E_NOT_MANAGED_THREAD,
        }
    }

    unsafe fn do_GetClassIDInfo(
        &self,
        classId: ClassID,
        pModuleId: *mut ModuleID,
        pTypeDefToken: *mut mdTypeDef,
    ) -> HRESULT {
        let st = enter!(self, "GetClassIDInfo", classId);
        let c = get!(st.classes, classId);
        put(pModuleId, c.module);
        put(pTypeDefToken, c.type_def);
        S_OK
    }

    unsafe fn do_GetFunctionInfo(
        &self,
        functionId: FunctionID,
        pClassId: *mut ClassID,
        pModuleId: *mut ModuleID,
        pToken: *mut mdToken,
    ) -> HRESULT {
        let st = enter!(self, "GetFunctionInfo", functionId);
        let f = get!(st.functions, functionId);
        put(pClassId, f.class);
        put(pModuleId, f.module);
        put(pToken, f.token);
        S_OK
    }

    unsafe fn do_SetEventMask(&self, dwEvents: DWORD) -> HRESULT {
        let mut st = enter!(self, "SetEventMask", dwEvents);
        let high = st.event_mask_high;
        if let Some(hr) = mask_refusal(&st, dwEvents, high) {
            return hr;
        }
        st.event_mask = dwEvents;
        S_OK
    }

    unsafe fn do_GetTokenAndMetaDataFromFunction(
        &self,
        functionId: FunctionID,
        riid: REFIID,
        ppImport: *mut Option<IUnknown>,
        pToken: *mut mdToken,
    ) -> HRESULT {
        let st = enter!(self, "GetTokenAndMetaDataFromFunction", functionId);
        let f = get!(st.functions, functionId);
        let m = get!(st.modules, f.module);
        put(pToken, f.token);
        drop(st);
        metadata_for(m.metadata, riid, ppImport)
    }

    unsafe fn do_GetModuleInfo(
        &self,
        moduleId: ModuleID,
        ppBaseLoadAddress: *mut LPCBYTE,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAssemblyId: *mut AssemblyID,
    ) -> HRESULT {
        let st = enter!(self, "GetModuleInfo", moduleId, cchName);
        let m = get!(st.modules, moduleId);
        put(ppBaseLoadAddress, m.base as LPCBYTE);
        put(pAssemblyId, m.assembly);
        give_str(&m.name, cchName, pcchName, szName, Buffer::ShortIsError)
    }

    unsafe fn do_GetModuleMetaData(
        &self,
        moduleId: ModuleID,
        dwOpenFlags: DWORD,
        riid: REFIID,
        ppOut: *mut Option<IUnknown>,
    ) -> HRESULT {
        let st = enter!(self, "GetModuleMetaData", moduleId, dwOpenFlags);
        let m = get!(st.modules, moduleId);
        drop(st);
        metadata_for(m.metadata, riid, ppOut)
    }

    unsafe fn do_GetILFunctionBody(
        &self,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        ppMethodHeader: *mut LPCBYTE,
        pcbMethodSize: *mut ULONG,
    ) -> HRESULT {
        let mut st = enter!(self, "GetILFunctionBody", moduleId, methodId);
        let m = get!(st.modules, moduleId);
        let Some(body) = m.il_bodies.get(&methodId).cloned() else {
            return CORPROF_E_FUNCTION_NOT_IL;
        };
        put(ppMethodHeader, body.as_ptr());
        put(pcbMethodSize, body.len() as u32);
        // Keep the bytes alive as long as the fake, like a module image.
        st.keep_alive.push(body);
        S_OK
    }

    unsafe fn do_GetILFunctionBodyAllocator(
        &self,
        moduleId: ModuleID,
        ppMalloc: *mut Option<IMethodMalloc>,
    ) -> HRESULT {
        let st = enter!(self, "GetILFunctionBodyAllocator", moduleId);
        get!(st.modules, moduleId);
        drop(st);
        put(
            ppMalloc,
            Some(
                FakeMethodMalloc {
                    state: self.state.clone(),
                }
                .into(),
            ),
        );
        S_OK
    }

    unsafe fn do_SetILFunctionBody(
        &self,
        moduleId: ModuleID,
        methodid: mdMethodDef,
        pbNewILMethodHeader: LPCBYTE,
    ) -> HRESULT {
        let mut st = enter!(
            self,
            "SetILFunctionBody",
            moduleId,
            methodid,
            pbNewILMethodHeader
        );
        get!(st.modules, moduleId);
        // The fake accepts only bodies from its own allocator, and reads as
        // many bytes as the header describes.
        let p = pbNewILMethodHeader as usize;
        let Some(block) = st
            .allocations
            .iter()
            .find(|b| p.wrapping_sub(b.as_ptr() as usize) < b.len())
        else {
            return E_INVALIDARG;
        };
        let rest = &block[p - block.as_ptr() as usize..];
        let Ok(len) = crate::info::il_method_size(rest) else {
            return E_INVALIDARG;
        };
        let bytes = rest[..len].to_vec();
        st.il_bodies_set.push((moduleId, methodid, bytes));
        S_OK
    }

    unsafe fn do_GetAppDomainInfo(
        &self,
        appDomainId: AppDomainID,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pProcessId: *mut ProcessID,
    ) -> HRESULT {
        let st = enter!(self, "GetAppDomainInfo", appDomainId, cchName);
        let a = get!(st.app_domains, appDomainId);
        put(pProcessId, a.process_id);
        give_str(&a.name, cchName, pcchName, szName, Buffer::Truncate)
    }

    unsafe fn do_GetAssemblyInfo(
        &self,
        assemblyId: AssemblyID,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAppDomainId: *mut AppDomainID,
        pModuleId: *mut ModuleID,
    ) -> HRESULT {
        let st = enter!(self, "GetAssemblyInfo", assemblyId, cchName);
        let a = get!(st.assemblies, assemblyId);
        put(pAppDomainId, a.app_domain);
        put(pModuleId, a.module);
        give_str(&a.name, cchName, pcchName, szName, Buffer::Truncate)
    }

    unsafe fn do_SetFunctionReJIT(&self, functionId: FunctionID) -> HRESULT {
        let _st = enter!(self, "SetFunctionReJIT", functionId);
        E_NOTIMPL
    }

    unsafe fn do_ForceGC(&self) -> HRESULT {
        let _st = enter!(self, "ForceGC");
        S_OK
    }

    unsafe fn do_SetILInstrumentedCodeMap(
        &self,
        functionId: FunctionID,
        fStartJit: BOOL,
        cILMapEntries: ULONG,
        rgILMapEntries: *const COR_IL_MAP,
    ) -> HRESULT {
        let mut st = enter!(
            self,
            "SetILInstrumentedCodeMap",
            functionId,
            fStartJit,
            cILMapEntries
        );
        get!(st.functions, functionId);
        let map = if cILMapEntries == 0 || rgILMapEntries.is_null() {
            Vec::new()
        } else {
            // SAFETY: [caller-contract] the caller passes `cILMapEntries` entries (the method's contract).
            unsafe { core::slice::from_raw_parts(rgILMapEntries, cILMapEntries as usize) }.to_vec()
        };
        st.il_maps_set.push((functionId, fStartJit != 0, map));
        S_OK
    }

    unsafe fn do_GetInprocInspectionInterface(&self, _ppicd: *mut Option<IUnknown>) -> HRESULT {
        let _st = enter!(self, "GetInprocInspectionInterface");
        E_NOTIMPL
    }

    unsafe fn do_GetInprocInspectionIThisThread(&self, _ppicd: *mut Option<IUnknown>) -> HRESULT {
        let _st = enter!(self, "GetInprocInspectionIThisThread");
        E_NOTIMPL
    }

    unsafe fn do_GetThreadContext(
        &self,
        threadId: ThreadID,
        pContextId: *mut ContextID,
    ) -> HRESULT {
        let st = enter!(self, "GetThreadContext", threadId);
        put(pContextId, get!(st.threads, threadId).context);
        S_OK
    }

    unsafe fn do_BeginInprocDebugging(
        &self,
        fThisThreadOnly: BOOL,
        _pdwProfilerContext: *mut DWORD,
    ) -> HRESULT {
        let _st = enter!(self, "BeginInprocDebugging", fThisThreadOnly);
        E_NOTIMPL
    }

    unsafe fn do_EndInprocDebugging(&self, dwProfilerContext: DWORD) -> HRESULT {
        let _st = enter!(self, "EndInprocDebugging", dwProfilerContext);
        E_NOTIMPL
    }

    unsafe fn do_GetILToNativeMapping(
        &self,
        functionId: FunctionID,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        let st = enter!(self, "GetILToNativeMapping", functionId, cMap);
        let f = get!(st.functions, functionId);
        let entries: Vec<COR_DEBUG_IL_TO_NATIVE_MAP> = f
            .il_map
            .iter()
            .map(|&(il, s, e)| COR_DEBUG_IL_TO_NATIVE_MAP {
                ilOffset: il,
                nativeStartOffset: s,
                nativeEndOffset: e,
            })
            .collect();
        give(&entries, cMap, pcMap, map, Buffer::FillReportTotal)
    }

    unsafe fn do_GetFunctionInfo2(
        &self,
        funcId: FunctionID,
        frameInfo: COR_PRF_FRAME_INFO,
        pClassId: *mut ClassID,
        pModuleId: *mut ModuleID,
        pToken: *mut mdToken,
        cTypeArgs: ULONG32,
        pcTypeArgs: *mut ULONG32,
        typeArgs: *mut ClassID,
    ) -> HRESULT {
        let st = enter!(self, "GetFunctionInfo2", funcId, frameInfo, cTypeArgs);
        let f = get!(st.functions, funcId);
        put(pClassId, f.class);
        put(pModuleId, f.module);
        put(pToken, f.token);
        // Like the runtime: given a buffer, it reports the count written.
        give(
            &f.type_args,
            cTypeArgs,
            pcTypeArgs,
            typeArgs,
            Buffer::ReportWritten,
        )
    }

    unsafe fn do_GetStringLayout(
        &self,
        pBufferLengthOffset: *mut ULONG,
        pStringLengthOffset: *mut ULONG,
        pBufferOffset: *mut ULONG,
    ) -> HRESULT {
        let st = enter!(self, "GetStringLayout");
        put(pBufferLengthOffset, st.string_layout[0]);
        put(pStringLengthOffset, st.string_layout[1]);
        put(pBufferOffset, st.string_layout[2]);
        S_OK
    }

    unsafe fn do_GetClassLayout(
        &self,
        classID: ClassID,
        rFieldOffset: *mut COR_FIELD_OFFSET,
        cFieldOffset: ULONG,
        pcFieldOffset: *mut ULONG,
        pulClassSize: *mut ULONG,
    ) -> HRESULT {
        let st = enter!(self, "GetClassLayout", classID, cFieldOffset);
        let c = get!(st.classes, classID);
        if c.array.is_some() {
            return E_INVALIDARG;
        }
        put(pulClassSize, c.size);
        let fields: Vec<COR_FIELD_OFFSET> = c
            .fields
            .iter()
            .map(|&(f, o)| COR_FIELD_OFFSET {
                ridOfField: f,
                ulOffset: o,
            })
            .collect();
        give(
            &fields,
            cFieldOffset,
            pcFieldOffset,
            rFieldOffset,
            Buffer::ReportWritten,
        )
    }

    unsafe fn do_GetClassIDInfo2(
        &self,
        classId: ClassID,
        pModuleId: *mut ModuleID,
        pTypeDefToken: *mut mdTypeDef,
        pParentClassId: *mut ClassID,
        cNumTypeArgs: ULONG32,
        pcNumTypeArgs: *mut ULONG32,
        typeArgs: *mut ClassID,
    ) -> HRESULT {
        let st = enter!(self, "GetClassIDInfo2", classId, cNumTypeArgs);
        let c = get!(st.classes, classId);
        if c.array.is_some() {
            return CORPROF_E_CLASSID_IS_ARRAY;
        }
        put(pModuleId, c.module);
        put(pTypeDefToken, c.type_def);
        put(pParentClassId, c.parent);
        // Like the runtime: given a buffer, it reports the count written.
        give(
            &c.type_args,
            cNumTypeArgs,
            pcNumTypeArgs,
            typeArgs,
            Buffer::ReportWritten,
        )
    }

    unsafe fn do_GetCodeInfo2(
        &self,
        functionID: FunctionID,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        let st = enter!(self, "GetCodeInfo2", functionID, cCodeInfos);
        let f = get!(st.functions, functionID);
        if f.code.is_empty() {
            return CORPROF_E_FUNCTION_NOT_COMPILED;
        }
        let chunks: Vec<COR_PRF_CODE_INFO> = f
            .code
            .iter()
            .map(|&(s, n)| COR_PRF_CODE_INFO {
                startAddress: s,
                size: n,
            })
            .collect();
        give(
            &chunks,
            cCodeInfos,
            pcCodeInfos,
            codeInfos,
            Buffer::FillReportTotal,
        )
    }

    unsafe fn do_GetClassFromTokenAndTypeArgs(
        &self,
        moduleID: ModuleID,
        typeDef: mdTypeDef,
        cTypeArgs: ULONG32,
        typeArgs: *const ClassID,
        pClassID: *mut ClassID,
    ) -> HRESULT {
        let args = read_ids(cTypeArgs, typeArgs);
        let mut recorded = vec![moduleID, typeDef as usize];
        recorded.extend(&args);
        let st = super::lock(self);
        let mut st = st;
        if let Some(hr) = st.enter("GetClassFromTokenAndTypeArgs", recorded) {
            return hr;
        }
        let m = get!(st.modules, moduleID);
        match m
            .class_instantiations
            .iter()
            .find(|((t, a), _)| *t == typeDef && *a == args)
        {
            Some((_, c)) => {
                put(pClassID, *c);
                S_OK
            }
            None => E_INVALIDARG,
        }
    }

    unsafe fn do_GetFunctionFromTokenAndTypeArgs(
        &self,
        moduleID: ModuleID,
        funcDef: mdMethodDef,
        classId: ClassID,
        cTypeArgs: ULONG32,
        typeArgs: *const ClassID,
        pFunctionID: *mut FunctionID,
    ) -> HRESULT {
        let args = read_ids(cTypeArgs, typeArgs);
        let mut recorded = vec![moduleID, funcDef as usize, classId];
        recorded.extend(&args);
        let mut st = super::lock(self);
        if let Some(hr) = st.enter("GetFunctionFromTokenAndTypeArgs", recorded) {
            return hr;
        }
        let m = get!(st.modules, moduleID);
        match m
            .function_instantiations
            .iter()
            .find(|((t, c, a), _)| *t == funcDef && *c == classId && *a == args)
        {
            Some((_, f)) => {
                put(pFunctionID, *f);
                S_OK
            }
            None => E_INVALIDARG,
        }
    }

    unsafe fn do_EnumModuleFrozenObjects(
        &self,
        moduleID: ModuleID,
        ppEnum: *mut Option<ICorProfilerObjectEnum>,
    ) -> HRESULT {
        let st = enter!(self, "EnumModuleFrozenObjects", moduleID);
        let m = get!(st.modules, moduleID);
        put(
            ppEnum,
            Some(FakeObjectEnum::create(
                m.frozen_objects,
                &st.live_enumerators,
            )),
        );
        S_OK
    }

    unsafe fn do_GetArrayObjectInfo(
        &self,
        objectId: ObjectID,
        cDimensions: ULONG32,
        pDimensionSizes: *mut ULONG32,
        pDimensionLowerBounds: *mut i32,
        ppData: *mut *mut BYTE,
    ) -> HRESULT {
        let st = enter!(self, "GetArrayObjectInfo", objectId, cDimensions);
        let Some((dims, lower, data)) = get!(st.objects, objectId).array else {
            return E_INVALIDARG;
        };
        if pDimensionSizes.is_null() || pDimensionLowerBounds.is_null() || ppData.is_null() {
            return E_INVALIDARG;
        }
        if (cDimensions as usize) < dims.len() {
            return super::SHORT;
        }
        // SAFETY: [caller-contract] the caller gives `cDimensions >= dims.len()` slots in both arrays.
        unsafe {
            core::ptr::copy_nonoverlapping(dims.as_ptr(), pDimensionSizes, dims.len());
            core::ptr::copy_nonoverlapping(
                lower.as_ptr(),
                pDimensionLowerBounds,
                lower.len().min(dims.len()),
            );
        }
        put(ppData, data as *mut BYTE);
        S_OK
    }

    unsafe fn do_GetBoxClassLayout(
        &self,
        classId: ClassID,
        pBufferOffset: *mut ULONG32,
    ) -> HRESULT {
        let st = enter!(self, "GetBoxClassLayout", classId);
        match get!(st.classes, classId).box_offset {
            Some(o) => {
                put(pBufferOffset, o);
                S_OK
            }
            None => E_INVALIDARG,
        }
    }

    unsafe fn do_GetThreadAppDomain(
        &self,
        threadId: ThreadID,
        pAppDomainId: *mut AppDomainID,
    ) -> HRESULT {
        let st = enter!(self, "GetThreadAppDomain", threadId);
        let t = if threadId == 0 {
            match st.current_thread {
                Some(t) => t,
                None => return CORPROF_E_NOT_MANAGED_THREAD,
            }
        } else {
            threadId
        };
        put(pAppDomainId, get!(st.threads, t).app_domain);
        S_OK
    }

    unsafe fn do_GetRVAStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        let st = enter!(self, "GetRVAStaticAddress", classId, fieldToken);
        static_address(
            &st,
            classId,
            fieldToken,
            COR_PRF_FIELD_RVA_STATIC,
            ppAddress,
        )
    }

    unsafe fn do_GetAppDomainStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        appDomainId: AppDomainID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        let st = enter!(
            self,
            "GetAppDomainStaticAddress",
            classId,
            fieldToken,
            appDomainId
        );
        get!(st.app_domains, appDomainId);
        static_address(
            &st,
            classId,
            fieldToken,
            COR_PRF_FIELD_APP_DOMAIN_STATIC,
            ppAddress,
        )
    }

    unsafe fn do_GetThreadStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        threadId: ThreadID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        let st = enter!(
            self,
            "GetThreadStaticAddress",
            classId,
            fieldToken,
            threadId
        );
        // Like the runtime: only the calling thread (or 0 for it) is accepted.
        if threadId != 0 && Some(threadId) != st.current_thread {
            return E_INVALIDARG;
        }
        static_address(
            &st,
            classId,
            fieldToken,
            COR_PRF_FIELD_THREAD_STATIC,
            ppAddress,
        )
    }

    unsafe fn do_GetContextStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        contextId: ContextID,
        _ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        let _st = enter!(
            self,
            "GetContextStaticAddress",
            classId,
            fieldToken,
            contextId
        );
        E_NOTIMPL
    }

    unsafe fn do_GetStaticFieldInfo(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        pFieldInfo: *mut COR_PRF_STATIC_TYPE,
    ) -> HRESULT {
        let st = enter!(self, "GetStaticFieldInfo", classId, fieldToken);
        get!(st.classes, classId);
        put(
            pFieldInfo,
            st.statics
                .get(&(classId, fieldToken))
                .map_or(COR_PRF_FIELD_NOT_A_STATIC, |s| s.kind),
        );
        S_OK
    }

    unsafe fn do_GetGenerationBounds(
        &self,
        cObjectRanges: ULONG,
        pcObjectRanges: *mut ULONG,
        ranges: *mut COR_PRF_GC_GENERATION_RANGE,
    ) -> HRESULT {
        let st = enter!(self, "GetGenerationBounds", cObjectRanges);
        if st.generation_bounds.is_empty() {
            return E_FAIL;
        }
        give(
            &st.generation_bounds,
            cObjectRanges,
            pcObjectRanges,
            ranges,
            Buffer::FillReportTotal,
        )
    }

    unsafe fn do_GetObjectGeneration(
        &self,
        objectId: ObjectID,
        range: *mut COR_PRF_GC_GENERATION_RANGE,
    ) -> HRESULT {
        let st = enter!(self, "GetObjectGeneration", objectId);
        match st
            .generation_bounds
            .iter()
            .find(|r| objectId.wrapping_sub(r.rangeStart) < r.rangeLengthReserved)
        {
            Some(r) => {
                put(range, *r);
                S_OK
            }
            None => E_FAIL,
        }
    }

    unsafe fn do_GetNotifiedExceptionClauseInfo(
        &self,
        pinfo: *mut COR_PRF_EX_CLAUSE_INFO,
    ) -> HRESULT {
        let st = enter!(self, "GetNotifiedExceptionClauseInfo");
        if st.attached {
            return CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER;
        }
        match st.exception_clause {
            Some(c) => {
                put(pinfo, c);
                S_OK
            }
            None => {
                put(pinfo, COR_PRF_EX_CLAUSE_INFO::default());
                S_FALSE
            }
        }
    }

    unsafe fn do_EnumJITedFunctions(
        &self,
        ppEnum: *mut Option<ICorProfilerFunctionEnum>,
    ) -> HRESULT {
        let st = enter!(self, "EnumJITedFunctions");
        put(
            ppEnum,
            Some(FakeFunctionEnum::create(
                st.jitted.clone(),
                &st.live_enumerators,
            )),
        );
        S_OK
    }

    unsafe fn do_RequestProfilerDetach(&self, dwExpectedCompletionMilliseconds: DWORD) -> HRESULT {
        let _st = enter!(
            self,
            "RequestProfilerDetach",
            dwExpectedCompletionMilliseconds
        );
        S_OK
    }

    unsafe fn do_GetStringLayout2(
        &self,
        pStringLengthOffset: *mut ULONG,
        pBufferOffset: *mut ULONG,
    ) -> HRESULT {
        let st = enter!(self, "GetStringLayout2");
        put(pStringLengthOffset, st.string_layout[1]);
        put(pBufferOffset, st.string_layout[2]);
        S_OK
    }

    unsafe fn do_EnumModules(&self, ppEnum: *mut Option<ICorProfilerModuleEnum>) -> HRESULT {
        let st = enter!(self, "EnumModules");
        put(
            ppEnum,
            Some(FakeModuleEnum::create(
                st.modules.keys().copied().collect(),
                &st.live_enumerators,
            )),
        );
        S_OK
    }

    unsafe fn do_GetRuntimeInformation(
        &self,
        pClrInstanceId: *mut USHORT,
        pRuntimeType: *mut COR_PRF_RUNTIME_TYPE,
        pMajorVersion: *mut USHORT,
        pMinorVersion: *mut USHORT,
        pBuildNumber: *mut USHORT,
        pQFEVersion: *mut USHORT,
        cchVersionString: ULONG,
        pcchVersionString: *mut ULONG,
        szVersionString: *mut WCHAR,
    ) -> HRESULT {
        let st = enter!(self, "GetRuntimeInformation", cchVersionString);
        let r = st.runtime.clone();
        put(pClrInstanceId, r.clr_instance_id);
        put(pRuntimeType, r.runtime_type);
        put(pMajorVersion, r.major);
        put(pMinorVersion, r.minor);
        put(pBuildNumber, r.build);
        put(pQFEVersion, r.qfe);
        give_str(
            &r.version_string,
            cchVersionString,
            pcchVersionString,
            szVersionString,
            Buffer::Truncate,
        )
    }

    unsafe fn do_GetThreadStaticAddress2(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        appDomainId: AppDomainID,
        threadId: ThreadID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        let st = enter!(
            self,
            "GetThreadStaticAddress2",
            classId,
            fieldToken,
            appDomainId,
            threadId
        );
        get!(st.app_domains, appDomainId);
        if threadId == 0 && st.current_thread.is_none() {
            return CORPROF_E_NOT_MANAGED_THREAD;
        }
        if threadId != 0 {
            get!(st.threads, threadId);
        }
        static_address(
            &st,
            classId,
            fieldToken,
            COR_PRF_FIELD_THREAD_STATIC,
            ppAddress,
        )
    }

    unsafe fn do_GetAppDomainsContainingModule(
        &self,
        moduleId: ModuleID,
        cAppDomainIds: ULONG32,
        pcAppDomainIds: *mut ULONG32,
        appDomainIds: *mut AppDomainID,
    ) -> HRESULT {
        let st = enter!(
            self,
            "GetAppDomainsContainingModule",
            moduleId,
            cAppDomainIds
        );
        let m = get!(st.modules, moduleId);
        give(
            &m.app_domains,
            cAppDomainIds,
            pcAppDomainIds,
            appDomainIds,
            Buffer::FillReportTotal,
        )
    }

    unsafe fn do_GetModuleInfo2(
        &self,
        moduleId: ModuleID,
        ppBaseLoadAddress: *mut LPCBYTE,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAssemblyId: *mut AssemblyID,
        pdwModuleFlags: *mut DWORD,
    ) -> HRESULT {
        let st = enter!(self, "GetModuleInfo2", moduleId, cchName);
        let m = get!(st.modules, moduleId);
        put(ppBaseLoadAddress, m.base as LPCBYTE);
        put(pAssemblyId, m.assembly);
        put(pdwModuleFlags, m.flags);
        give_str(&m.name, cchName, pcchName, szName, Buffer::ShortIsError)
    }
}

/// Answers `ppOut` with the module's metadata object, queried for `riid`.
///
/// # Safety
/// `riid` points to a GUID; `pp_out` is a valid out pointer.
unsafe fn metadata_for(
    tables: Arc<super::FakeMetaData>,
    riid: REFIID,
    pp_out: *mut Option<IUnknown>,
) -> HRESULT {
    if pp_out.is_null() {
        return S_OK;
    }
    let md: IMetaDataImport = FakeMetaDataImport { tables }.into();
    // SAFETY: [caller-contract, ffi-abi] `riid` is the caller's GUID; `pp_out` is a valid out pointer
    // with the layout of `*mut c_void` (Option of an interface is a nullable pointer).
    let hr = unsafe { md.query(riid, pp_out as *mut *mut c_void) };
    if hr.0 < 0 {
        return E_NOINTERFACE;
    }
    hr
}

/// Reads the `count` class IDs at `ids`.
///
/// # Safety
/// `ids` points to `count` IDs (or `count` is 0).
unsafe fn read_ids(count: u32, ids: *const ClassID) -> Vec<usize> {
    if count == 0 || ids.is_null() {
        return Vec::new();
    }
    // SAFETY: [caller-contract] guaranteed by the caller.
    unsafe { core::slice::from_raw_parts(ids, count as usize) }.to_vec()
}

/// Answers a `Get*StaticAddress` call from the statics table.
///
/// # Safety
/// `pp_address` is null or a valid out pointer.
unsafe fn static_address(
    st: &FakeState,
    class: usize,
    field: u32,
    kind: u32,
    pp_address: *mut *mut c_void,
) -> HRESULT {
    if !st.classes.contains_key(&class) {
        return E_INVALIDARG;
    }
    match st.statics.get(&(class, field)) {
        Some(s) if s.kind & kind != 0 => {
            put(pp_address, s.address as *mut c_void);
            S_OK
        }
        _ => E_INVALIDARG,
    }
}

// The interface methods: forwarded to the implementation above, or
// E_NOTIMPL (DoStackSnapshot, the ELT hook setters and the function ID
// mappers, which belong to other modules' fakes).
impl ICorProfilerInfo_Impl for FakeInfo_Impl {
    unsafe fn GetClassFromObject(&self, objectId: ObjectID, pClassId: *mut ClassID) -> HRESULT {
        self.do_GetClassFromObject(objectId, pClassId)
    }
    unsafe fn GetClassFromToken(
        &self,
        moduleId: ModuleID,
        typeDef: mdTypeDef,
        pClassId: *mut ClassID,
    ) -> HRESULT {
        self.do_GetClassFromToken(moduleId, typeDef, pClassId)
    }
    unsafe fn GetCodeInfo(
        &self,
        functionId: FunctionID,
        pStart: *mut LPCBYTE,
        pcSize: *mut ULONG,
    ) -> HRESULT {
        self.do_GetCodeInfo(functionId, pStart, pcSize)
    }
    unsafe fn GetEventMask(&self, pdwEvents: *mut DWORD) -> HRESULT {
        self.do_GetEventMask(pdwEvents)
    }
    unsafe fn GetFunctionFromIP(&self, ip: LPCBYTE, pFunctionId: *mut FunctionID) -> HRESULT {
        self.do_GetFunctionFromIP(ip, pFunctionId)
    }
    unsafe fn GetFunctionFromToken(
        &self,
        moduleId: ModuleID,
        token: mdToken,
        pFunctionId: *mut FunctionID,
    ) -> HRESULT {
        self.do_GetFunctionFromToken(moduleId, token, pFunctionId)
    }
    unsafe fn GetHandleFromThread(&self, threadId: ThreadID, phThread: *mut HANDLE) -> HRESULT {
        self.do_GetHandleFromThread(threadId, phThread)
    }
    unsafe fn GetObjectSize(&self, objectId: ObjectID, pcSize: *mut ULONG) -> HRESULT {
        self.do_GetObjectSize(objectId, pcSize)
    }
    unsafe fn IsArrayClass(
        &self,
        classId: ClassID,
        pBaseElemType: *mut CorElementType,
        pBaseClassId: *mut ClassID,
        pcRank: *mut ULONG,
    ) -> HRESULT {
        self.do_IsArrayClass(classId, pBaseElemType, pBaseClassId, pcRank)
    }
    unsafe fn GetThreadInfo(&self, threadId: ThreadID, pdwWin32ThreadId: *mut DWORD) -> HRESULT {
        self.do_GetThreadInfo(threadId, pdwWin32ThreadId)
    }
    unsafe fn GetCurrentThreadID(&self, pThreadId: *mut ThreadID) -> HRESULT {
        self.do_GetCurrentThreadID(pThreadId)
    }
    unsafe fn GetClassIDInfo(
        &self,
        classId: ClassID,
        pModuleId: *mut ModuleID,
        pTypeDefToken: *mut mdTypeDef,
    ) -> HRESULT {
        self.do_GetClassIDInfo(classId, pModuleId, pTypeDefToken)
    }
    unsafe fn GetFunctionInfo(
        &self,
        functionId: FunctionID,
        pClassId: *mut ClassID,
        pModuleId: *mut ModuleID,
        pToken: *mut mdToken,
    ) -> HRESULT {
        self.do_GetFunctionInfo(functionId, pClassId, pModuleId, pToken)
    }
    unsafe fn SetEventMask(&self, dwEvents: DWORD) -> HRESULT {
        self.do_SetEventMask(dwEvents)
    }
    unsafe fn SetEnterLeaveFunctionHooks(
        &self,
        pFuncEnter: Option<FunctionEnter>,
        pFuncLeave: Option<FunctionLeave>,
        pFuncTailcall: Option<FunctionTailcall>,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn SetFunctionIDMapper(&self, pFunc: Option<FunctionIDMapper>) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetTokenAndMetaDataFromFunction(
        &self,
        functionId: FunctionID,
        riid: REFIID,
        ppImport: *mut Option<IUnknown>,
        pToken: *mut mdToken,
    ) -> HRESULT {
        self.do_GetTokenAndMetaDataFromFunction(functionId, riid, ppImport, pToken)
    }
    unsafe fn GetModuleInfo(
        &self,
        moduleId: ModuleID,
        ppBaseLoadAddress: *mut LPCBYTE,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAssemblyId: *mut AssemblyID,
    ) -> HRESULT {
        self.do_GetModuleInfo(
            moduleId,
            ppBaseLoadAddress,
            cchName,
            pcchName,
            szName,
            pAssemblyId,
        )
    }
    unsafe fn GetModuleMetaData(
        &self,
        moduleId: ModuleID,
        dwOpenFlags: DWORD,
        riid: REFIID,
        ppOut: *mut Option<IUnknown>,
    ) -> HRESULT {
        self.do_GetModuleMetaData(moduleId, dwOpenFlags, riid, ppOut)
    }
    unsafe fn GetILFunctionBody(
        &self,
        moduleId: ModuleID,
        methodId: mdMethodDef,
        ppMethodHeader: *mut LPCBYTE,
        pcbMethodSize: *mut ULONG,
    ) -> HRESULT {
        self.do_GetILFunctionBody(moduleId, methodId, ppMethodHeader, pcbMethodSize)
    }
    unsafe fn GetILFunctionBodyAllocator(
        &self,
        moduleId: ModuleID,
        ppMalloc: *mut Option<IMethodMalloc>,
    ) -> HRESULT {
        self.do_GetILFunctionBodyAllocator(moduleId, ppMalloc)
    }
    unsafe fn SetILFunctionBody(
        &self,
        moduleId: ModuleID,
        methodid: mdMethodDef,
        pbNewILMethodHeader: LPCBYTE,
    ) -> HRESULT {
        self.do_SetILFunctionBody(moduleId, methodid, pbNewILMethodHeader)
    }
    unsafe fn GetAppDomainInfo(
        &self,
        appDomainId: AppDomainID,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pProcessId: *mut ProcessID,
    ) -> HRESULT {
        self.do_GetAppDomainInfo(appDomainId, cchName, pcchName, szName, pProcessId)
    }
    unsafe fn GetAssemblyInfo(
        &self,
        assemblyId: AssemblyID,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAppDomainId: *mut AppDomainID,
        pModuleId: *mut ModuleID,
    ) -> HRESULT {
        self.do_GetAssemblyInfo(
            assemblyId,
            cchName,
            pcchName,
            szName,
            pAppDomainId,
            pModuleId,
        )
    }
    unsafe fn SetFunctionReJIT(&self, functionId: FunctionID) -> HRESULT {
        self.do_SetFunctionReJIT(functionId)
    }
    unsafe fn ForceGC(&self) -> HRESULT {
        self.do_ForceGC()
    }
    unsafe fn SetILInstrumentedCodeMap(
        &self,
        functionId: FunctionID,
        fStartJit: BOOL,
        cILMapEntries: ULONG,
        rgILMapEntries: *const COR_IL_MAP,
    ) -> HRESULT {
        self.do_SetILInstrumentedCodeMap(functionId, fStartJit, cILMapEntries, rgILMapEntries)
    }
    unsafe fn GetInprocInspectionInterface(&self, ppicd: *mut Option<IUnknown>) -> HRESULT {
        self.do_GetInprocInspectionInterface(ppicd)
    }
    unsafe fn GetInprocInspectionIThisThread(&self, ppicd: *mut Option<IUnknown>) -> HRESULT {
        self.do_GetInprocInspectionIThisThread(ppicd)
    }
    unsafe fn GetThreadContext(&self, threadId: ThreadID, pContextId: *mut ContextID) -> HRESULT {
        self.do_GetThreadContext(threadId, pContextId)
    }
    unsafe fn BeginInprocDebugging(
        &self,
        fThisThreadOnly: BOOL,
        pdwProfilerContext: *mut DWORD,
    ) -> HRESULT {
        self.do_BeginInprocDebugging(fThisThreadOnly, pdwProfilerContext)
    }
    unsafe fn EndInprocDebugging(&self, dwProfilerContext: DWORD) -> HRESULT {
        self.do_EndInprocDebugging(dwProfilerContext)
    }
    unsafe fn GetILToNativeMapping(
        &self,
        functionId: FunctionID,
        cMap: ULONG32,
        pcMap: *mut ULONG32,
        map: *mut COR_DEBUG_IL_TO_NATIVE_MAP,
    ) -> HRESULT {
        self.do_GetILToNativeMapping(functionId, cMap, pcMap, map)
    }
}
impl ICorProfilerInfo2_Impl for FakeInfo_Impl {
    unsafe fn DoStackSnapshot(
        &self,
        thread: ThreadID,
        callback: Option<StackSnapshotCallback>,
        infoFlags: ULONG32,
        clientData: *mut c_void,
        context: *const BYTE,
        contextSize: ULONG32,
    ) -> HRESULT {
        // Recorded, and a forced failure answered (e.g. `E_FAIL`); no
        // stacks.
        let _st = enter!(self, "DoStackSnapshot", thread);
        E_NOTIMPL
    }
    unsafe fn SetEnterLeaveFunctionHooks2(
        &self,
        pFuncEnter: Option<FunctionEnter2>,
        pFuncLeave: Option<FunctionLeave2>,
        pFuncTailcall: Option<FunctionTailcall2>,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFunctionInfo2(
        &self,
        funcId: FunctionID,
        frameInfo: COR_PRF_FRAME_INFO,
        pClassId: *mut ClassID,
        pModuleId: *mut ModuleID,
        pToken: *mut mdToken,
        cTypeArgs: ULONG32,
        pcTypeArgs: *mut ULONG32,
        typeArgs: *mut ClassID,
    ) -> HRESULT {
        self.do_GetFunctionInfo2(
            funcId, frameInfo, pClassId, pModuleId, pToken, cTypeArgs, pcTypeArgs, typeArgs,
        )
    }
    unsafe fn GetStringLayout(
        &self,
        pBufferLengthOffset: *mut ULONG,
        pStringLengthOffset: *mut ULONG,
        pBufferOffset: *mut ULONG,
    ) -> HRESULT {
        self.do_GetStringLayout(pBufferLengthOffset, pStringLengthOffset, pBufferOffset)
    }
    unsafe fn GetClassLayout(
        &self,
        classID: ClassID,
        rFieldOffset: *mut COR_FIELD_OFFSET,
        cFieldOffset: ULONG,
        pcFieldOffset: *mut ULONG,
        pulClassSize: *mut ULONG,
    ) -> HRESULT {
        self.do_GetClassLayout(
            classID,
            rFieldOffset,
            cFieldOffset,
            pcFieldOffset,
            pulClassSize,
        )
    }
    unsafe fn GetClassIDInfo2(
        &self,
        classId: ClassID,
        pModuleId: *mut ModuleID,
        pTypeDefToken: *mut mdTypeDef,
        pParentClassId: *mut ClassID,
        cNumTypeArgs: ULONG32,
        pcNumTypeArgs: *mut ULONG32,
        typeArgs: *mut ClassID,
    ) -> HRESULT {
        self.do_GetClassIDInfo2(
            classId,
            pModuleId,
            pTypeDefToken,
            pParentClassId,
            cNumTypeArgs,
            pcNumTypeArgs,
            typeArgs,
        )
    }
    unsafe fn GetCodeInfo2(
        &self,
        functionID: FunctionID,
        cCodeInfos: ULONG32,
        pcCodeInfos: *mut ULONG32,
        codeInfos: *mut COR_PRF_CODE_INFO,
    ) -> HRESULT {
        self.do_GetCodeInfo2(functionID, cCodeInfos, pcCodeInfos, codeInfos)
    }
    unsafe fn GetClassFromTokenAndTypeArgs(
        &self,
        moduleID: ModuleID,
        typeDef: mdTypeDef,
        cTypeArgs: ULONG32,
        typeArgs: *const ClassID,
        pClassID: *mut ClassID,
    ) -> HRESULT {
        self.do_GetClassFromTokenAndTypeArgs(moduleID, typeDef, cTypeArgs, typeArgs, pClassID)
    }
    unsafe fn GetFunctionFromTokenAndTypeArgs(
        &self,
        moduleID: ModuleID,
        funcDef: mdMethodDef,
        classId: ClassID,
        cTypeArgs: ULONG32,
        typeArgs: *const ClassID,
        pFunctionID: *mut FunctionID,
    ) -> HRESULT {
        self.do_GetFunctionFromTokenAndTypeArgs(
            moduleID,
            funcDef,
            classId,
            cTypeArgs,
            typeArgs,
            pFunctionID,
        )
    }
    unsafe fn EnumModuleFrozenObjects(
        &self,
        moduleID: ModuleID,
        ppEnum: *mut Option<ICorProfilerObjectEnum>,
    ) -> HRESULT {
        self.do_EnumModuleFrozenObjects(moduleID, ppEnum)
    }
    unsafe fn GetArrayObjectInfo(
        &self,
        objectId: ObjectID,
        cDimensions: ULONG32,
        pDimensionSizes: *mut ULONG32,
        pDimensionLowerBounds: *mut i32,
        ppData: *mut *mut BYTE,
    ) -> HRESULT {
        self.do_GetArrayObjectInfo(
            objectId,
            cDimensions,
            pDimensionSizes,
            pDimensionLowerBounds,
            ppData,
        )
    }
    unsafe fn GetBoxClassLayout(&self, classId: ClassID, pBufferOffset: *mut ULONG32) -> HRESULT {
        self.do_GetBoxClassLayout(classId, pBufferOffset)
    }
    unsafe fn GetThreadAppDomain(
        &self,
        threadId: ThreadID,
        pAppDomainId: *mut AppDomainID,
    ) -> HRESULT {
        self.do_GetThreadAppDomain(threadId, pAppDomainId)
    }
    unsafe fn GetRVAStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        self.do_GetRVAStaticAddress(classId, fieldToken, ppAddress)
    }
    unsafe fn GetAppDomainStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        appDomainId: AppDomainID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        self.do_GetAppDomainStaticAddress(classId, fieldToken, appDomainId, ppAddress)
    }
    unsafe fn GetThreadStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        threadId: ThreadID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        self.do_GetThreadStaticAddress(classId, fieldToken, threadId, ppAddress)
    }
    unsafe fn GetContextStaticAddress(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        contextId: ContextID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        self.do_GetContextStaticAddress(classId, fieldToken, contextId, ppAddress)
    }
    unsafe fn GetStaticFieldInfo(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        pFieldInfo: *mut COR_PRF_STATIC_TYPE,
    ) -> HRESULT {
        self.do_GetStaticFieldInfo(classId, fieldToken, pFieldInfo)
    }
    unsafe fn GetGenerationBounds(
        &self,
        cObjectRanges: ULONG,
        pcObjectRanges: *mut ULONG,
        ranges: *mut COR_PRF_GC_GENERATION_RANGE,
    ) -> HRESULT {
        self.do_GetGenerationBounds(cObjectRanges, pcObjectRanges, ranges)
    }
    unsafe fn GetObjectGeneration(
        &self,
        objectId: ObjectID,
        range: *mut COR_PRF_GC_GENERATION_RANGE,
    ) -> HRESULT {
        self.do_GetObjectGeneration(objectId, range)
    }
    unsafe fn GetNotifiedExceptionClauseInfo(&self, pinfo: *mut COR_PRF_EX_CLAUSE_INFO) -> HRESULT {
        self.do_GetNotifiedExceptionClauseInfo(pinfo)
    }
}
impl ICorProfilerInfo3_Impl for FakeInfo_Impl {
    unsafe fn EnumJITedFunctions(&self, ppEnum: *mut Option<ICorProfilerFunctionEnum>) -> HRESULT {
        self.do_EnumJITedFunctions(ppEnum)
    }
    unsafe fn RequestProfilerDetach(&self, dwExpectedCompletionMilliseconds: DWORD) -> HRESULT {
        self.do_RequestProfilerDetach(dwExpectedCompletionMilliseconds)
    }
    unsafe fn SetFunctionIDMapper2(
        &self,
        pFunc: Option<FunctionIDMapper2>,
        clientData: *mut c_void,
    ) -> HRESULT {
        let mut st = enter!(self, "SetFunctionIDMapper2");
        st.elt.mapper = pFunc.map_or(0, |f| f as usize);
        st.elt.mapper_client_data = clientData as usize;
        S_OK
    }
    unsafe fn GetStringLayout2(
        &self,
        pStringLengthOffset: *mut ULONG,
        pBufferOffset: *mut ULONG,
    ) -> HRESULT {
        self.do_GetStringLayout2(pStringLengthOffset, pBufferOffset)
    }
    unsafe fn SetEnterLeaveFunctionHooks3(
        &self,
        pFuncEnter3: Option<FunctionEnter3>,
        pFuncLeave3: Option<FunctionLeave3>,
        pFuncTailcall3: Option<FunctionTailcall3>,
    ) -> HRESULT {
        let mut st = enter!(self, "SetEnterLeaveFunctionHooks3");
        st.elt.hooks3 = [
            pFuncEnter3.map_or(0, |f| f as usize),
            pFuncLeave3.map_or(0, |f| f as usize),
            pFuncTailcall3.map_or(0, |f| f as usize),
        ];
        S_OK
    }
    unsafe fn SetEnterLeaveFunctionHooks3WithInfo(
        &self,
        pFuncEnter3WithInfo: Option<FunctionEnter3WithInfo>,
        pFuncLeave3WithInfo: Option<FunctionLeave3WithInfo>,
        pFuncTailcall3WithInfo: Option<FunctionTailcall3WithInfo>,
    ) -> HRESULT {
        let mut st = enter!(self, "SetEnterLeaveFunctionHooks3WithInfo");
        st.elt.hooks3_with_info = [
            pFuncEnter3WithInfo.map_or(0, |f| f as usize),
            pFuncLeave3WithInfo.map_or(0, |f| f as usize),
            pFuncTailcall3WithInfo.map_or(0, |f| f as usize),
        ];
        S_OK
    }
    unsafe fn GetFunctionEnter3Info(
        &self,
        functionId: FunctionID,
        eltInfo: COR_PRF_ELT_INFO,
        pFrameInfo: *mut COR_PRF_FRAME_INFO,
        pcbArgumentInfo: *mut ULONG,
        pArgumentInfo: *mut COR_PRF_FUNCTION_ARGUMENT_INFO,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFunctionLeave3Info(
        &self,
        functionId: FunctionID,
        eltInfo: COR_PRF_ELT_INFO,
        pFrameInfo: *mut COR_PRF_FRAME_INFO,
        pRetvalRange: *mut COR_PRF_FUNCTION_ARGUMENT_RANGE,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFunctionTailcall3Info(
        &self,
        functionId: FunctionID,
        eltInfo: COR_PRF_ELT_INFO,
        pFrameInfo: *mut COR_PRF_FRAME_INFO,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumModules(&self, ppEnum: *mut Option<ICorProfilerModuleEnum>) -> HRESULT {
        self.do_EnumModules(ppEnum)
    }
    unsafe fn GetRuntimeInformation(
        &self,
        pClrInstanceId: *mut USHORT,
        pRuntimeType: *mut COR_PRF_RUNTIME_TYPE,
        pMajorVersion: *mut USHORT,
        pMinorVersion: *mut USHORT,
        pBuildNumber: *mut USHORT,
        pQFEVersion: *mut USHORT,
        cchVersionString: ULONG,
        pcchVersionString: *mut ULONG,
        szVersionString: *mut WCHAR,
    ) -> HRESULT {
        self.do_GetRuntimeInformation(
            pClrInstanceId,
            pRuntimeType,
            pMajorVersion,
            pMinorVersion,
            pBuildNumber,
            pQFEVersion,
            cchVersionString,
            pcchVersionString,
            szVersionString,
        )
    }
    unsafe fn GetThreadStaticAddress2(
        &self,
        classId: ClassID,
        fieldToken: mdFieldDef,
        appDomainId: AppDomainID,
        threadId: ThreadID,
        ppAddress: *mut *mut c_void,
    ) -> HRESULT {
        self.do_GetThreadStaticAddress2(classId, fieldToken, appDomainId, threadId, ppAddress)
    }
    unsafe fn GetAppDomainsContainingModule(
        &self,
        moduleId: ModuleID,
        cAppDomainIds: ULONG32,
        pcAppDomainIds: *mut ULONG32,
        appDomainIds: *mut AppDomainID,
    ) -> HRESULT {
        self.do_GetAppDomainsContainingModule(moduleId, cAppDomainIds, pcAppDomainIds, appDomainIds)
    }
    unsafe fn GetModuleInfo2(
        &self,
        moduleId: ModuleID,
        ppBaseLoadAddress: *mut LPCBYTE,
        cchName: ULONG,
        pcchName: *mut ULONG,
        szName: *mut WCHAR,
        pAssemblyId: *mut AssemblyID,
        pdwModuleFlags: *mut DWORD,
    ) -> HRESULT {
        self.do_GetModuleInfo2(
            moduleId,
            ppBaseLoadAddress,
            cchName,
            pcchName,
            szName,
            pAssemblyId,
            pdwModuleFlags,
        )
    }
}

/// The runtime's checks of a new event mask, in its order
/// (`EEToProfInterfaceImpl::SetEventMask`): after `Initialize` a change of
/// an immutable flag is `E_FAIL`; a profiler loaded by attach asking for a
/// flag outside the allowable set gets
/// `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`. The sets are those of
/// the fake's runtime version: .NET 10 (dotnet/runtime PR 113924) took
/// `DISABLE_INLINING` and `DISABLE_OPTIMIZATIONS` out of the immutable set
/// and into the allowable-after-attach set.
pub(super) fn mask_refusal(st: &FakeState, low: u32, high: u32) -> Option<HRESULT> {
    let moved = COR_PRF_DISABLE_INLINING | COR_PRF_DISABLE_OPTIMIZATIONS;
    let net10 = st.runtime.runtime_type == COR_PRF_CORE_CLR && st.runtime.major >= 10;
    let (immutable, allowable) = if net10 {
        (
            COR_PRF_MONITOR_IMMUTABLE & !moved,
            COR_PRF_ALLOWABLE_AFTER_ATTACH | moved,
        )
    } else {
        (
            COR_PRF_MONITOR_IMMUTABLE | moved,
            COR_PRF_ALLOWABLE_AFTER_ATTACH & !moved,
        )
    };
    if st.initialized
        && ((low ^ st.event_mask) & immutable != 0
            || (high ^ st.event_mask_high) & COR_PRF_HIGH_MONITOR_IMMUTABLE != 0)
    {
        return Some(E_FAIL);
    }
    if st.attached && (low & !allowable != 0 || high & !COR_PRF_HIGH_ALLOWABLE_AFTER_ATTACH != 0) {
        return Some(CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER);
    }
    None
}
