use clrprof::{AttachEventMask, AttachEventMasks};

fn main() {
    let _: AttachEventMasks = (AttachEventMask::MONITOR_JIT_COMPILATION | AttachEventMask::MONITOR_ENTERLEAVE).into();
}
