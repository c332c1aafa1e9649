//! Tests of the fake itself, of version handling, of the name layer and of
//! the Info wrappers that live in `info/mod.rs`, all against the fake.

use super::*;
use crate::error::Error;
use crate::event_mask::{EventMask, EventMasks, HighEventMask};
use crate::info::{MetaDataOpen, RuntimeType};
use crate::names::NameCache;
use windows_core::Interface;

const M: usize = 0x2000;
const F_INNER: usize = 0x1000;
const F_GENERIC: usize = 0x1100;
const C_INNER: usize = 0x3000;
const C_LIST: usize = 0x3100;

/// A module with `Ns.Outer+Inner::Method` and ``Ns.List`1::Add``.
fn named_world() -> FakeRuntime {
    let fake = FakeRuntime::new();
    let md = FakeMetaData::default()
        .with_type(0x0200_0002, "Ns.Outer")
        .with_nested_type(0x0200_0003, "Inner", 0x0200_0002)
        .with_type(0x0200_0004, "Ns.List`1")
        .with_method(0x0600_0001, 0x0200_0003, "Method")
        .with_method(0x0600_0002, 0x0200_0004, "Add");
    {
        let mut st = fake.state();
        st.modules.insert(
            M,
            FakeModule {
                name: "ns.dll".into(),
                metadata: Arc::new(md),
                ..Default::default()
            },
        );
        st.functions.insert(
            F_INNER,
            FakeFunction {
                class: C_INNER,
                module: M,
                token: 0x0600_0001,
                ..Default::default()
            },
        );
        st.functions.insert(
            F_GENERIC,
            FakeFunction {
                class: C_LIST,
                module: M,
                token: 0x0600_0002,
                ..Default::default()
            },
        );
        st.classes.insert(
            C_INNER,
            FakeClass {
                module: M,
                type_def: 0x0200_0003,
                ..Default::default()
            },
        );
        st.classes.insert(
            C_LIST,
            FakeClass {
                module: M,
                type_def: 0x0200_0004,
                type_args: vec![C_INNER],
                ..Default::default()
            },
        );
    }
    fake
}

#[test]
fn fake_offers_info3_and_newer_methods_are_unsupported() {
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    assert_eq!(info.version(), 3);
    assert!(info.raw_info3("x").is_ok());
    assert_eq!(
        info.raw_info4("ICorProfilerInfo4::EnumThreads").err(),
        Some(Error::Unsupported {
            needs: 4,
            has: 3,
            call: "ICorProfilerInfo4::EnumThreads"
        })
    );
    let masks = EventMasks {
        low: EventMask::MONITOR_JIT_COMPILATION,
        high: HighEventMask::from_bits_retain(1),
    };
    assert!(matches!(
        info.set_event_mask(masks),
        Err(Error::Unsupported {
            needs: 5,
            has: 3,
            ..
        })
    ));
}

#[test]
fn event_mask_round_trips_through_info1() {
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    info.set_event_mask(EventMask::MONITOR_MODULE_LOADS.into())
        .unwrap();
    assert_eq!(
        fake.state().event_mask,
        EventMask::MONITOR_MODULE_LOADS.bits()
    );
    assert_eq!(
        info.event_mask().unwrap().low,
        EventMask::MONITOR_MODULE_LOADS
    );
}

#[test]
fn unimplemented_methods_answer_e_notimpl() {
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let i2 = info.raw_info2("test").unwrap();
    // SAFETY: [test-fake] the fake ignores every argument of DoStackSnapshot.
    let hr = unsafe { i2.DoStackSnapshot(0, None, 0, core::ptr::null_mut(), core::ptr::null(), 0) };
    assert_eq!(hr, E_NOTIMPL);
    // A fake made with `new` answers QueryInterface up to Info3 only: newer
    // methods are Unsupported.
    let unk = fake.unknown();
    assert!(unk.cast::<sys::ICorProfilerInfo4>().is_err());
    assert!(unk.cast::<sys::ICorProfilerInfo2>().is_ok());
    assert_eq!(info.version(), 3);
    // With a newer version, QueryInterface answers up to it.
    let fake15 = FakeRuntime::with_info_version(15);
    assert!(fake15.unknown().cast::<sys::ICorProfilerInfo15>().is_ok());
}

