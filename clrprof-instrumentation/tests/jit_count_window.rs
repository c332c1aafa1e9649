//! The fourth review's route 6, pinned against the fake runtime (its own
//! test binary: the JIT count is process-wide state, and this test needs it
//! fresh).
//!
//! The runtime stops sending `JITCompilationStarted` as soon as it takes a
//! mask without `MONITOR_JIT_COMPILATION`, inside `SetEventMask`
//! (`EEToProfInterfaceImpl::SetEventMask` stores the new mask, which every
//! callback site reads). At 3711658 the SDK marked its count incomplete
//! only after that call returned: a method compiled in between went
//! uncounted, and a claim made then (another thread's
//! `WrappedBody::install`, `during` None) was granted for it, so a new body
//! landed under tier-0 code of the old one. No real run can be made to hit
//! that window (a few instructions, once per process); the fake runtime's
//! call hook runs *inside* the `SetEventMask` call, after the runtime would
//! have taken the mask, and claims there. Before the fix the claim was
//! granted; now it is refused (`NotSeen`), and a refused mask leaves the
//! count complete.

use clrprof::compilations::{claim, MethodKey, Refusal};
use clrprof::event_mask::{EventMask, EventMasks};
use clrprof::ids::{MdMethodDef, RawModuleId};
use clrprof::testing::fake::FakeRuntime;
use std::sync::{Arc, Mutex};

/// The answers of the claims made inside the runtime's calls.
type Seen = Arc<Mutex<Vec<Result<clrprof::Result<()>, Refusal>>>>;

fn key(rid: u32) -> MethodKey {
    (RawModuleId(0x4000), MdMethodDef::from_rid(rid))
}

#[test]
fn no_claim_is_granted_once_the_runtime_takes_a_mask_without_jit_events() {
    let fake = FakeRuntime::new();
    // SAFETY: the fake's state describes no memory; nothing is read through it.
    let info = unsafe { fake.profiler_info() };
    let with_jit: EventMasks =
        (EventMask::MONITOR_JIT_COMPILATION | EventMask::MONITOR_MODULE_LOADS).into();
    info.set_event_mask(with_jit)
        .expect("a first mask with the JIT events");
    // The count is complete: a method never compiled may be claimed.
    assert_eq!(claim(key(1), None, || Ok(())), Ok(Ok(())));

    // Inside the runtime's SetEventMask, as another thread would, once the
    // runtime took the mask (and compiles unseen from now on).
    let seen: Seen = Arc::default();
    let inside = seen.clone();
    let mut n = 2;
    fake.on_call(move |_, method| {
        if method == "SetEventMask" {
            inside.lock().unwrap().push(claim(key(n), None, || Ok(())));
            n += 1;
        }
    });

    // A mask the runtime refuses: while the call ran no claim was granted,
    // and after it the count is still complete (nothing was changed).
    fake.fail("SetEventMask", clrprof_sys::E_FAIL);
    let without_jit: EventMasks = EventMask::MONITOR_MODULE_LOADS.into();
    assert!(info.set_event_mask(without_jit).is_err());
    assert_eq!(seen.lock().unwrap().as_slice(), &[Err(Refusal::NotSeen)]);
    assert_eq!(claim(key(10), None, || Ok(())), Ok(Ok(())));

    // The mask taken: refused inside the call and for good after it.
    fake.state().failures.clear();
    info.set_event_mask(without_jit)
        .expect("the mask without JIT events");
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        &[Err(Refusal::NotSeen), Err(Refusal::NotSeen)],
        "a claim made while the runtime was taking the mask was granted"
    );
    assert_eq!(claim(key(11), None, || Ok(())), Err(Refusal::NotSeen));
}
