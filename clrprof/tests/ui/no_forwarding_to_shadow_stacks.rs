// The SDK delivers exception unwinding to the shadow stacks itself; there
// is no forwarding function a profiler could forget to call.
use clrprof::elt::shadow_stack;
use clrprof::RawFunctionId;

fn forward(f: RawFunctionId) {
    shadow_stack::unwind_function_enter(f);
}

fn main() {}
