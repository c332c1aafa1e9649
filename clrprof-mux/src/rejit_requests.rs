//! The children's ReJIT requests: which children asked to re-JIT each
//! method, kept per runtime in `shared`. The rules that record and read
//! them are the `rejit` module's.

use clrprof::sys::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// Which children asked to re-JIT each method (bit `k` for child `k`).
#[derive(Default)]
pub(crate) struct Requests {
    /// The bits of the children that asked, by `(module, method)`.
    pub(crate) by_method: Mutex<HashMap<(ModuleID, mdMethodDef), u64>>,
}
