// An enumeration is a snapshot another thread may invalidate: its IDs are raw.
use clrprof::ProfilerInfo;

fn modules(info: &ProfilerInfo) {
    for module in info.enum_modules().unwrap() {
        let _ = info.module_info(module.unwrap());
    }
    let f = info.function_from_ip(0x1000).unwrap();
    let _ = info.function_info(f);
}

fn main() {}
