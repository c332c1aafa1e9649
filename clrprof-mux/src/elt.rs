//! ELT hooks and function-ID mappers of several children.
//!
//! The runtime has one set of enter/leave/tailcall hooks and one
//! function-ID mapper per process. Children register theirs with their
//! proxy during `Initialize` (the runtime allows hooks only there); the
//! multiplexer decides at the end of its own `Initialize`:
//!
//! - **no child hooks**: nothing is registered;
//! - **one child hooks** (any kind: v1, v2, v3 fast path, v3 WithInfo):
//!   its hooks and mapper go to the runtime unchanged (*pass-through*),
//!   so the jitted code calls the child directly and the multiplexer adds
//!   nothing to a hooked call;
//! - **several children hook** (v3 hooks only): the multiplexer registers
//!   its own mapper and hooks (*fan-out*). Its mapper calls every hooking
//!   child's mapper for the function (a child without a mapper gets the
//!   `FunctionID`, as the runtime would give it), and the function is hooked
//!   if any child wants it; the client ID the runtime gets is a record of
//!   the children that want the function and each one's own client ID.
//!   Each hook calls, in configuration order, the same hook of every child
//!   in the record with that child's client ID: a fast-path hook with the
//!   JIT's register convention (the ID in `r14` for enter on x86-64 System
//!   V, in `x10` on AArch64, in the first argument register otherwise), a
//!   WithInfo hook with the runtime's `COR_PRF_ELT_INFO` handle, which the
//!   child passes back to `GetFunctionEnter3Info` through its proxy. When
//!   the union mask asks for arguments, return values or frame info, the
//!   runtime calls the WithInfo hooks: children that registered only
//!   fast-path hooks then get their fast-path hook called from the
//!   multiplexer's WithInfo hook. The caller's stack pointer, which the
//!   JIT also passes to a fast-path hook (`r15`/`x11`/`rdx`), is not passed on.
//!
//! Composing is impossible for the v1 and v2 hooks (`SetEnterLeaveFunctionHooks`,
//! `SetEnterLeaveFunctionHooks2`): a child that registers them while
//! another child has hooks, or registers v3 hooks while another child has
//! v1/v2 hooks, gets `E_NOTIMPL` from that call and keeps no hooks.
//! After `Initialize` every hook setter answers `CORPROF_E_CALL_ONLY_FROM_INIT`
//! (the runtime's rule), and under attach `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`.
//! A mapper set after `Initialize` reaches the runtime in pass-through mode;
//! in fan-out mode the mappers are fixed at the end of `Initialize`.
//!
//! The records of fan-out mode are never freed: one per hooked function,
//! valid as long as the function's code may run.

use crate::elt_hooks::{Hooks, Mapper, Mode, Request};
use crate::shared::{InfoProxy, Shared};
use clrprof::guard::guard;
use clrprof::sys::*;
use core::ffi::c_void;

/// Child `proxy.child` registers hooks.
pub(crate) fn set_hooks(proxy: &InfoProxy, request: Request) -> HRESULT {
    let shared = &proxy.shared;
    if shared.attached {
        return CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER;
    }
    if shared.running() {
        return CORPROF_E_CALL_ONLY_FROM_INIT;
    }
    let legacy = matches!(request, Request::V1(..) | Request::V2(..));
    let others = shared
        .active()
        .filter(|(k, _)| *k != proxy.child)
        .map(|(_, c)| *c.hooks.lock().unwrap_or_else(|e| e.into_inner()))
        .filter(Hooks::any)
        .collect::<Vec<_>>();
    if (legacy && !others.is_empty()) || (!legacy && others.iter().any(|h| h.legacy.is_some())) {
        return E_NOTIMPL;
    }
    let child = &shared.children[proxy.child];
    let mut hooks = child.hooks.lock().unwrap_or_else(|e| e.into_inner());
    match request {
        Request::V1(..) | Request::V2(..) => {
            if hooks.v3() && !others.is_empty() {
                return E_NOTIMPL;
            }
            hooks.legacy = Some(request);
        }
        Request::V3(e, l, t) => hooks.fast = [e, l, t],
        Request::V3WithInfo(e, l, t) => hooks.with_info = [e, l, t],
    }
    S_OK
}

/// Child `proxy.child` registers a mapper.
pub(crate) fn set_mapper(proxy: &InfoProxy, mapper: Mapper) -> HRESULT {
    let shared = &proxy.shared;
    let child = &shared.children[proxy.child];
    child.hooks.lock().unwrap_or_else(|e| e.into_inner()).mapper = mapper;
    match shared.elt.get() {
        Some(Mode::PassThrough(k)) if *k == proxy.child => apply_mapper(shared, mapper),
        _ => S_OK,
    }
}