#[test]
fn runtime_information_reads_a_growing_version_string() {
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let ri = info.runtime_information().unwrap();
    assert_eq!(
        (
            ri.runtime_type,
            ri.major,
            ri.minor,
            ri.build,
            ri.clr_instance_id
        ),
        (RuntimeType::CoreClr, 8, 0, 4, 7)
    );
    assert_eq!(ri.version_string, "8.0.4");

    fake.state().runtime.version_string = "v".repeat(300);
    let mut n = 0;
    fake.on_call(move |st, m| {
        if m == "GetRuntimeInformation" {
            n += 1;
            if n == 2 {
                st.runtime.version_string.push_str("+grown");
            }
        }
    });
    let ri = info.runtime_information().unwrap();
    assert_eq!(ri.version_string, format!("{}+grown", "v".repeat(300)));
    assert_eq!(fake.call_count("GetRuntimeInformation"), 1 + 3);
}

#[test]
fn module_info_reads_a_growing_path() {
    let fake = named_world();
    let long = format!("/{}/ns.dll", "x".repeat(270));
    fake.state().modules.get_mut(&M).unwrap().name = long.clone();
    let mut n = 0;
    fake.on_call(move |st, m| {
        if m == "GetModuleInfo" {
            n += 1;
            if n == 2 {
                st.modules.get_mut(&M).unwrap().name.push_str(".bak");
            }
        }
    });
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; m = module_id(M));
    assert_eq!(info.module_info(m).unwrap().name, format!("{long}.bak"));
    assert_eq!(fake.call_count("GetModuleInfo"), 3);
}

#[test]
fn class_and_function_info2_report_type_args() {
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; list = class_id(C_LIST), f = function_id(F_GENERIC));
    let ci = info.class_info(list).unwrap();
    assert_eq!(
        ci.type_args.iter().map(|c| c.as_sys()).collect::<Vec<_>>(),
        vec![C_INNER]
    );
    assert_eq!(ci.type_def.0, 0x0200_0004);
    let (fi, args) = info.function_info2(f).unwrap();
    assert_eq!(
        (fi.class.as_sys(), fi.module.as_sys(), fi.token.0),
        (C_LIST, M, 0x0600_0002)
    );
    assert!(args.is_empty());
}

#[test]
fn names_keep_nesting_and_generic_arity() {
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; f = function_id(F_INNER), g = function_id(F_GENERIC), inner = class_id(C_INNER), list = class_id(C_LIST));
    assert_eq!(info.function_name(f).unwrap(), "Ns.Outer+Inner::Method");
    assert_eq!(info.function_name(g).unwrap(), "Ns.List`1::Add");
    assert_eq!(info.class_name(inner).unwrap(), "Ns.Outer+Inner");
    assert_eq!(info.class_name(list).unwrap(), "Ns.List`1");
}

#[test]
fn long_metadata_names_are_read_whole() {
    let fake = named_world();
    let long = format!("Ns.{}", "Q".repeat(400));
    {
        let mut st = fake.state();
        let mut md = (*st.modules[&M].metadata).clone();
        md.type_defs.get_mut(&0x0200_0002).unwrap().name = long.clone();
        st.modules.get_mut(&M).unwrap().metadata = Arc::new(md);
    }
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; f = function_id(F_INNER));
    assert_eq!(
        info.function_name(f).unwrap(),
        format!("{long}+Inner::Method")
    );
}

#[test]
fn a_name_cache_answers_only_runtimes_it_is_registered_with() {
    let fake = named_world();
    fake_ids!(fake; f = function_id(F_INNER));
    let cache = NameCache::new();
    {
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        assert!(matches!(
            cache.function_name(&info, f),
            Err(crate::error::Error::NotRegistered { .. })
        ));
    }
    let components = fake.initialize_components(false, |info| cache.register(info).unwrap());
    assert!(components
        .masks()
        .low
        .contains(crate::event_mask::EventMask::MONITOR_MODULE_LOADS));
    // SAFETY: [test-fake] as above.
    let info = unsafe { fake.profiler_info() };
    assert_eq!(
        &*cache.function_name(&info, f).unwrap(),
        "Ns.Outer+Inner::Method"
    );
    // A module unload empties the cache (the component hears it from the SDK).
    fake_ids!(fake; m = module_id(0x2000));
    components.each("test", |c| c.module_unload_started(&info, m));
    assert!(cache.cached_function_name(f.to_raw()).is_none());
}

