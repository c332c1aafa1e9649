//! The shape of a wrapped body, built from the original with no runtime at
//! hand (so every case is unit-tested against bodies written here).
//!
//! ```text
//!         <args>    stloc P                  // a localloc'd table of argument addresses, or null
//!         ldc.i8 handler; conv.i; ldloc P; ldc.i8 enter; conv.i; calli int64(native int, native int)
//!         stloc S                            // the entry handler's state
//! TRY:    <original code, each `ret` now: [stloc R]; leave END>
//! CATCH:  stloc X                            // catch object; X is a `pinned object` local
//!         ldc.i8 handler; conv.i; ldloc S; null; ldloc X; conv.u; ldind.i
//!         ldc.i8 exit; conv.i; calli void(native int, int64, native int, native int)
//!         ldnull; stloc X; rethrow
//! END:    ldc.i8 handler; conv.i; ldloc S; ldloca R|null; conv.u; null
//!         ldc.i8 exit; conv.i; calli void(native int, int64, native int, native int)
//!         [ldloc R]; ret
//! ```
//!
//! A normal return leaves the `try` and calls the exit handler from the
//! epilogue, outside every exception region, with R holding the value
//! (which the handler may replace before `ret` returns it) and a null
//! exception class; an exception is caught, its class read and handed to the
//! exit handler, and rethrown unchanged. The class is read in managed code,
//! before the unmanaged call: the exception is stored in a `pinned` local
//! (so `conv.u` of it is its address for as long as the local holds it, as
//! C# `fixed` does) and `ldind.i` reads the method-table pointer at its
//! start, which for a class that is not an array is its `TypeHandle`, the
//! profiling API's `ClassID` (what `GetClassFromObject` returns). Reading it
//! there, in cooperative mode, matters: a blocking GC marks objects by
//! setting a bit of that very pointer while threads in preemptive mode (as
//! during the unmanaged call) still run; managed code never sees it set.
//! Both unmanaged calls of a normal call sit outside exception regions, where
//! the JIT inlines the transition to native code (in a handler it calls a
//! stub instead). The original clauses stay as they were, nested inside the
//! new one (a `ret` never sits inside a protected region, ECMA-335 III.3.56,
//! so every return leaves from the top level of the new `try`).
//!
//! An instance constructor of a reference type is wrapped after its call to
//! the base (or chained `this(...)`) constructor: what comes before (field
//! initializers, the call) runs outside the wrapper, and the prologue and
//! the `try` start after it ([`Split`]).

use clrprof::error::{Error, Result};
use clrprof::ids::{MdSignature, MdToken};
use clrprof::il::{ClauseKind, ExceptionClause, HeaderFormat, Label, MethodBody, OpCode, Operand};

/// What [`build`] needs besides the original body.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The wrapper's address (a `Registered` that lives as long as the
    /// process), passed to both probes.
    pub handler: usize,
    /// Address of the entry probe.
    pub enter: usize,
    /// Address of the exit probe.
    pub exit: usize,
    /// `calli` signature of the entry probe: unmanaged `int64(native int, native int)`.
    pub enter_sig: MdSignature,
    /// `calli` signature of the exit probe: unmanaged `void(native int, int64, native int, native int)`.
    pub exit_sig: MdSignature,
    /// TypeSpec of `object`, the catch clause's type.
    pub object: clrprof::ids::MdTypeSpec,
    /// The new local signature: the original locals, then S, P, X (`pinned
    /// object`) and (for a method returning a value) R.
    pub local_sig: MdSignature,
    /// How many locals the original has (index of S).
    pub first_local: u16,
    /// Whether the method returns a value.
    pub returns: bool,
    /// Number of arguments, `this` included, whose addresses go to the entry
    /// probe; `None` passes null (the handler does not read arguments).
    pub arguments: Option<u16>,
    /// Where the wrapper starts (after a constructor's base call).
    pub split: Split,
    /// Whether the catch handler reads the exception's class: only when
    /// every object it can catch is an `Exception` (the module's assembly
    /// has `RuntimeCompatibility(WrapNonExceptionThrows = true)`), since the
    /// method table of an array is not its `ClassID` on every runtime.
    /// Otherwise it passes 1: an exception of unknown class.
    pub read_class: bool,
}

/// Where the wrapper's prologue and `try` start in the original code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// At the first instruction: the whole body is wrapped.
    Whole,
    /// After the instruction at this index: an instance constructor's call
    /// to its base (or chained) constructor, found by [`base_call`].
    After(usize),
}

