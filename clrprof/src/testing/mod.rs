//! Test support: a fake runtime to exercise [`ProfilerInfo`](crate::ProfilerInfo)
//! without a CLR.
//!
//! Built for the crate's own tests and, with the `fake-runtime` cargo
//! feature, for profiler authors' unit tests. Real-runtime behaviour is
//! tested separately (the `tests/` package runs profilers inside CoreCLR).

pub mod fake;