#[test]
fn name_cache_asks_the_runtime_once() {
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let cache = NameCache::for_fake_runtime();
    fake_ids!(fake; f = function_id(F_INNER));
    assert_eq!(
        &*cache.function_name(&info, f).unwrap(),
        "Ns.Outer+Inner::Method"
    );
    let calls = fake.state().calls.len();
    assert_eq!(
        &*cache.function_name(&info, f).unwrap(),
        "Ns.Outer+Inner::Method"
    );
    assert_eq!(
        fake.state().calls.len(),
        calls,
        "a cached name makes no runtime call"
    );
}

#[test]
fn unknown_function_name_reports_the_failing_call() {
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; nope = function_id(0x42));
    let e = info.function_name(nope).unwrap_err();
    assert_eq!(
        e,
        Error::Runtime {
            hr: E_INVALIDARG,
            call: "ICorProfilerInfo::GetTokenAndMetaDataFromFunction"
        }
    );
}

#[test]
fn type_refs_and_member_refs_are_answered() {
    let fake = named_world();
    {
        let mut st = fake.state();
        let mut md = (*st.modules[&M].metadata).clone();
        md.type_refs
            .insert(0x0100_0001, (0x2300_0001, "System.Object".into()));
        md.member_refs.insert(
            0x0A00_0001,
            FakeMemberRef {
                parent: 0x0100_0001,
                name: ".ctor".into(),
                signature: vec![0x20, 0, 1],
            },
        );
        st.modules.get_mut(&M).unwrap().metadata = Arc::new(md);
    }
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    fake_ids!(fake; m = module_id(M));
    let md = info.module_metadata(m, MetaDataOpen::Read).unwrap();
    let (name, scope) = md
        .type_ref_props(crate::ids::MdTypeRef(0x0100_0001))
        .unwrap();
    assert_eq!((name.as_str(), scope.0), ("System.Object", 0x2300_0001));
    let mr = md
        .member_ref_props(crate::ids::MdMemberRef(0x0A00_0001))
        .unwrap();
    assert!(format!("{mr:?}").contains(".ctor"), "{mr:?}");
}

#[test]
fn enumerators_are_released_when_dropped() {
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    {
        let mut e = info.enum_modules().unwrap();
        assert_eq!(fake.live_enumerators(), 1);
        assert!(e.next().is_some());
    }
    assert_eq!(fake.live_enumerators(), 0);
    let e = info.enum_jited_functions().unwrap();
    assert_eq!(fake.live_enumerators(), 1);
    drop(e);
    assert_eq!(fake.live_enumerators(), 0);
}

#[test]
fn current_thread_and_detach_and_force_gc() {
    // A detach is refused while SDK threads run: none of another test's.
    let _serial = crate::thread::TEST_REGISTRY
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let fake = FakeRuntime::new();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    assert_eq!(
        info.current_thread_id().unwrap_err().name(),
        Some("CORPROF_E_NOT_MANAGED_THREAD")
    );
    fake.state().current_thread = Some(0x6000);
    assert_eq!(info.current_thread_id().unwrap().as_sys(), 0x6000);
    info.request_profiler_detach(2500).unwrap();
    assert_eq!(fake.calls_of("RequestProfilerDetach")[0].args, vec![2500]);
    info.force_gc().unwrap();
    assert_eq!(fake.call_count("ForceGC"), 1);
}

