//! The `clrprof` command line tool.
fn main() {}
