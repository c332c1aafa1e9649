use clrprof::{ClassId, FunctionId, ProfilerInfo};

fn name_of(info: &ProfilerInfo, class: ClassId<'_>) {
    let _ = info.class_name(class);
}

fn use_function(info: &ProfilerInfo, f: FunctionId<'_>) {
    name_of(info, f);
}

fn main() {}
