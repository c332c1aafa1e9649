//! The children's ELT registrations: the enter/leave/tailcall hooks and
//! the function-ID mapper each child gave its proxy
//! (`SetEnterLeaveFunctionHooks*`, `SetFunctionIDMapper*`), kept per child
//! in `shared`, and how the runtime's one set of hooks is served ([`Mode`]).
//! The rules that record and serve them are the `elt` module's.

use clrprof::sys::*;
use core::ffi::c_void;

/// A hook registration of a child.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Request {
    V1(usize, usize, usize),
    V2(usize, usize, usize),
    V3(usize, usize, usize),
    V3WithInfo(usize, usize, usize),
}

/// A child's function-ID mapper.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Mapper {
    #[default]
    None,
    V1(FunctionIDMapper),
    V2(FunctionIDMapper2, usize),
}

impl Mapper {
    /// The mapper of a `SetFunctionIDMapper` call.
    pub(crate) fn from_v1(f: Option<FunctionIDMapper>) -> Mapper {
        f.map_or(Mapper::None, Mapper::V1)
    }

    /// The mapper and client data of a `SetFunctionIDMapper2` call.
    pub(crate) fn from_v2(f: Option<FunctionIDMapper2>, data: *mut c_void) -> Mapper {
        f.map_or(Mapper::None, |f| Mapper::V2(f, data as usize))
    }

    /// The child's client ID for `function` and whether it wants it hooked
    /// (without a mapper: the `FunctionID` itself, hooked).
    ///
    /// # Safety
    /// Called from the runtime's mapper callback for `function`.
    pub(crate) unsafe fn map(self, function: FunctionID) -> (usize, bool) {
        let mut hook: BOOL = 1;
        let id = match self {
            Mapper::None => function,
            // SAFETY: [ffi-abi, mux-forward] the child's own mapper, called as the runtime calls it
            // (corprof.idl FunctionIDMapper), with a valid out pointer.
            Mapper::V1(f) => unsafe { f(function, &mut hook) },
            // SAFETY: [ffi-abi, mux-forward] as above, with the client data the child registered.
            Mapper::V2(f, data) => unsafe { f(function, data as *mut c_void, &mut hook) },
        };
        (id, hook != 0)
    }
}

/// The hooks one child registered.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hooks {
    pub legacy: Option<Request>,
    pub fast: [usize; 3],
    pub with_info: [usize; 3],
    pub mapper: Mapper,
}

impl Hooks {
    /// Whether the child registered any hooks.
    pub(crate) fn any(&self) -> bool {
        self.legacy.is_some() || self.fast != [0; 3] || self.with_info != [0; 3]
    }

    /// Whether the child registered v3 hooks (fast path or WithInfo).
    pub(crate) fn v3(&self) -> bool {
        self.fast != [0; 3] || self.with_info != [0; 3]
    }
}

/// How the runtime's hooks are served.
#[derive(Debug)]
pub(crate) enum Mode {
    /// No child hooks.
    None,
    /// Child `k`'s hooks and mapper are the runtime's.
    PassThrough(usize),
    /// The multiplexer's hooks fan out to the hooking children.
    FanOut,
}
