//! .NET 11 runtime-async methods against the ELT shadow stacks, as the
//! runtime reports them (dotnet/runtime issue 122488): `Enter` fires when
//! the method starts and again each time it resumes after an `await`;
//! `Leave` fires only when it completes, not when it suspends (PR 131985
//! may add a leave on suspension). A suspended method returns to its caller
//! with its frame still on the shadow stack.
//!
//! The shadow stacks follow the rule below (the book's Info-versions
//! chapter, "Runtime-async methods (.NET 11)"); the test pins it with the
//! hook sequence the runtime makes:
//!
//! * `leave(f)` whose `f` is not the top frame but is found below it pops
//!   the frames above `f` as *suspended* (a new `StackStats::suspended`
//!   counter, not `mismatches`), then pops `f`. Exact for runtime-async:
//!   a hooked frame can end without its leave hook only by an exception
//!   (the unwind callbacks pop it first) or by a suspension.
//! * A resume's `Enter` is a new frame on the resuming thread; its `Leave`
//!   (completion) or the caller's next leave ends it.
//! * Call timing: a suspended frame's segment ends at the repair, an upper
//!   bound of the suspension time; enter counts of async methods count
//!   resumes (1 + number of resumptions per call).

use crate::elt::shadow_stack::{current_depth, current_os_thread, enter, leave, snapshot};
use crate::elt::Hooked;
use crate::ids::RawFunctionId;

fn hooked(function: usize) -> &'static Hooked<()> {
    Box::leak(Box::new(Hooked::for_tests(RawFunctionId(function))))
}

const MAIN: usize = 0x1000;
const ASYNC_A: usize = 0x2000;
const ASYNC_B: usize = 0x3000;

/// `Main` calls async `A`, which calls async `B`; `B` awaits an incomplete
/// task and suspends, then `A` awaits `B` and suspends; `Main` returns.
/// The hooks the runtime calls on this thread: Enter(Main), Enter(A),
/// Enter(B), Leave(Main).
fn suspend_twice_then_return() {
    let (main, a, b) = (hooked(MAIN), hooked(ASYNC_A), hooked(ASYNC_B));
    enter(main);
    enter(a);
    enter(b);
    leave(main);
}

#[test]
fn after_the_repair_suspended_frames_are_popped_by_the_callers_leave() {
    std::thread::spawn(|| {
        suspend_twice_then_return();
        let mut frames = Vec::new();
        let stats = snapshot(current_os_thread(), &mut frames).unwrap();
        assert_eq!(current_depth(), 0, "{frames:?}");
        assert_eq!(stats.mismatches, 0);
        assert_eq!(
            stats.suspended, 2,
            "B and A ended without their leave hooks"
        );
        // The resume on a thread-pool thread: Enter(B) on resume, Leave(B)
        // on completion, then A resumes and completes.
        let (a, b) = (hooked(ASYNC_A), hooked(ASYNC_B));
        std::thread::spawn(move || {
            enter(b);
            leave(b);
            enter(a);
            leave(a);
            assert_eq!(current_depth(), 0);
        })
        .join()
        .unwrap();
    })
    .join()
    .unwrap();
}
