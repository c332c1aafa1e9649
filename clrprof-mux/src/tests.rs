//! The proxy and the mask union against clrprof's fake runtime (Info1–3).

use crate::config::ChildSpec;
use crate::info_vtbl::INFO_VTBL;
use crate::runtime::RealInfo;
use crate::shared::{ProxyRef, Shared, PHASE_RUNNING};
use clrprof::output::JsonLines;
use clrprof::sys::*;
use clrprof::testing::fake::FakeRuntime;
use core::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use windows_core::Interface;

fn spec(index: usize) -> ChildSpec {
    ChildSpec {
        index,
        path: format!("/child{index}.so"),
        clsid: GUID::zeroed(),
        env: Vec::new(),
        client_data: Vec::new(),
    }
}

/// A multiplexer state over the fake with `n` active children and their proxies.
fn setup(n: usize) -> (FakeRuntime, Arc<Shared>, Vec<ProxyRef>) {
    setup_as(n, false)
}

/// [`setup`], the multiplexer loaded by attach when `attached`.
fn setup_as(n: usize, attached: bool) -> (FakeRuntime, Arc<Shared>, Vec<ProxyRef>) {
    let fake = FakeRuntime::new();
    fake.state().attached = attached;
    // SAFETY: [test-fake] the fake's IUnknown is its profiler-info object.
    let runtime = unsafe { RealInfo::new(&fake.unknown(), attached) }.unwrap();
    let out = JsonLines::from_env("CLRPROF_MUX_TEST_NO_OUTPUT");
    let shared = Arc::new(Shared::new(
        runtime,
        attached,
        (1..=n).map(spec).collect(),
        out,
    ));
    let proxies = (0..n)
        .map(|k| {
            shared.children[k].active.store(true, Ordering::SeqCst);
            // SAFETY: [interface-version, mux-forward] INFO_VTBL is the proxy's vtable, generated for an
            // InfoProxy `this`.
            unsafe { ProxyRef::new(&INFO_VTBL, shared.clone(), k) }
        })
        .collect();
    (fake, shared, proxies)
}

/// The proxy's vtable as `V`.
///
/// # Safety
/// `V` is the vtable type of an Info version the proxy implements.
unsafe fn vtbl<V>(p: &ProxyRef) -> &V {
    // SAFETY: [ffi-abi, interface-version] the proxy is a COM object: its first word is its vtable.
    unsafe { &**(p.as_raw() as *const *const V) }
}

fn set_mask(p: &ProxyRef, mask: u32) -> HRESULT {
    // SAFETY: [interface-version, mux-forward] Info1's vtable, on a live proxy.
    unsafe { (vtbl::<ICorProfilerInfo_Vtbl>(p).SetEventMask)(p.as_raw(), mask) }
}

fn get_mask(p: &ProxyRef) -> u32 {
    let mut m = 0;
    // SAFETY: [interface-version, plain-call] Info1's vtable, a valid out pointer.
    let hr = unsafe { (vtbl::<ICorProfilerInfo_Vtbl>(p).GetEventMask)(p.as_raw(), &mut m) };
    assert_eq!(hr, S_OK);
    m
}

#[test]
fn query_interface_answers_the_runtimes_versions_only() {
    let (_fake, _shared, proxies) = setup(1);
    let p = &proxies[0];
    let qi = |iid: &GUID| -> HRESULT {
        let mut out: *mut c_void = core::ptr::null_mut();
        // SAFETY: [interface-version, com-ownership] IUnknown's vtable, valid pointers.
        let hr = unsafe { (vtbl::<IUnknown_Vtbl>(p).QueryInterface)(p.as_raw(), iid, &mut out) };
        if hr == S_OK {
            assert_eq!(out, p.as_raw());
            // SAFETY: [com-ownership] releases the reference QueryInterface added.
            unsafe { (vtbl::<IUnknown_Vtbl>(p).Release)(p.as_raw()) };
        } else {
            assert!(out.is_null());
        }
        hr
    };
    for iid in [
        IUnknown::IID,
        ICorProfilerInfo::IID,
        ICorProfilerInfo2::IID,
        ICorProfilerInfo3::IID,
    ] {
        assert_eq!(qi(&iid), S_OK);
    }
    // The fake is an Info3 runtime.
    for iid in [
        ICorProfilerInfo4::IID,
        ICorProfilerInfo15::IID,
        ICorProfilerCallback::IID,
    ] {
        assert_eq!(qi(&iid), E_NOINTERFACE);
    }
    // An Info4 method reached through the vtable anyway is refused.
    let mut size = 0usize;
    // SAFETY: [interface-version, mux-forward] the proxy's vtable has every Info version's slots.
    let hr =
        unsafe { (vtbl::<ICorProfilerInfo4_Vtbl>(p).GetObjectSize2)(p.as_raw(), 1, &mut size) };
    assert_eq!(hr, E_NOTIMPL);
}