/// Finds, in an instance constructor of a reference type, the call to the
/// base (or chained `this(...)`) constructor: a `call` whose target
/// `is_own_ctor` (a `.ctor` of the base type or of the type itself), whose
/// receiver is argument 0 (the last instruction before it that starts at an
/// empty stack is `ldarg.0`, every instruction from there to the call starts
/// with that value on the stack, and the branches among them, as a
/// conditional argument makes, stay among them) and after which the stack
/// is empty (`depths` from `il::analyze`). Everything before it must be straight code of its own:
/// no `ret`, no exception region, and no branch across the call in either
/// direction. `Err` says why there is no such place.
pub(crate) fn base_call(
    body: &MethodBody,
    depths: &[Option<u32>],
    is_own_ctor: &dyn Fn(MdToken) -> bool,
) -> core::result::Result<usize, &'static str> {
    let code = body.instructions();
    let depth = |k: usize| depths.get(k).copied().flatten();
    let targets: std::collections::HashMap<Label, Vec<usize>> = {
        let mut t: std::collections::HashMap<Label, Vec<usize>> = Default::default();
        for (k, i) in code.iter().enumerate() {
            match &i.operand {
                Operand::Target(l) => t.entry(*l).or_default().push(k),
                Operand::Switch(ls) => {
                    for l in ls {
                        t.entry(*l).or_default().push(k);
                    }
                }
                _ => {}
            }
        }
        t
    };
    let call = code
        .iter()
        .enumerate()
        .position(|(k, i)| {
            i.opcode == OpCode::CALL
                && matches!(i.operand, Operand::Token(t) if is_own_ctor(t))
                && depth(k + 1) == Some(0)
        })
        .ok_or("found no call to the base or chained constructor on `this` after which the stack is empty")?;
    // The instruction that pushed the receiver: the last one before the
    // call that starts at an empty stack.
    let receiver = (0..call)
        .rev()
        .find(|k| depth(*k) == Some(0))
        .ok_or("the base constructor call's receiver is not found")?;
    let inside = |k: usize| k > receiver && k <= call;
    let argument_flow_stays_inside = targets.iter().all(|(l, from)| {
        let to = body.index_of(*l);
        from.iter().all(|f| {
            let (f_in, t_in) = (inside(*f), to.is_some_and(inside));
            (!f_in && !t_in) || (f_in && t_in && *f < call)
        })
    });
    if !matches!(
        (code[receiver].opcode, &code[receiver].operand),
        (OpCode::LDARG_0, _) | (OpCode::LDARG | OpCode::LDARG_S, Operand::Var(0))
    ) || (receiver + 1..=call).any(|k| depth(k).is_some_and(|d| d == 0))
        || !argument_flow_stays_inside
    {
        return Err("the constructor call after which the stack is empty is not made on `this`");
    }
    if code[..=call].iter().any(|i| i.opcode == OpCode::RET) {
        return Err("it returns before its base constructor call");
    }
    let index = |l: &Label| body.index_of(*l);
    let before = |l: &Label| index(l).is_some_and(|k| k <= call);
    for c in &body.clauses {
        if before(&c.try_start) || before(&c.handler_start) {
            return Err("an exception region starts before its base constructor call");
        }
    }
    for (l, from) in &targets {
        let to_before = before(l);
        if from.iter().any(|f| (*f <= call) != to_before) {
            return Err("a branch crosses its base constructor call");
        }
    }
    Ok(call)
}

/// The `calli` signatures of the entry probe (unmanaged `int64(native int,
/// native int)`) and of the exit probe (unmanaged `void(native int, int64,
/// native int, native int)`), matching their Rust declarations.
pub(crate) fn probe_sigs() -> Result<(Vec<u8>, Vec<u8>)> {
    use clrprof::metadata_emit::{PrimitiveType as P, SigBuilder, UnmanagedCallConv};
    let p = SigBuilder::primitive;
    let enter =
        SigBuilder::unmanaged_calli(UnmanagedCallConv::StdCall, &p(P::I8), &[&p(P::I), &p(P::I)])?;
    let exit = SigBuilder::unmanaged_calli(
        UnmanagedCallConv::StdCall,
        &p(P::Void),
        &[&p(P::I), &p(P::I8), &p(P::I), &p(P::I)],
    )?;
    Ok((enter, exit))
}

