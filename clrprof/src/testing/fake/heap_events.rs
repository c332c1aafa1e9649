//! The fake's `ICorProfilerInfo12` … `ICorProfilerInfo15` (EventPipe, GC
//! handles, the non-GC heap, the GC heap walk), and the heap and EventPipe
//! state its Info10 ([`super::info10`]) and these answer from:
//! [`FakeHeap`], [`FakeEventPipe`].

use super::objects::FakeObjectEnum;
use super::{give, put, Buffer, E_INVALIDARG, S_OK};
use clrprof_sys::*;
use core::ffi::c_void;
use std::collections::{BTreeMap, BTreeSet};
use windows_core::GUID;

use super::info::FakeInfo_Impl;

/// The heap and GC handles the fake answers from.
#[derive(Clone, Debug, Default)]
pub struct FakeHeap {
    /// `GetLOHObjectSizeThreshold` (`None`: the runtime's default, 85,000).
    pub loh_threshold: Option<u32>,
    /// `EnumerateObjectReferences`: the references of an object, in order.
    pub references: BTreeMap<usize, Vec<usize>>,
    /// `EnumerateObjectReferences` for objects whose memory a test owns:
    /// the addresses of their reference slots, passed to the callback as
    /// the runtime does (takes precedence over `references`).
    pub reference_slots: BTreeMap<usize, Vec<usize>>,
    /// `IsFrozenObject`: the frozen objects (every other known object is not).
    pub frozen: BTreeSet<usize>,
    /// `GetNonGCHeapBounds`: `(start, length, reserved)`.
    pub non_gc_ranges: Vec<(usize, usize, usize)>,
    /// `EnumerateNonGCObjects`.
    pub non_gc_objects: Vec<usize>,
    /// `EnumerateGCHeapObjects`: the objects of the GC heap.
    pub gc_heap: Vec<usize>,
    /// Live GC handles: handle → (object, `COR_PRF_HANDLE_TYPE`). A test
    /// moves or collects an object by changing its entry.
    pub handles: BTreeMap<usize, (usize, u32)>,
    /// Handles given to `DestroyHandle`, in order.
    pub destroyed: Vec<usize>,
    next_handle: usize,
}

/// An event the fake's EventPipe knows (`EventPipeDefineEvent`).
#[derive(Clone, Debug, Default)]
pub struct FakeEpEvent {
    /// Its provider.
    pub provider: usize,
    /// Its name.
    pub name: String,
    /// Its ID.
    pub id: u32,
    /// Keywords, version, level, opcode, need-stack.
    pub keywords: u64,
    /// Version.
    pub version: u32,
    /// Level.
    pub level: u32,
    /// Opcode.
    pub opcode: u8,
    /// Whether stacks were asked for.
    pub need_stack: bool,
    /// Its parameters: `(type, element type, name)`.
    pub params: Vec<(u32, u32, String)>,
}

/// A write (`EventPipeWriteEvent`): the event, the payload bytes and the
/// activity IDs.
#[derive(Clone, Debug)]
pub struct FakeEpWrite {
    /// The event handle.
    pub event: usize,
    /// The payload, concatenated.
    pub data: Vec<u8>,
    /// Activity ID.
    pub activity: Option<GUID>,
    /// Related activity ID.
    pub related: Option<GUID>,
}

/// One provider configuration of a session: `(name, keywords, level, filter)`.
pub type FakeEpConfig = (String, u64, u32, Option<String>);

/// The EventPipe state the fake answers from.
#[derive(Clone, Debug, Default)]
pub struct FakeEventPipe {
    /// Providers by handle: name and enable callback.
    pub providers: BTreeMap<usize, (String, Option<EventPipeProviderCallback>)>,
    /// Events by handle.
    pub events: BTreeMap<usize, FakeEpEvent>,
    /// Running sessions and their providers.
    pub sessions: BTreeMap<u64, Vec<FakeEpConfig>>,
    /// Stopped sessions, in order.
    pub stopped: Vec<u64>,
    /// Every write, in order.
    pub written: Vec<FakeEpWrite>,
    next: usize,
}

impl FakeEventPipe {
    fn next_handle(&mut self) -> usize {
        self.next += 1;
        0xE000 + self.next * 0x10
    }
}