#[test]
fn forwarded_methods_reach_the_runtime() {
    let (fake, _shared, proxies) = setup(1);
    let (mut class, mut module, mut token) = (0, 0, 0);
    // SAFETY: [interface-version, plain-call] Info1's vtable; valid out pointers.
    let hr = unsafe {
        (vtbl::<ICorProfilerInfo_Vtbl>(&proxies[0]).GetFunctionInfo)(
            proxies[0].as_raw(),
            0x1234,
            &mut class,
            &mut module,
            &mut token,
        )
    };
    // The fake knows no function 0x1234: its own answer comes back.
    assert_eq!(hr, E_INVALIDARG);
    assert_eq!(fake.calls_of("GetFunctionInfo")[0].args, vec![0x1234]);
}

#[test]
fn each_child_keeps_its_mask_and_the_runtime_gets_the_union() {
    let (fake, shared, proxies) = setup(2);
    assert_eq!(set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);
    assert_eq!(
        set_mask(
            &proxies[1],
            COR_PRF_MONITOR_GC | COR_PRF_MONITOR_JIT_COMPILATION
        ),
        S_OK
    );
    // Unchanged union: no call.
    assert_eq!(set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);
    let calls: Vec<usize> = fake
        .calls_of("SetEventMask")
        .iter()
        .map(|c| c.args[0])
        .collect();
    assert_eq!(
        calls,
        vec![
            COR_PRF_MONITOR_JIT_COMPILATION as usize,
            (COR_PRF_MONITOR_GC | COR_PRF_MONITOR_JIT_COMPILATION) as usize
        ]
    );
    assert_eq!(get_mask(&proxies[0]), COR_PRF_MONITOR_JIT_COMPILATION);
    assert_eq!(
        get_mask(&proxies[1]),
        COR_PRF_MONITOR_GC | COR_PRF_MONITOR_JIT_COMPILATION
    );

    // The runtime's refusal reaches the child, whose mask stays.
    fake.fail("SetEventMask", CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER);
    assert_eq!(
        set_mask(&proxies[0], COR_PRF_MONITOR_THREADS),
        CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER
    );
    assert_eq!(get_mask(&proxies[0]), COR_PRF_MONITOR_JIT_COMPILATION);
    fake.state().failures.clear();

    // After Initialize, a child's own immutable flags are fixed even when
    // the union would not change.
    assert_eq!(
        set_mask(
            &proxies[0],
            COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_DISABLE_INLINING
        ),
        S_OK
    );
    shared.phase.store(PHASE_RUNNING, Ordering::SeqCst);
    assert_eq!(
        set_mask(&proxies[1], COR_PRF_MONITOR_GC | COR_PRF_DISABLE_INLINING),
        CORPROF_E_IMMUTABLE_FLAGS_SET
    );
    assert_eq!(
        set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION),
        CORPROF_E_IMMUTABLE_FLAGS_SET
    );
    // A flag that is not immutable can still change.
    assert_eq!(set_mask(&proxies[1], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);

    // A dropped child's flags leave the union.
    shared.children[1].active.store(false, Ordering::SeqCst);
    shared.forget_child_masks(1);
    let last = fake.calls_of("SetEventMask").last().unwrap().args[0];
    assert_eq!(
        last,
        (COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_DISABLE_INLINING) as usize
    );
}