fn apply_mapper(shared: &Shared, mapper: Mapper) -> HRESULT {
    // SAFETY: [interface-version, library-pinned, mux-forward] Info1 and Info3 vtable types for their versions; the mapper
    // is the child's (it stays loaded while the runtime may call it: the
    // multiplexer unloads a child only when the runtime is done with it).
    unsafe {
        match mapper {
            Mapper::None => S_OK,
            Mapper::V1(f) => match shared.runtime.vtbl::<ICorProfilerInfo_Vtbl>(1) {
                Some((this, v)) => (v.SetFunctionIDMapper)(this, Some(f)),
                None => E_NOTIMPL,
            },
            Mapper::V2(f, data) => match shared.runtime.vtbl::<ICorProfilerInfo3_Vtbl>(3) {
                Some((this, v)) => (v.SetFunctionIDMapper2)(this, Some(f), data as *mut c_void),
                None => E_NOTIMPL,
            },
        }
    }
}

fn opt<F>(address: usize) -> Option<F> {
    debug_assert_eq!(core::mem::size_of::<F>(), core::mem::size_of::<usize>());
    // SAFETY: [ffi-abi, mux-forward] `address` is zero or the address of a function of type `F`
    // (it was converted from an `Option<F>` by the proxy), and `Option<F>`
    // of a function pointer has the null niche.
    (address != 0).then(|| unsafe { core::mem::transmute_copy::<usize, F>(&address) })
}

/// Decides and registers the runtime's hooks (end of `Initialize`).
pub(crate) fn install(shared: &Shared) -> Mode {
    let hooking: Vec<(usize, Hooks)> = shared
        .active()
        .map(|(k, c)| (k, *c.hooks.lock().unwrap_or_else(|e| e.into_inner())))
        .filter(|(_, h)| h.any())
        .collect();
    match hooking.as_slice() {
        [] => Mode::None,
        [(k, h)] => {
            let hrs = pass_through(shared, h);
            record(shared, "pass-through", &[*k], &hrs);
            Mode::PassThrough(*k)
        }
        _ => {
            let children: Vec<usize> = hooking.iter().map(|(k, _)| *k).collect();
            let hrs = fan_out::install(shared, &hooking);
            record(shared, "fan-out", &children, &hrs);
            Mode::FanOut
        }
    }
}

fn record(shared: &Shared, mode: &str, children: &[usize], hrs: &[(&str, HRESULT)]) {
    let list: Vec<String> = children
        .iter()
        .map(|k| shared.children[*k].spec.index.to_string())
        .collect();
    let mut r = shared
        .out
        .record("elt")
        .str("mode", mode)
        .raw("children", &format!("[{}]", list.join(",")));
    for (what, hr) in hrs {
        r = r.str(what, &format!("{:#010x}", hr.0 as u32));
    }
    r.write();
}

/// Gives one child's hooks and mapper to the runtime unchanged.
fn pass_through(shared: &Shared, h: &Hooks) -> Vec<(&'static str, HRESULT)> {
    let mut hrs = Vec::new();
    // SAFETY: [interface-version, ffi-abi, mux-forward] Info1/2/3 vtable types for their versions; the hook
    // addresses are the child's functions of the matching types (recorded
    // from the typed arguments of its calls).
    unsafe {
        match h.legacy {
            Some(Request::V1(e, l, t)) => {
                if let Some((this, v)) = shared.runtime.vtbl::<ICorProfilerInfo_Vtbl>(1) {
                    hrs.push((
                        "SetEnterLeaveFunctionHooks",
                        (v.SetEnterLeaveFunctionHooks)(this, opt(e), opt(l), opt(t)),
                    ));
                }
            }
            Some(Request::V2(e, l, t)) => {
                if let Some((this, v)) = shared.runtime.vtbl::<ICorProfilerInfo2_Vtbl>(2) {
                    hrs.push((
                        "SetEnterLeaveFunctionHooks2",
                        (v.SetEnterLeaveFunctionHooks2)(this, opt(e), opt(l), opt(t)),
                    ));
                }
            }
            _ => {}
        }
        if let Some((this, v)) = shared.runtime.vtbl::<ICorProfilerInfo3_Vtbl>(3) {
            if h.fast != [0; 3] {
                let [e, l, t] = h.fast;
                hrs.push((
                    "SetEnterLeaveFunctionHooks3",
                    (v.SetEnterLeaveFunctionHooks3)(this, opt(e), opt(l), opt(t)),
                ));
            }
            if h.with_info != [0; 3] {
                let [e, l, t] = h.with_info;
                hrs.push((
                    "SetEnterLeaveFunctionHooks3WithInfo",
                    (v.SetEnterLeaveFunctionHooks3WithInfo)(this, opt(e), opt(l), opt(t)),
                ));
            }
        }
    }
    if !matches!(h.mapper, Mapper::None) {
        hrs.push(("SetFunctionIDMapper", apply_mapper(shared, h.mapper)));
    }
    hrs
}