/// Reads a NUL-terminated UTF-16 string.
///
/// # Safety
/// `p` is null or a NUL-terminated UTF-16 string.
unsafe fn wide(p: *const u16) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut n = 0;
    // SAFETY: [caller-contract] guaranteed by the caller: readable up to and with the NUL.
    while unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: [local-memory] `n` units were just read.
    Some(String::from_utf16_lossy(unsafe {
        core::slice::from_raw_parts(p, n)
    }))
}

/// The enable calls a session start or stop makes: the callbacks of the
/// providers it configures, with `(enabled, level, keywords)`.
type EnableCall = (EventPipeProviderCallback, u32, u8, u64);

fn enable_calls(ep: &FakeEventPipe, configs: &[FakeEpConfig], enabled: u32) -> Vec<EnableCall> {
    let mut calls = Vec::new();
    for (name, keywords, level, _) in configs {
        for (pname, cb) in ep.providers.values() {
            if let (true, Some(cb)) = (pname == name, cb) {
                calls.push((*cb, enabled, *level as u8, *keywords));
            }
        }
    }
    calls
}

fn run_enable_calls(calls: Vec<EnableCall>) {
    for (cb, enabled, level, keywords) in calls {
        // SAFETY: [test-fake, callback-args] a callback the SDK registered, called as the runtime does
        // (no source ID, no filter data, no context).
        unsafe {
            cb(
                core::ptr::null(),
                enabled,
                level,
                keywords,
                0,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        };
    }
}

impl ICorProfilerInfo12_Impl for FakeInfo_Impl {
    unsafe fn EventPipeStartSession(
        &self,
        cProviderConfigs: UINT32,
        pProviderConfigs: *const COR_PRF_EVENTPIPE_PROVIDER_CONFIG,
        requestRundown: BOOL,
        pSession: *mut EVENTPIPE_SESSION,
    ) -> HRESULT {
        let calls = {
            let mut st = enter!(
                self,
                "EventPipeStartSession",
                cProviderConfigs,
                requestRundown
            );
            let mut configs = Vec::new();
            for i in 0..cProviderConfigs as usize {
                // SAFETY: [caller-contract] the caller passes `cProviderConfigs` configurations
                // whose strings are NUL-terminated.
                let c = unsafe { *pProviderConfigs.add(i) };
                // SAFETY: [caller-contract] as above.
                let (name, filter) = unsafe { (wide(c.providerName), wide(c.filterData)) };
                let Some(name) = name else {
                    return E_INVALIDARG;
                };
                configs.push((name, c.keywords, c.loggingLevel, filter));
            }
            let id = st.eventpipe.next_handle() as u64;
            let calls = enable_calls(&st.eventpipe, &configs, 1);
            st.eventpipe.sessions.insert(id, configs);
            put(pSession, id);
            calls
        };
        run_enable_calls(calls);
        S_OK
    }
    unsafe fn EventPipeAddProviderToSession(
        &self,
        session: EVENTPIPE_SESSION,
        providerConfig: COR_PRF_EVENTPIPE_PROVIDER_CONFIG,
    ) -> HRESULT {
        let mut st = enter!(self, "EventPipeAddProviderToSession", session);
        // SAFETY: [caller-contract] the caller's strings are NUL-terminated.
        let (name, filter) = unsafe {
            (
                wide(providerConfig.providerName),
                wide(providerConfig.filterData),
            )
        };
        let Some(name) = name else {
            return E_INVALIDARG;
        };
        match st.eventpipe.sessions.get_mut(&session) {
            Some(s) => {
                s.push((
                    name,
                    providerConfig.keywords,
                    providerConfig.loggingLevel,
                    filter,
                ));
                S_OK
            }
            None => E_INVALIDARG,
        }
    }
    unsafe fn EventPipeStopSession(&self, session: EVENTPIPE_SESSION) -> HRESULT {
        let calls = {
            let mut st = enter!(self, "EventPipeStopSession", session);
            let Some(configs) = st.eventpipe.sessions.remove(&session) else {
                return E_INVALIDARG;
            };
            st.eventpipe.stopped.push(session);
            enable_calls(&st.eventpipe, &configs, 0)
        };
        run_enable_calls(calls);
        S_OK
    }
    unsafe fn EventPipeCreateProvider(
        &self,
        providerName: *const WCHAR,
        pProvider: *mut EVENTPIPE_PROVIDER,
    ) -> HRESULT {
        let mut st = enter!(self, "EventPipeCreateProvider");
        // SAFETY: [caller-contract] the caller's name is NUL-terminated.
        let Some(name) = (unsafe { wide(providerName) }) else {
            return E_INVALIDARG;
        };
        let h = st.eventpipe.next_handle();
        st.eventpipe.providers.insert(h, (name, None));
        put(pProvider, h);
        S_OK
    }
    unsafe fn EventPipeGetProviderInfo(
        &self,
        provider: EVENTPIPE_PROVIDER,
        cchName: ULONG,
        pcchName: *mut ULONG,
        providerName: *mut WCHAR,
    ) -> HRESULT {
        let st = enter!(self, "EventPipeGetProviderInfo", provider);
        let Some((name, _)) = st.eventpipe.providers.get(&provider) else {
            return E_INVALIDARG;
        };
        let w: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
        put(pcchName, w.len() as u32);
        // As the runtime: a buffer of exactly the name's size is short too.
        if w.len() >= cchName as usize {
            return super::SHORT;
        }
        if !providerName.is_null() {
            // SAFETY: [caller-contract, local-memory] `providerName` has room for `cchName > w.len()` units.
            unsafe { core::ptr::copy_nonoverlapping(w.as_ptr(), providerName, w.len()) };
        }
        S_OK
    }
    unsafe fn EventPipeDefineEvent(
        &self,
        provider: EVENTPIPE_PROVIDER,
        eventName: *const WCHAR,
        eventID: UINT32,
        keywords: UINT64,
        eventVersion: UINT32,
        level: UINT32,
        opcode: UINT8,
        needStack: BOOL,
        cParamDescs: UINT32,
        pParamDescs: *const COR_PRF_EVENTPIPE_PARAM_DESC,
        pEvent: *mut EVENTPIPE_EVENT,
    ) -> HRESULT {
        let mut st = enter!(self, "EventPipeDefineEvent", provider, eventID, cParamDescs);
        if !st.eventpipe.providers.contains_key(&provider) {
            return E_INVALIDARG;
        }
        let mut params = Vec::new();
        for i in 0..cParamDescs as usize {
            // SAFETY: [caller-contract] the caller passes `cParamDescs` descriptors with
            // NUL-terminated names.
            let p = unsafe { *pParamDescs.add(i) };
            // SAFETY: [caller-contract] as above.
            params.push((
                p.r#type,
                p.elementType,
                unsafe { wide(p.name) }.unwrap_or_default(),
            ));
        }
        let h = st.eventpipe.next_handle();
        st.eventpipe.events.insert(
            h,
            FakeEpEvent {
                provider,
                // SAFETY: [caller-contract] the caller's name is NUL-terminated.
                name: unsafe { wide(eventName) }.unwrap_or_default(),
                id: eventID,
                keywords,
                version: eventVersion,
                level,
                opcode,
                need_stack: needStack != 0,
                params,
            },
        );
        put(pEvent, h);
        S_OK
    }
    unsafe fn EventPipeWriteEvent(
        &self,
        event: EVENTPIPE_EVENT,
        cData: UINT32,
        data: *const COR_PRF_EVENT_DATA,
        pActivityId: LPCGUID,
        pRelatedActivityId: LPCGUID,
    ) -> HRESULT {
        let mut st = enter!(self, "EventPipeWriteEvent", event, cData);
        if !st.eventpipe.events.contains_key(&event) {
            return E_INVALIDARG;
        }
        let mut bytes = Vec::new();
        for i in 0..cData as usize {
            // SAFETY: [caller-contract] the caller passes `cData` descriptors, each of `size`
            // readable bytes at `ptr`.
            unsafe {
                let d = *data.add(i);
                bytes.extend_from_slice(core::slice::from_raw_parts(
                    d.ptr as usize as *const u8,
                    d.size as usize,
                ));
            }
        }
        st.eventpipe.written.push(FakeEpWrite {
            event,
            data: bytes,
            // SAFETY: [caller-contract] null or valid GUIDs.
            activity: unsafe { pActivityId.as_ref() }.copied(),
            // SAFETY: [caller-contract] as above.
            related: unsafe { pRelatedActivityId.as_ref() }.copied(),
        });
        S_OK
    }
}

impl ICorProfilerInfo13_Impl for FakeInfo_Impl {
    unsafe fn CreateHandle(
        &self,
        object: ObjectID,
        r#type: COR_PRF_HANDLE_TYPE,
        pHandle: *mut ObjectHandleID,
    ) -> HRESULT {
        let mut st = enter!(self, "CreateHandle", object, r#type);
        if !st.objects.contains_key(&object) {
            return E_INVALIDARG;
        }
        st.heap.next_handle += 1;
        let h = 0xA000 + st.heap.next_handle * 8;
        st.heap.handles.insert(h, (object, r#type));
        put(pHandle, h as ObjectHandleID);
        S_OK
    }
    unsafe fn DestroyHandle(&self, handle: ObjectHandleID) -> HRESULT {
        let mut st = enter!(self, "DestroyHandle", handle as usize);
        if st.heap.handles.remove(&(handle as usize)).is_none() {
            return E_INVALIDARG;
        }
        st.heap.destroyed.push(handle as usize);
        S_OK
    }
    unsafe fn GetObjectIDFromHandle(
        &self,
        handle: ObjectHandleID,
        pObject: *mut ObjectID,
    ) -> HRESULT {
        let st = enter!(self, "GetObjectIDFromHandle", handle as usize);
        match st.heap.handles.get(&(handle as usize)) {
            Some((object, _)) => {
                put(pObject, *object);
                S_OK
            }
            None => E_INVALIDARG,
        }
    }
}

impl ICorProfilerInfo14_Impl for FakeInfo_Impl {
    unsafe fn EnumerateNonGCObjects(&self, ppEnum: *mut Option<ICorProfilerObjectEnum>) -> HRESULT {
        let st = enter!(self, "EnumerateNonGCObjects");
        put(
            ppEnum,
            Some(FakeObjectEnum::create(
                st.heap.non_gc_objects.clone(),
                &st.live_enumerators,
            )),
        );
        S_OK
    }
    unsafe fn GetNonGCHeapBounds(
        &self,
        cObjectRanges: ULONG,
        pcObjectRanges: *mut ULONG,
        ranges: *mut COR_PRF_NONGC_HEAP_RANGE,
    ) -> HRESULT {
        let st = enter!(self, "GetNonGCHeapBounds", cObjectRanges);
        let data: Vec<COR_PRF_NONGC_HEAP_RANGE> = st
            .heap
            .non_gc_ranges
            .iter()
            .map(|&(s, l, r)| COR_PRF_NONGC_HEAP_RANGE {
                rangeStart: s,
                rangeLength: l,
                rangeLengthReserved: r,
            })
            .collect();
        // SAFETY: [caller-contract] the caller's buffer has `cObjectRanges` slots.
        unsafe {
            give(
                &data,
                cObjectRanges,
                pcObjectRanges,
                ranges,
                Buffer::FillReportTotal,
            )
        }
    }
    unsafe fn EventPipeCreateProvider2(
        &self,
        providerName: *const WCHAR,
        pCallback: Option<EventPipeProviderCallback>,
        pProvider: *mut EVENTPIPE_PROVIDER,
    ) -> HRESULT {
        let mut st = enter!(self, "EventPipeCreateProvider2");
        // SAFETY: [caller-contract] the caller's name is NUL-terminated.
        let Some(name) = (unsafe { wide(providerName) }) else {
            return E_INVALIDARG;
        };
        let h = st.eventpipe.next_handle();
        st.eventpipe.providers.insert(h, (name, pCallback));
        put(pProvider, h);
        S_OK
    }
}

impl ICorProfilerInfo15_Impl for FakeInfo_Impl {
    unsafe fn EnumerateGCHeapObjects(
        &self,
        callback: Option<ObjectCallback>,
        callbackState: *mut c_void,
    ) -> HRESULT {
        let objects = {
            let st = enter!(self, "EnumerateGCHeapObjects");
            st.heap.gc_heap.clone()
        };
        let Some(cb) = callback else {
            return E_INVALIDARG;
        };
        for o in objects {
            // SAFETY: [test-fake, callback-args] called as the runtime does.
            if unsafe { cb(o, callbackState) } == 0 {
                break;
            }
        }
        S_OK
    }
}
