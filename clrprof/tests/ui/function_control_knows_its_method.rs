// A `FunctionControl` carries the method of its ReJIT request (the module
// and token the runtime passed with it to GetReJITParameters), which
// `WrappedBody::install_in_rejit` checks. Safe code cannot make one or give
// one another method: its fields are private, and its only constructor
// (`from_raw_borrowed`) is `unsafe` (the caller promises the method is the
// one the runtime passed).
use clrprof::rejit::FunctionControl;
use clrprof::{MdMethodDef, RawModuleId};

fn relabelled(raw: clrprof::sys::ICorProfilerFunctionControl) -> FunctionControl {
    FunctionControl {
        raw,
        module: RawModuleId(1),
        method: MdMethodDef(0x0600_0002),
    }
}

fn main() {}