/// Fan-out mode: the multiplexer's hooks and mapper.
mod fan_out {
    use super::*;

    /// One child's hooks, as the fan-out calls them.
    #[derive(Clone, Copy)]
    pub(super) struct ChildHooks {
        mapper: Mapper,
        fast: [usize; 3],
        with_info: [usize; 3],
    }

    /// The children that hook, in configuration order (the mapper's client data).
    struct Table {
        children: Box<[ChildHooks]>,
    }

    /// A hooked function's client ID: each wanting child's hooks and own client ID.
    struct Function {
        entries: Box<[(ChildHooks, usize)]>,
    }

    pub(super) fn install(
        shared: &Shared,
        hooking: &[(usize, Hooks)],
    ) -> Vec<(&'static str, HRESULT)> {
        let table: &'static Table = Box::leak(Box::new(Table {
            children: hooking
                .iter()
                .map(|(_, h)| ChildHooks {
                    mapper: h.mapper,
                    fast: h.fast,
                    with_info: h.with_info,
                })
                .collect(),
        }));
        // With arguments, return values or frame info asked for, the runtime
        // calls only WithInfo hooks (it refuses fast-path ones with
        // CORPROF_E_INCONSISTENT_WITH_FLAGS): fast-path children are then
        // called from the multiplexer's WithInfo hooks.
        let slow_path = shared.active().any(|(_, c)| {
            c.masks().0
                & (COR_PRF_ENABLE_FUNCTION_ARGS
                    | COR_PRF_ENABLE_FUNCTION_RETVAL
                    | COR_PRF_ENABLE_FRAME_INFO)
                != 0
        });
        let any_fast = |i: usize| !slow_path && table.children.iter().any(|c| c.fast[i] != 0);
        let any_wi = |i: usize| {
            table
                .children
                .iter()
                .any(|c| c.with_info[i] != 0 || c.fast[i] != 0)
        };
        let any_with_info = slow_path || table.children.iter().any(|c| c.with_info != [0; 3]);
        let mut hrs = Vec::new();
        // SAFETY: [interface-version, library-pinned] Info3 vtable type for version 3. The multiplexer's hooks
        // and mapper are functions of this library, which stays loaded
        // while the runtime may call them (it unloads a profiler only after
        // detach, and ELT hooks rule detach out).
        unsafe {
            let Some((this, v)) = shared.runtime.vtbl::<ICorProfilerInfo3_Vtbl>(3) else {
                return vec![("SetEnterLeaveFunctionHooks3", E_NOTIMPL)];
            };
            hrs.push((
                "SetFunctionIDMapper2",
                (v.SetFunctionIDMapper2)(this, Some(mapper), table as *const Table as *mut c_void),
            ));
            #[cfg(any(
                all(
                    target_arch = "x86_64",
                    any(
                        target_os = "linux",
                        target_os = "android",
                        target_os = "macos",
                        windows
                    )
                ),
                all(
                    target_arch = "aarch64",
                    any(target_os = "linux", target_os = "android", target_os = "macos")
                )
            ))]
            {
                use clrprof::sys::elt;
                if any_fast(0) || any_fast(1) || any_fast(2) {
                    elt::set_enter3_handler(any_fast(0).then_some(enter as elt::EltHandler));
                    elt::set_leave3_handler(any_fast(1).then_some(leave as elt::EltHandler));
                    elt::set_tailcall3_handler(any_fast(2).then_some(tailcall as elt::EltHandler));
                    hrs.push((
                        "SetEnterLeaveFunctionHooks3",
                        (v.SetEnterLeaveFunctionHooks3)(
                            this,
                            any_fast(0).then(elt::enter3_trampoline),
                            any_fast(1).then(elt::leave3_trampoline),
                            any_fast(2).then(elt::tailcall3_trampoline),
                        ),
                    ));
                }
            }
            if any_with_info {
                use clrprof::sys::elt;
                elt::set_enter3_with_info_handler(
                    any_wi(0).then_some(enter_with_info as elt::EltWithInfoHandler),
                );
                elt::set_leave3_with_info_handler(
                    any_wi(1).then_some(leave_with_info as elt::EltWithInfoHandler),
                );
                elt::set_tailcall3_with_info_handler(
                    any_wi(2).then_some(tailcall_with_info as elt::EltWithInfoHandler),
                );
                hrs.push((
                    "SetEnterLeaveFunctionHooks3WithInfo",
                    (v.SetEnterLeaveFunctionHooks3WithInfo)(
                        this,
                        any_wi(0).then(elt::enter3_with_info_hook),
                        any_wi(1).then(elt::leave3_with_info_hook),
                        any_wi(2).then(elt::tailcall3_with_info_hook),
                    ),
                ));
            }
        }
        hrs
    }

    /// The runtime's `FunctionIDMapper2`: asks every hooking child.
    unsafe extern "system" fn mapper(
        function: FunctionID,
        client_data: *mut c_void,
        hook: *mut BOOL,
    ) -> UINT_PTR {
        let (id, wanted) = guard("clrprof-mux FunctionIDMapper2", (function, false), || {
            // SAFETY: [callback-args, local-memory] the client data registered with this mapper is a leaked `Table`.
            let table = unsafe { &*(client_data as *const Table) };
            let entries: Vec<(ChildHooks, usize)> = table
                .children
                .iter()
                .filter_map(|c| {
                    // SAFETY: [callback-args, mux-forward] called from the runtime's mapper callback for `function`.
                    let (id, wants) = unsafe { c.mapper.map(function) };
                    wants.then_some((*c, id))
                })
                .collect();
            if entries.is_empty() {
                return (function, false);
            }
            let record = Box::leak(Box::new(Function {
                entries: entries.into_boxed_slice(),
            }));
            (record as *const Function as usize, true)
        });
        if !hook.is_null() {
            // SAFETY: [callback-args] the runtime's out pointer (corprof.idl FunctionIDMapper2).
            unsafe { *hook = wanted as BOOL };
        }
        id
    }

    /// The record behind a client ID the mapper returned.
    ///
    /// # Safety
    /// `client` is a client ID this module's mapper returned with "hook".
    #[inline]
    unsafe fn function<'a>(client: usize) -> &'a Function {
        // SAFETY: [caller-contract] guaranteed by the caller; records are never freed.
        unsafe { &*(client as *const Function) }
    }

    type WithInfoHook = unsafe extern "C" fn(usize, usize);

    #[inline]
    unsafe fn with_info_hook(address: usize) -> WithInfoHook {
        // SAFETY: [ffi-abi, mux-forward] the address of a child's FunctionEnter3WithInfo-shaped
        // hook, whose `FunctionIDOrClientID` argument is a one-word union
        // passed like a `usize` in every ABI the runtime supports.
        unsafe { core::mem::transmute::<usize, WithInfoHook>(address) }
    }

    macro_rules! fast_handler {
        ($name:ident, $slot:literal, $call:ident) => {
            /// Fast-path hook of the multiplexer (through clrprof-sys's trampoline).
            #[cfg(any(
                all(
                    target_arch = "x86_64",
                    any(
                        target_os = "linux",
                        target_os = "android",
                        target_os = "macos",
                        windows
                    )
                ),
                all(
                    target_arch = "aarch64",
                    any(target_os = "linux", target_os = "android", target_os = "macos")
                )
            ))]
            unsafe extern "C" fn $name(client: usize) {
                // SAFETY: [callback-args] the runtime passes the client ID our mapper returned.
                for (c, id) in unsafe { function(client) }.entries.iter() {
                    if c.fast[$slot] != 0 {
                        // SAFETY: [ffi-abi, mux-forward] the child's fast-path hook of this kind,
                        // called with the JIT's convention for it.
                        unsafe { call::$call(c.fast[$slot], *id) };
                    }
                }
            }
        };
    }
    fast_handler!(enter, 0, enter3);
    fast_handler!(leave, 1, leave3);
    fast_handler!(tailcall, 2, tailcall3);

    macro_rules! with_info_handler {
        ($name:ident, $slot:literal, $call:ident) => {
            /// WithInfo hook of the multiplexer: WithInfo children get the
            /// runtime's ELT handle, fast-path children their fast hook.
            unsafe extern "C" fn $name(client: usize, elt_info: usize) {
                // SAFETY: [callback-args] the runtime passes the client ID our mapper returned.
                for (c, id) in unsafe { function(client) }.entries.iter() {
                    if c.with_info[$slot] != 0 {
                        // SAFETY: [ffi-abi, elt-frame, mux-forward] the child's WithInfo hook of this kind, with
                        // the runtime's handle, valid during this call.
                        unsafe { with_info_hook(c.with_info[$slot])(*id, elt_info) };
                    } else if c.fast[$slot] != 0 {
                        // SAFETY: [ffi-abi, mux-forward] the child's fast-path hook of this kind,
                        // called with the JIT's convention for it.
                        unsafe { call::$call(c.fast[$slot], *id) };
                    }
                }
            }
        };
    }
    with_info_handler!(enter_with_info, 0, enter3);
    with_info_handler!(leave_with_info, 1, leave3);
    with_info_handler!(tailcall_with_info, 2, tailcall3);

    /// Calling a child's fast-path hook with the JIT's register convention
    /// (clrprof-sys `elt` module docs: where each target's JIT puts the ID).
    /// The child's hook keeps what the JIT keeps live across the call, a
    /// superset of the C ABI's callee-saved registers, so it is called as
    /// a function that clobbers the C ABI's caller-saved ones.
    mod call {
        /// x86-64 System V: enter takes the ID in `r14`.
        #[cfg(all(target_arch = "x86_64", not(windows)))]
        #[inline(always)]
        pub(super) unsafe fn enter3(hook: usize, id: usize) {
            // SAFETY: [ffi-abi, elt-frame] `hook` is a FunctionEnter3 hook, called as the JIT
            // calls it (ID in r14, 16-byte aligned stack at the call, which
            // an asm block without `nostack` is given); it returns with every
            // callee-saved register intact, and may clobber the rest.
            unsafe {
                core::arch::asm!(
                    "call {hook}",
                    hook = in(reg) hook,
                    in("r14") id,
                    clobber_abi("C"),
                );
            }
        }

        /// x86-64 System V leave and tailcall, and every x86-64 Windows
        /// hook: the ID in the first argument register, as a C call passes it.
        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        unsafe fn first_argument(hook: usize, id: usize) {
            // SAFETY: [ffi-abi, elt-frame] a fast-path hook takes its one argument where the C
            // ABI's first argument goes on these conventions, and keeps more
            // registers than a C function must.
            let f = unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(usize)>(hook) };
            // SAFETY: [ffi-abi, elt-frame] see above.
            unsafe { f(id) }
        }

        #[cfg(all(target_arch = "x86_64", windows))]
        #[inline(always)]
        pub(super) unsafe fn enter3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract (Win64: the ID in rcx).
            unsafe { first_argument(hook, id) }
        }

        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        pub(super) unsafe fn leave3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract (the ID in rdi / rcx).
            unsafe { first_argument(hook, id) }
        }

        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        pub(super) unsafe fn tailcall3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract (the ID in rdi / rcx).
            unsafe { first_argument(hook, id) }
        }

        /// AArch64: every hook takes the ID in `x10`.
        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        unsafe fn x10(hook: usize, id: usize) {
            // SAFETY: [ffi-abi, elt-frame] a fast-path hook called as the JIT calls it (ID in x10,
            // the link register set by `blr`), returning with every
            // callee-saved register intact.
            unsafe {
                core::arch::asm!(
                    "blr {hook}",
                    hook = in(reg) hook,
                    inout("x10") id => _,
                    clobber_abi("C"),
                );
            }
        }

        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        pub(super) unsafe fn enter3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract.
            unsafe { x10(hook, id) }
        }

        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        pub(super) unsafe fn leave3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract.
            unsafe { x10(hook, id) }
        }

        #[cfg(target_arch = "aarch64")]
        #[inline(always)]
        pub(super) unsafe fn tailcall3(hook: usize, id: usize) {
            // SAFETY: [caller-contract] forwarded contract.
            unsafe { x10(hook, id) }
        }

        /// Elsewhere no fast-path hooks exist (clrprof-sys has no trampolines).
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        pub(super) unsafe fn enter3(_hook: usize, _id: usize) {}
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        pub(super) unsafe fn leave3(_hook: usize, _id: usize) {}
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        pub(super) unsafe fn tailcall3(_hook: usize, _id: usize) {}
    }
}
