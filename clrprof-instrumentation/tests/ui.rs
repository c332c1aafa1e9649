//! Compile-fail tests of method wrapping's safe API: a wrapped body is
//! sealed and scoped to its method, a thrown class to its call.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