/// Why a body cannot be wrapped, or `None`.
pub(crate) fn refusal(body: &MethodBody) -> Option<&'static str> {
    for i in body.instructions() {
        match i.opcode {
            OpCode::TAILCALL => {
                return Some(
                    "it makes a `tail.` call, which must be followed by its `ret` and cannot sit \
                     inside the `try` that wraps the body",
                )
            }
            OpCode::JMP => {
                return Some("it ends in `jmp`, which leaves with the caller's arguments and may not leave a `try`")
            }
            OpCode::ARGLIST => return Some("it reads `arglist` (a vararg method)"),
            _ => {}
        }
    }
    None
}

/// What both shapes start from: the original body with a fat header, zeroed
/// locals and the new local signature, every `ret` turned into a store of
/// the value (when there is one) and a leave to the epilogue.
struct Start {
    body: MethodBody,
    /// The first original instruction inside the wrapper: where the new
    /// `try` starts, and before which the prologue goes.
    first: Label,
    /// The added locals: the shape's own (`added` of them), then R.
    locals: Vec<Operand>,
    /// The epilogue's label.
    end: Label,
    /// How many `ret`s the original has.
    returns: usize,
}

fn start(
    original: &MethodBody,
    local_sig: MdSignature,
    (first_local, added): (u16, u16),
    returns_value: bool,
    split: Split,
) -> Result<Start> {
    if let Some(why) = refusal(original) {
        return Err(Error::Usage(why.into()));
    }
    let at = match split {
        Split::Whole => 0,
        Split::After(call) => call + 1,
    };
    let first = original
        .instructions()
        .get(at)
        .map(|i| i.label)
        .ok_or_else(|| Error::Malformed("IL method body: no code to wrap".into()))?;
    let locals = (0..=added)
        .map(|k| {
            first_local
                .checked_add(k)
                .map(Operand::Var)
                .ok_or(Error::InvalidArgument(
                    "too many locals to add the wrapper's",
                ))
        })
        .collect::<Result<Vec<_>>>()?;
    let ret = locals[usize::from(added)].clone();

    let mut body = original.clone();
    body.format = HeaderFormat::Fat;
    body.init_locals = true;
    body.local_var_sig = local_sig;

    // The `ret`'s label stays on the first instruction, so branches to it
    // still arrive.
    let end = body.new_label();
    let mut returns = 0usize;
    let mut index = 0;
    while index < body.instructions().len() {
        if body.instructions()[index].opcode != OpCode::RET {
            index += 1;
            continue;
        }
        returns += 1;
        if returns_value {
            body.replace(index, OpCode::STLOC, ret.clone())?;
            body.insert(index + 1, &[(OpCode::LEAVE, Operand::Target(end))])?;
            index += 2;
        } else {
            body.replace(index, OpCode::LEAVE, Operand::Target(end))?;
            index += 1;
        }
    }
    Ok(Start {
        body,
        first,
        locals,
        end,
        returns,
    })
}

/// Inserts the prologue before `first` (keeping `first`'s label on the
/// original instruction, so branches to it stay inside the new `try`) and
/// returns the prologue's first label.
fn insert_prologue(
    body: &mut MethodBody,
    first: Label,
    prologue: &[(OpCode, Operand)],
) -> Result<Label> {
    let at = body.index_of(first).ok_or(Error::InvalidArgument(
        "the wrapper's start is no instruction",
    ))?;
    let labels = body.insert(at, prologue)?;
    labels
        .first()
        .copied()
        .ok_or(Error::InvalidArgument("an empty prologue"))
}

