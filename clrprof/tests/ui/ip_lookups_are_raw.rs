// An instruction pointer proves nothing about how long its code (and
// function) stay loaded: GetFunctionFromIP2/3 answer raw IDs, which Info
// methods do not take.
use clrprof::ProfilerInfo;

fn lookup(info: &ProfilerInfo, ip: usize) {
    let (f, _rejit) = info.function_from_ip3(ip).unwrap();
    let _ = info.dynamic_function_info(f);
    let (g, _rejit) = info.function_from_ip2(ip).unwrap();
    let _ = info.native_code_versions(g, _rejit);
}

fn main() {}