#[test]
fn children_follow_the_mask_rules_of_the_runtime_version() {
    // .NET 10 (dotnet/runtime PR 113924): DISABLE_INLINING and
    // DISABLE_OPTIMIZATIONS may change after Initialize, and a profiler
    // that set them may detach; .NET 8 (the other tests' fake) refuses both.
    let (fake, shared, proxies) = setup(2);
    fake.state().runtime.major = 10;
    assert!(shared.rules().is_net10_or_later());
    assert_eq!(
        set_mask(
            &proxies[0],
            COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_DISABLE_INLINING
        ),
        S_OK
    );
    shared.phase.store(PHASE_RUNNING, Ordering::SeqCst);
    fake.state().initialized = true;
    assert_eq!(
        set_mask(
            &proxies[1],
            COR_PRF_MONITOR_GC | COR_PRF_DISABLE_OPTIMIZATIONS
        ),
        S_OK
    );
    assert_eq!(set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);
    assert_eq!(
        fake.state().event_mask,
        COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_MONITOR_GC | COR_PRF_DISABLE_OPTIMIZATIONS
    );
    // Still immutable on .NET 10.
    assert_eq!(
        set_mask(&proxies[0], COR_PRF_ENABLE_OBJECT_ALLOCATED),
        CORPROF_E_IMMUTABLE_FLAGS_SET
    );
    // SAFETY: [interface-version] Info3's vtable on a live proxy.
    let detach = |p: &ProxyRef| unsafe {
        (vtbl::<ICorProfilerInfo3_Vtbl>(p).RequestProfilerDetach)(p.as_raw(), 500)
    };
    assert_eq!(
        detach(&proxies[1]),
        S_OK,
        "DISABLE_OPTIMIZATIONS does not pin a .NET 10 profiler"
    );
}

#[test]
fn callbacks_reach_only_the_children_that_asked() {
    let (_fake, shared, proxies) = setup(2);
    assert_eq!(set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);
    assert_eq!(set_mask(&proxies[1], COR_PRF_MONITOR_GC), S_OK);
    // Not loaded: no receiver at all.
    assert!(shared.children[0]
        .receiver(crate::routes::JITCompilationStarted, 1)
        .is_none());
    let routed = |k: usize, route| {
        crate::routes::Route::delivers(route, shared.children[k].masks.load(Ordering::SeqCst))
    };
    assert!(routed(0, crate::routes::JITCompilationStarted));
    assert!(!routed(1, crate::routes::JITCompilationStarted));
    assert!(routed(1, crate::routes::GarbageCollectionStarted));
    assert!(routed(0, crate::routes::Shutdown) && routed(1, crate::routes::Shutdown));
}

#[test]
fn detach_waits_for_every_child_and_refuses_what_the_runtime_would() {
    let (fake, _shared, proxies) = setup(2);
    let detach = |p: &ProxyRef| -> HRESULT {
        // SAFETY: [interface-version, mux-forward] Info3's vtable on a live proxy.
        unsafe { (vtbl::<ICorProfilerInfo3_Vtbl>(p).RequestProfilerDetach)(p.as_raw(), 500) }
    };
    assert_eq!(set_mask(&proxies[1], COR_PRF_DISABLE_INLINING), S_OK);
    assert_eq!(detach(&proxies[1]), CORPROF_E_IMMUTABLE_FLAGS_SET);
    assert_eq!(set_mask(&proxies[1], COR_PRF_MONITOR_THREADS), S_OK);
    assert_eq!(detach(&proxies[0]), S_OK);
    assert_eq!(
        fake.call_count("RequestProfilerDetach"),
        0,
        "one child still runs"
    );
    assert_eq!(detach(&proxies[1]), S_OK);
    assert_eq!(fake.calls_of("RequestProfilerDetach").len(), 1);
    assert_eq!(fake.calls_of("RequestProfilerDetach")[0].args, vec![500]);
}