#[test]
fn metadata_truncation_is_reported_as_truncation() {
    let md: sys::IMetaDataImport = metadata::FakeMetaDataImport {
        tables: Arc::new(FakeMetaData::default().with_type(0x0200_0001, "Abcdef")),
    }
    .into();
    let mut buf = [0u16; 4];
    let (mut needed, mut flags, mut extends) = (0u32, 0u32, 0u32);
    // SAFETY: [test-fake, buffer-protocol] `buf` has 4 WCHARs; the other out pointers are locals.
    let hr = unsafe {
        md.GetTypeDefProps(
            0x0200_0001,
            buf.as_mut_ptr(),
            4,
            &mut needed,
            &mut flags,
            &mut extends,
        )
    };
    assert_eq!(hr, CLDB_S_TRUNCATION);
    assert_eq!(needed, 7);
    assert_eq!(buf, [b'A' as u16, b'b' as u16, b'c' as u16, 0]);
}

/// Second review, route 1: a `RuntimeHandle` outlives the callbacks; once the
/// runtime retired the profiler (detach, failed Initialize, shutdown) the
/// runtime deleted its info object, so every method refuses without calling.
#[test]
fn runtime_handle_methods_refuse_after_the_runtime_retired() {
    let fake = FakeRuntime::with_info_version(15);
    // SAFETY: [test-fake] the fake describes no memory the SDK reads.
    let rt = unsafe { fake.runtime_handle(false) };
    rt.retire();
    let refused = |what: &str, e: Option<Error>| match e {
        Some(Error::Detached { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    refused("create_provider", rt.event_pipe_create_provider("P").err());
    refused(
        "create_provider_with_callback",
        rt.event_pipe_create_provider_with_callback("P", |_| {})
            .err(),
    );
    refused(
        "start_session",
        rt.event_pipe_start_session(&[], false).err(),
    );
    refused("function_from_ip2", rt.function_from_ip2(0x1000).err());
    refused("function_from_ip3", rt.function_from_ip3(0x1000).err());
    // SAFETY: [test-fake] the fake unloads nothing.
    refused(
        "enum_jited_functions2",
        unsafe { rt.enum_jited_functions2() }.err(),
    );
    refused("enum_jited_functions", rt.enum_jited_functions().err());
    refused("enum_modules", rt.enum_modules().err());
    refused("environment_variable", rt.environment_variable("A").err());
    refused(
        "set_environment_variable",
        rt.set_environment_variable("A", Some("b")).err(),
    );
    refused(
        "initialize_current_thread",
        rt.initialize_current_thread().err(),
    );
    for m in [
        "EventPipeCreateProvider",
        "EventPipeCreateProvider2",
        "EventPipeStartSession",
        "GetFunctionFromIP2",
        "GetFunctionFromIP3",
        "EnumJITedFunctions2",
        "EnumJITedFunctions",
        "EnumModules",
        "GetEnvironmentVariable",
        "SetEnvironmentVariable",
        "InitializeCurrentThread",
    ] {
        assert_eq!(fake.call_count(m), 0, "{m} reached the runtime");
    }
}

#[test]
fn sampler_never_hands_a_pushed_frame_to_the_runtime() {
    use crate::ids::{RawFunctionId, RawThreadId};
    use crate::runtimes::RuntimeSlot;
    use crate::stackwalk::naming::{frame_name, runtime_may_name};
    use crate::stackwalk::FrameBuffer;
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    let cache = NameCache::for_fake_runtime();
    // A user StackSource (or a shadow stack holding a frame of a method
    // unloaded since) pushes an ID the runtime never gave for this tick.
    let mut buffer = FrameBuffer::new(2, 4);
    assert!(buffer.begin(RawThreadId(1)));
    buffer.push(RawFunctionId(0x4141_4141_4140));
    buffer.push(RawFunctionId(F_INNER));
    for sample in buffer.samples() {
        for &f in buffer.frames(sample) {
            let named = frame_name(
                &info,
                &cache,
                f,
                runtime_may_name(sample, RuntimeSlot(0), true, || false),
            );
            assert_eq!(&*named.function, crate::stackwalk::UNKNOWN_FRAME);
            assert!(!named.is_final);
        }
    }
    assert_eq!(fake.call_count("GetFunctionInfo"), 0);
    assert_eq!(fake.state().calls.len(), 0, "no runtime call at all");
    // Once a verified path named it, the cache may name a pushed frame.
    fake_ids!(fake; f = function_id(F_INNER));
    cache.function_name(&info, f).unwrap();
    let calls = fake.state().calls.len();
    let s = buffer.samples()[0];
    let named = frame_name(
        &info,
        &cache,
        RawFunctionId(F_INNER),
        runtime_may_name(&s, RuntimeSlot(0), true, || false),
    );
    assert_eq!(&*named.function, "Ns.Outer+Inner::Method");
    assert_eq!(fake.state().calls.len(), calls);
}

#[test]
fn a_namer_names_only_the_frames_of_its_own_buffer() {
    use crate::ids::{RawFunctionId, RawThreadId};
    use crate::stackwalk::{FrameBuffer, FrameNamer};
    let fake = named_world();
    let cache = NameCache::for_fake_runtime();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let slot = unsafe { fake.profiler_info() }.runtime_slot();
    // Two walked ticks: the runtime gave F_INNER to the first, nothing to
    // the second (an ID kept from the first may be dead by then).
    let mut first = FrameBuffer::new(1, 2);
    assert!(first.begin_walked(RawThreadId(1), slot));
    assert!(first.push_walked(RawFunctionId(F_INNER)));
    let mut second = FrameBuffer::new(1, 2);
    assert!(second.begin_walked(RawThreadId(1), slot));
    assert!(second.push_walked(RawFunctionId(0)));
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let one = FrameNamer::for_test(unsafe { fake.profiler_info() }, &first);
    // SAFETY: [test-fake] as above.
    let two = FrameNamer::for_test(unsafe { fake.profiler_info() }, &second);
    let kept: Vec<_> = one.frames(0).collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].sample(), kept[0].index(), kept[0].function()),
        (0, 0, RawFunctionId(F_INNER))
    );
    assert_eq!(one.frames(1).count(), 0, "no stack 1");
    // The first tick's frame, handed to the second tick's namer: refused,
    // and the runtime is not called.
    let calls = fake.state().calls.len();
    let e = two.name(&cache, kept[0]).unwrap_err();
    assert!(
        matches!(
            e,
            crate::error::Error::WrongPartner {
                call: "stackwalk::FrameNamer::name",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "stackwalk::FrameNamer::name refused (nothing was handed to the runtime): frame 0 of \
         stack 0 belongs to another resolve's buffer; a namer names only the frames it hands \
         out (FrameNamer::frames)"
    );
    assert_eq!(fake.state().calls.len(), calls);
    // Its own frames: the walked one is named by the runtime, the second
    // tick's unmanaged run without it.
    let named = one.name(&cache, kept[0]).unwrap();
    assert_eq!(&*named.function, "Ns.Outer+Inner::Method");
    assert!(fake.call_count("GetFunctionInfo") >= 1);
    let own = two.frames(0).next().unwrap();
    assert_eq!(
        &*two.name(&cache, own).unwrap().function,
        crate::stackwalk::UNMANAGED_FRAME
    );
}

#[test]
fn tags_and_name_caches_answer_only_for_their_runtime() {
    use crate::ids::RawModuleId;
    use crate::runtimes::{RuntimeSlot, RuntimeTagged};
    let fake = named_world();
    // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
    let info = unsafe { fake.profiler_info() };
    // A value tagged by another runtime (slot 7): not given back here.
    let other = RuntimeTagged {
        slot: RuntimeSlot(7),
        value: RawModuleId(0x2000),
    };
    assert_eq!(info.untag(other), None);
    assert_eq!(
        info.untag(info.tag(RawModuleId(0x2000))),
        Some(RawModuleId(0x2000))
    );
    // A cache registered with no runtime (or another one) asks none.
    fake_ids!(fake; f = function_id(F_INNER));
    let calls = fake.state().calls.len();
    let e = NameCache::new().function_name(&info, f).unwrap_err();
    assert!(
        matches!(e, crate::error::Error::NotRegistered { .. }),
        "{e}"
    );
    assert_eq!(fake.state().calls.len(), calls);
}