/// Builds the wrapped body (see the module docs). The caller recomputes max
/// stack and verifies the result.
pub(crate) fn build(original: &MethodBody, plan: &Plan) -> Result<MethodBody> {
    let Start {
        mut body,
        first,
        locals,
        end,
        returns,
    } = start(
        original,
        plan.local_sig,
        (plan.first_local, 3),
        plan.returns,
        plan.split,
    )?;
    let [state, args, exception, ret]: [Operand; 4] = locals
        .try_into()
        .map_err(|_| Error::InvalidArgument("the wrapper's locals"))?;
    let s = plan.first_local;
    let handler = (OpCode::LDC_I8, Operand::Long(plan.handler as u64 as i64));

    // The prologue, before the first original instruction (which stays the
    // target of branches to the method's start, inside the new `try`).
    let mut prologue = Vec::new();
    match plan.arguments {
        Some(n) if n > 0 => {
            prologue.push((OpCode::LDC_I4, Operand::Int(i32::from(n) * 8)));
            prologue.push((OpCode::CONV_U, Operand::None));
            prologue.push((OpCode::LOCALLOC, Operand::None));
            prologue.push((OpCode::STLOC, args.clone()));
            for i in 0..n {
                prologue.extend([
                    (OpCode::LDLOC, args.clone()),
                    (OpCode::LDC_I4, Operand::Int(i32::from(i) * 8)),
                    (OpCode::ADD, Operand::None),
                    (OpCode::LDARGA, Operand::Var(i)),
                    (OpCode::CONV_U, Operand::None),
                    (OpCode::STIND_I, Operand::None),
                ]);
            }
        }
        _ => {
            prologue.push((OpCode::LDC_I4_0, Operand::None));
            prologue.push((OpCode::CONV_U, Operand::None));
            prologue.push((OpCode::STLOC, args.clone()));
        }
    }
    prologue.extend([
        handler.clone(),
        (OpCode::CONV_I, Operand::None),
        (OpCode::LDLOC, args),
        (OpCode::LDC_I8, Operand::Long(plan.enter as u64 as i64)),
        (OpCode::CONV_I, Operand::None),
        (OpCode::CALLI, Operand::Token(MdToken(plan.enter_sig.0))),
        (OpCode::STLOC, state.clone()),
    ]);
    let prologue_start = insert_prologue(&mut body, first, &prologue)?;

    // The exit call: `value` pushes the return value's address (or null),
    // `class` the exception's class (or null).
    let exit_call =
        |body: &mut MethodBody, value: Option<&Operand>, class: &[(OpCode, Operand)]| {
            let first = body.push(handler.0, handler.1.clone());
            body.push(OpCode::CONV_I, Operand::None);
            body.push(OpCode::LDLOC, state.clone());
            match value {
                Some(r) => body.push(OpCode::LDLOCA, r.clone()),
                None => body.push(OpCode::LDC_I4_0, Operand::None),
            };
            body.push(OpCode::CONV_U, Operand::None);
            for (op, operand) in class {
                body.push(*op, operand.clone());
            }
            body.push(OpCode::LDC_I8, Operand::Long(plan.exit as u64 as i64));
            body.push(OpCode::CONV_I, Operand::None);
            body.push(OpCode::CALLI, Operand::Token(MdToken(plan.exit_sig.0)));
            first
        };
    let no_class = [
        (OpCode::LDC_I4_0, Operand::None),
        (OpCode::CONV_U, Operand::None),
    ];

    // The catch handler: the method is leaving by an exception, which is
    // pinned in X while its class is read, then released and rethrown.
    let catch = body.push(OpCode::STLOC, exception.clone());
    let class = if plan.read_class {
        [
            (OpCode::LDLOC, exception.clone()),
            (OpCode::CONV_U, Operand::None),
            (OpCode::LDIND_I, Operand::None),
        ]
    } else {
        [
            (OpCode::LDC_I4_1, Operand::None),
            (OpCode::CONV_U, Operand::None),
            (OpCode::NOP, Operand::None),
        ]
    };
    exit_call(&mut body, None, &class);
    body.push(OpCode::LDNULL, Operand::None);
    body.push(OpCode::STLOC, exception);
    body.push(OpCode::RETHROW, Operand::None);

    // The epilogue: a normal return.
    let handler_end = if returns > 0 {
        let value = plan.returns.then_some(&ret);
        let first = exit_call(&mut body, value, &no_class);
        // The epilogue is where every `leave` goes.
        relabel(&mut body, first, end)?;
        if plan.returns {
            body.push(OpCode::LDLOC, ret.clone());
        }
        body.push(OpCode::RET, Operand::None);
        end
    } else {
        // The method never returns (it ends in `throw`): no epilogue.
        Label::END
    };
    use super::typecheck::{Env, Ty};
    let mut env = Env::default();
    env.locals.insert(s, Ty::I8);
    env.locals.insert(s + 1, Ty::N);
    env.locals.insert(s + 2, Ty::Pinned);
    env.calls.insert(
        MdToken(plan.enter_sig.0),
        (vec![Ty::N, Ty::N], Some(Ty::I8)),
    );
    env.calls.insert(
        MdToken(plan.exit_sig.0),
        (vec![Ty::N, Ty::I8, Ty::N, Ty::N], None),
    );
    close(
        body,
        ClauseKind::Catch(MdToken(plan.object.0)),
        (prologue_start, first, catch, handler_end),
        &[Ty::O],
        (end, returns),
        &env,
    )
}