#[test]
fn hooks_are_refused_after_initialize_and_legacy_hooks_do_not_compose() {
    let (_fake, shared, proxies) = setup(2);
    // SAFETY: [local-memory] no function is ever called through these addresses.
    let enter: FunctionEnter3 = unsafe { core::mem::transmute::<usize, FunctionEnter3>(0x1000) };
    // SAFETY: [local-memory] as above.
    let enter2: FunctionEnter2 = unsafe { core::mem::transmute::<usize, FunctionEnter2>(0x2000) };
    let v3 = |p: &ProxyRef| -> HRESULT {
        // SAFETY: [interface-version, mux-forward] Info3's vtable on a live proxy; the hooks are only recorded.
        unsafe {
            (vtbl::<ICorProfilerInfo3_Vtbl>(p).SetEnterLeaveFunctionHooks3)(
                p.as_raw(),
                Some(enter),
                None,
                None,
            )
        }
    };
    let v2 = |p: &ProxyRef| -> HRESULT {
        // SAFETY: [interface-version, mux-forward] Info2's vtable on a live proxy; the hooks are only recorded.
        unsafe {
            (vtbl::<ICorProfilerInfo2_Vtbl>(p).SetEnterLeaveFunctionHooks2)(
                p.as_raw(),
                Some(enter2),
                None,
                None,
            )
        }
    };
    assert_eq!(v3(&proxies[0]), S_OK);
    assert_eq!(
        v2(&proxies[1]),
        E_NOTIMPL,
        "v2 hooks beside another child's hooks"
    );
    assert_eq!(v3(&proxies[1]), S_OK, "two v3 children compose");
    shared.phase.store(PHASE_RUNNING, Ordering::SeqCst);
    assert_eq!(v3(&proxies[0]), CORPROF_E_CALL_ONLY_FROM_INIT);
}

#[test]
fn the_skip_of_objects_allocated_by_class_reaches_the_runtime_only_when_every_gc_child_asks() {
    use crate::routes::{GarbageCollectionStarted, ObjectsAllocatedByClass};
    use crate::shared::union_of;
    let skip = u64::from(COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC) << 32;
    let gc = u64::from(COR_PRF_MONITOR_GC);
    let jit = u64::from(COR_PRF_MONITOR_JIT_COMPILATION);
    // .NET 11 stops ObjectsAllocatedByClass for the whole multiplexer when
    // the union has the skip: kept out while a GC child wants the callback.
    assert_eq!(union_of(&[gc | skip, gc]), gc);
    assert_eq!(union_of(&[gc | skip, gc | skip, jit]), gc | skip | jit);
    assert_eq!(union_of(&[gc | skip, jit]), gc | skip | jit);
    assert_eq!(union_of(&[skip, gc]), gc);
    assert_eq!(union_of(&[]), 0);
    // Routed to the children that did not ask to skip it; the other GC
    // callbacks reach both.
    assert!(ObjectsAllocatedByClass.delivers(gc));
    assert!(!ObjectsAllocatedByClass.delivers(gc | skip));
    assert!(!ObjectsAllocatedByClass.delivers(jit));
    assert!(GarbageCollectionStarted.delivers(gc | skip));
}

#[test]
fn an_attached_multiplexer_refuses_the_net10_attach_flags_of_older_runtimes_itself() {
    for (major, allowed) in [(8u16, false), (9, false), (10, true), (11, true)] {
        let (fake, _shared, proxies) = setup_as(1, true);
        fake.state().runtime.major = major;
        let before = fake.call_count("SetEventMask");
        let hr = set_mask(
            &proxies[0],
            COR_PRF_MONITOR_JIT_COMPILATION | COR_PRF_DISABLE_INLINING,
        );
        if allowed {
            assert_eq!(hr, S_OK, ".NET {major}");
            assert_eq!(fake.call_count("SetEventMask"), before + 1, ".NET {major}");
        } else {
            // Refused as the SDK refuses its own profiler, before the
            // runtime is called.
            assert_eq!(
                hr, CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER,
                ".NET {major}"
            );
            assert_eq!(fake.call_count("SetEventMask"), before, ".NET {major}");
            assert_eq!(set_mask(&proxies[0], COR_PRF_MONITOR_JIT_COMPILATION), S_OK);
        }
    }
}

