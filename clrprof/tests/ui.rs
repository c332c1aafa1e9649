//! Compile-fail tests: the macro's error messages and the type rules of the
//! safe API (IDs cannot be mixed or escape their callback; attach masks have
//! no ENTERLEAVE; profilers must be Send + Sync).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
