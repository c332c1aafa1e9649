// A native code version's start address is only a code start while its
// function is valid: it borrows the function's scope and cannot be kept for
// a later GetCodeInfo4 / GetILToNativeMapping3.
use clrprof::info::NativeCode;
use clrprof::{FunctionId, ProfilerInfo, RawReJitId};
use std::sync::Mutex;

static KEPT: Mutex<Vec<NativeCode<'static>>> = Mutex::new(Vec::new());

fn keep(info: &ProfilerInfo, function: FunctionId<'_>) {
    for code in info.native_code_versions(function, RawReJitId(0)).unwrap() {
        KEPT.lock().unwrap().push(code);
    }
}

fn main() {}
