//! The children's ReJIT state kept per runtime in `shared`: which children
//! asked to re-JIT each method, and the IL bodies the multiplexer handed
//! out during `GetReJITParameters` fan-outs. The rules that record and
//! read them are the `rejit` module's.

use clrprof::sys::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which children asked to re-JIT each method (bit `k` for child `k`), and
/// the bodies handed out.
#[derive(Default)]
pub(crate) struct Requests {
    /// The bits of the children that asked, by `(module, method)`.
    pub(crate) by_method: Mutex<HashMap<(ModuleID, mdMethodDef), u64>>,
    /// Bodies given to children by `GetILFunctionBody` during fan-outs.
    pub(crate) bodies: HandedOut,
}

/// The IL bodies the multiplexer's `GetILFunctionBody` handed out during
/// `GetReJITParameters` fan-outs (the body an earlier child set), kept per
/// module until it unloads.
///
/// A child reads that answer under the runtime's own rule for
/// `GetILFunctionBody`: the memory lives as long as the module (clrprof
/// lends it with the module's lifetime), and the next child's
/// `SetILFunctionBody` or the end of the fan-out must not take it away.
/// So every body handed out is kept here until the module's
/// `ModuleUnloadFinished` has reached every child (a module the runtime
/// never reports unloading, or one unloading while no child monitors
/// module loads, keeps its bodies for the process's life — as the runtime
/// keeps every ReJIT version's IL on the module's loader heap until its
/// loader allocator dies: rejit.cpp, `ProfilerFunctionControl::SetILFunctionBody`).
#[derive(Default)]
pub(crate) struct HandedOut {
    by_module: Mutex<HashMap<ModuleID, Vec<Arc<[u8]>>>>,
}

impl HandedOut {
    /// Keeps `body` (handed out for a method of `module`) until the
    /// module unloads; its address, valid until then.
    pub(crate) fn keep(&self, module: ModuleID, body: &Arc<[u8]>) -> *const u8 {
        let mut all = self.by_module.lock().unwrap_or_else(|e| e.into_inner());
        let kept = all.entry(module).or_default();
        // A body read by several children is kept once.
        if !kept.last().is_some_and(|last| Arc::ptr_eq(last, body)) {
            kept.push(body.clone());
        }
        body.as_ptr()
    }

    /// `module` unloaded and every child heard of it: its bodies go.
    pub(crate) fn module_unloaded(&self, module: ModuleID) {
        let gone = self
            .by_module
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&module);
        drop(gone);
    }

    /// How many bodies of `module` are kept.
    #[cfg(test)]
    pub(crate) fn kept(&self, module: ModuleID) -> usize {
        self.by_module
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&module)
            .map_or(0, Vec::len)
    }
}