/// Ends both shapes: the outermost clause of `kind` (the new `try` from the
/// first original instruction after the prologue to the handler, the
/// handler up to `handler_end`; ECMA-335 II.19 wants inner clauses first, so
/// it goes last), then the type check of everything added: the prologue
/// (from `prologue`), the handler (entered with `handler_stack`) and, for a
/// method that returns, the epilogue at `end`.
fn close(
    mut body: MethodBody,
    kind: ClauseKind,
    (prologue, first, handler, handler_end): (Label, Label, Label, Label),
    handler_stack: &[super::typecheck::Ty],
    (end, returns): (Label, usize),
    env: &super::typecheck::Env,
) -> Result<MethodBody> {
    use super::typecheck::check;
    body.clauses.push(ExceptionClause {
        kind,
        try_start: first,
        try_end: handler,
        handler_start: handler,
        handler_end,
    });
    check(&body, prologue, Some(first), &[], env)?;
    check(&body, handler, None, handler_stack, env)?;
    if returns > 0 {
        check(&body, end, None, &[], env)?;
    }
    Ok(body)
}

/// Gives the instruction labelled `from` the label `to` (made earlier with
/// `new_label` for forward branches).
fn relabel(body: &mut MethodBody, from: Label, to: Label) -> Result<()> {
    let i = body
        .index_of(from)
        .ok_or(Error::InvalidArgument("relabel: no such instruction"))?;
    body.instructions_mut()[i].label = to;
    Ok(())
}

/// The new local signature: `LOCAL_SIG`, the count plus the added ones,
/// the original types, then the shape's locals (`int64` S, `native int` P
/// and `pinned object` X for Rust handlers, `object` S and `object` X for
/// C# handlers; encoded types) and, for a method returning a value, the
/// return type R.
pub(crate) fn local_sig(
    original_count: u32,
    original_types: &[u8],
    added: &[&[u8]],
    return_type: Option<&[u8]>,
) -> Result<Vec<u8>> {
    use clrprof::metadata_emit::SigBuilder;
    let n = u32::try_from(added.len())
        .unwrap_or(u32::MAX)
        .saturating_add(u32::from(return_type.is_some()));
    let count = original_count
        .checked_add(n)
        .filter(|c| *c <= u32::from(u16::MAX))
        .ok_or(Error::InvalidArgument(
            "too many locals to add the wrapper's",
        ))?;
    let mut b = SigBuilder::new();
    b.raw(&[clrprof_sys::IMAGE_CEE_CS_CALLCONV_LOCAL_SIG as u8]);
    b.compressed(count)?;
    b.raw(original_types);
    for t in added {
        b.raw(t);
    }
    if let Some(r) = return_type {
        b.raw(r);
    }
    Ok(b.finish())
}

/// What [`build_managed`] needs besides the original body.
#[derive(Clone, Debug)]
pub(crate) struct ManagedPlan {
    /// The method's name, a user string of its module.
    pub name: clrprof::ids::MdString,
    /// MemberRef of `object OnEntry(string, object[])`.
    pub on_entry: clrprof::ids::MdMemberRef,
    /// MemberRef of `object OnExit(string, object, object, object)`.
    pub on_exit: clrprof::ids::MdMemberRef,
    /// TypeSpec of `object` (for `newarr` and the catch clause).
    pub object: clrprof::ids::MdTypeSpec,
    /// Per declared parameter: the TypeSpec to box it with, or `None` to
    /// pass null (`ref`, pointer and `TypedReference` parameters).
    pub params: Vec<Option<clrprof::ids::MdTypeSpec>>,
    /// Index of the first declared parameter (1 with `this`).
    pub first_arg: u16,
    /// The return type's TypeSpec (`None` for `void`).
    pub ret: Option<clrprof::ids::MdTypeSpec>,
    /// The new local signature: the original locals, then S (`object`), X
    /// (`object`) and, for a method returning a value, R.
    pub local_sig: MdSignature,
    /// How many locals the original has (index of S).
    pub first_local: u16,
    /// Where the wrapper starts (after a constructor's base call).
    pub split: Split,
}

