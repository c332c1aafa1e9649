//! The `#[profiler]` attribute of clrprof.
