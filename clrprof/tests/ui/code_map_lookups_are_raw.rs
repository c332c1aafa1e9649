// A code map's answer names a function that was loaded when it was looked
// up, and says nothing of how long it stays loaded: it is raw, and Info
// methods do not take it (naming goes through an UnloadFence's resolve).
use clrprof::stackwalk::CodeMap;
use clrprof::ProfilerInfo;

fn name(info: &ProfilerInfo, map: &CodeMap, ip: usize) {
    let f = map.lookup(ip).unwrap();
    let _ = info.function_info(f);
}

fn main() {}