/// The managed-handler shape (see `wrap_managed`):
///
/// ```text
///         ldstr NAME; ldc.i4 n; newarr object; (dup; ldc.i4 i; ldarg a; box T | ldnull; stelem.ref)*
///         call OnEntry; stloc S
/// TRY:    <original code, each `ret` now: [stloc R]; leave END>
/// CATCH:  stloc X; ldstr NAME; ldloc S; ldnull; ldloc X; call OnExit; pop; rethrow   // catch object
/// END:    ldstr NAME; ldloc S; (ldloc R; box TR | ldnull); ldnull; call OnExit
///         (unbox.any TR; stloc R; ldloc R | pop); ret
/// ```
pub(crate) fn build_managed(original: &MethodBody, plan: &ManagedPlan) -> Result<MethodBody> {
    let Start {
        mut body,
        first,
        locals,
        end,
        returns,
    } = start(
        original,
        plan.local_sig,
        (plan.first_local, 2),
        plan.ret.is_some(),
        plan.split,
    )?;
    let [state, exc, ret]: [Operand; 3] = locals
        .try_into()
        .map_err(|_| Error::InvalidArgument("the wrapper's locals"))?;
    let s = plan.first_local;
    let name = Operand::Token(MdToken(plan.name.0));
    let tok = |t: clrprof::ids::MdTypeSpec| Operand::Token(MdToken(t.0));

    let n = i32::try_from(plan.params.len())
        .map_err(|_| Error::InvalidArgument("too many parameters"))?;
    let mut prologue = vec![
        (OpCode::LDSTR, name.clone()),
        (OpCode::LDC_I4, Operand::Int(n)),
        (OpCode::NEWARR, tok(plan.object)),
    ];
    for (i, boxed) in plan.params.iter().enumerate() {
        let arg = u16::try_from(i)
            .ok()
            .and_then(|i| i.checked_add(plan.first_arg))
            .ok_or(Error::InvalidArgument("too many parameters"))?;
        prologue.push((OpCode::DUP, Operand::None));
        prologue.push((
            OpCode::LDC_I4,
            Operand::Int(i32::from(arg - plan.first_arg)),
        ));
        match boxed {
            Some(t) => {
                prologue.push((OpCode::LDARG, Operand::Var(arg)));
                prologue.push((OpCode::BOX, tok(*t)));
            }
            None => prologue.push((OpCode::LDNULL, Operand::None)),
        }
        prologue.push((OpCode::STELEM_REF, Operand::None));
    }
    prologue.push((OpCode::CALL, Operand::Token(MdToken(plan.on_entry.0))));
    prologue.push((OpCode::STLOC, state.clone()));
    let prologue_start = insert_prologue(&mut body, first, &prologue)?;

    let on_exit = Operand::Token(MdToken(plan.on_exit.0));
    // The catch handler: report, then let the exception go on.
    let catch = body.push(OpCode::STLOC, exc.clone());
    body.push(OpCode::LDSTR, name.clone());
    body.push(OpCode::LDLOC, state.clone());
    body.push(OpCode::LDNULL, Operand::None);
    body.push(OpCode::LDLOC, exc);
    body.push(OpCode::CALL, on_exit.clone());
    body.push(OpCode::POP, Operand::None);
    body.push(OpCode::RETHROW, Operand::None);

    let handler_end = if returns > 0 {
        let first_of_epilogue = body.push(OpCode::LDSTR, name);
        relabel(&mut body, first_of_epilogue, end)?;
        body.push(OpCode::LDLOC, state);
        match plan.ret {
            Some(t) => {
                body.push(OpCode::LDLOC, ret.clone());
                body.push(OpCode::BOX, tok(t));
            }
            None => {
                body.push(OpCode::LDNULL, Operand::None);
            }
        }
        body.push(OpCode::LDNULL, Operand::None);
        body.push(OpCode::CALL, on_exit);
        match plan.ret {
            Some(t) => {
                body.push(OpCode::UNBOX_ANY, tok(t));
                body.push(OpCode::STLOC, ret.clone());
                body.push(OpCode::LDLOC, ret);
            }
            None => {
                body.push(OpCode::POP, Operand::None);
            }
        }
        body.push(OpCode::RET, Operand::None);
        end
    } else {
        Label::END
    };
    use super::typecheck::{Env, Ty};
    let mut env = Env::default();
    env.locals.insert(s, Ty::O);
    env.locals.insert(s + 1, Ty::O);
    env.calls.insert(
        MdToken(plan.on_entry.0),
        (vec![Ty::Str, Ty::O], Some(Ty::O)),
    );
    env.calls.insert(
        MdToken(plan.on_exit.0),
        (vec![Ty::Str, Ty::O, Ty::O, Ty::O], Some(Ty::O)),
    );
    // The handler starts with the exception on the stack.
    close(
        body,
        ClauseKind::Catch(MdToken(plan.object.0)),
        (prologue_start, first, catch, handler_end),
        &[Ty::O],
        (end, returns),
        &env,
    )
}
