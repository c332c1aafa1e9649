//! Fuzzes the IL method-body reader and writer: parsing never panics, a
//! parsed body always writes, and parse(write(parse(x))) == parse(x). The
//! verifier runs too (it must not panic either).
#![no_main]

use clrprof::il::{verify, CallSite, MethodBody};
use clrprof::MdToken;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(first) = MethodBody::parse(data) else {
        return;
    };
    let written = first.write().expect("a parsed body writes");
    let second = MethodBody::parse(&written.bytes).expect("a written body parses");
    assert_eq!(first, second);
    let every_call = |_t: MdToken| -> clrprof::Result<CallSite> {
        Ok(CallSite {
            params: 1,
            has_this: false,
            returns_value: true,
        })
    };
    let _ = verify(&written.bytes, true, &every_call);
});