/// The test binary's allocator: the system's, which overwrites every
/// block it frees (as a memory checker poisons freed memory), so a read of
/// freed memory reads the poison instead of what happened to stay there.
struct Poisoning;

// SAFETY: [test-fake] every call goes to `System` with the caller's
// arguments; `dealloc` first writes `layout.size()` bytes of the block it
// was given, which the caller still owns until `System.dealloc` returns.
unsafe impl std::alloc::GlobalAlloc for Poisoning {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: [test-fake] the caller's layout, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: [test-fake] the caller's block, still allocated.
        unsafe {
            core::ptr::write_bytes(ptr, 0xDD, layout.size());
            std::alloc::System.dealloc(ptr, layout)
        }
    }
}

#[global_allocator]
static POISONING: Poisoning = Poisoning;

/// Review 4, route 1: during a `GetReJITParameters` fan-out a second
/// child reads the body the first child set (`GetILFunctionBody` through
/// its proxy), then sets its own through the multiplexer's function
/// control. The body it read must still be there: the runtime's own
/// `GetILFunctionBody` gives memory that lives as long as the module.
#[test]
fn a_body_read_during_a_rejit_fan_out_outlives_the_next_set() {
    let (_fake, shared, proxies) = setup(2);
    let (module, method) = (0x7000usize, 0x0600_0001u32);
    // Tiny headers: (code size << 2) | 2, then the code.
    let first: Vec<u8> = [vec![(6 << 2) | 2], vec![0x00, 0x00, 0x00, 0x00, 0x16, 0x2a]].concat();
    let second: Vec<u8> = [vec![(3 << 2) | 2], vec![0x00, 0x17, 0x2a]].concat();
    let control: ICorProfilerFunctionControl = crate::rejit::ControlProxy.into();
    crate::rejit::test_fan_out(Some((module, method)));
    // Child 1 rewrites.
    // SAFETY: [test-fake, local-memory] our own control; `first` is readable for the call.
    let hr = unsafe { control.SetILFunctionBody(first.len() as u32, first.as_ptr()) };
    assert_eq!(hr, S_OK);
    // Child 2 reads child 1's body (`before`) ...
    let (mut header, mut size): (*const u8, u32) = (core::ptr::null(), 0);
    // SAFETY: [interface-version, plain-call] Info1's vtable; valid out pointers.
    let hr = unsafe {
        (vtbl::<ICorProfilerInfo_Vtbl>(&proxies[1]).GetILFunctionBody)(
            proxies[1].as_raw(),
            module,
            method,
            &mut header,
            &mut size,
        )
    };
    assert_eq!(hr, S_OK);
    assert_eq!(size as usize, first.len());
    // ... installs its own ...
    // SAFETY: [test-fake, local-memory] as above.
    let hr = unsafe { control.SetILFunctionBody(second.len() as u32, second.as_ptr()) };
    assert_eq!(hr, S_OK);
    // ... the fan-out ends ...
    crate::rejit::test_fan_out(None);
    // ... and allocations reuse what was freed.
    let churn: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; first.len()]).collect();
    drop(churn);
    // SAFETY: [test-fake] the multiplexer handed this pointer and size out
    // as a `GetILFunctionBody` answer, which must stay readable while the
    // module is loaded (the fake never unloads it).
    let before = unsafe { core::slice::from_raw_parts(header, size as usize) };
    assert_eq!(
        before,
        &first[..],
        "the body child 2 read was freed under it"
    );
    // Kept once (the body nobody read is not kept), until the module's
    // ModuleUnloadFinished reached every child.
    assert_eq!(shared.rejit.bodies.kept(module), 1);
    assert_eq!(shared.rejit.bodies.kept(module + 1), 0);
    shared.rejit.bodies.module_unloaded(module);
    assert_eq!(shared.rejit.bodies.kept(module), 0);
}
