//! The shape of a wrapped body, built from the original with no runtime at
//! hand (so every case is unit-tested against bodies written here).
//!
//! ```text
//!         <args>    stloc P                  // a localloc'd table of argument addresses, or null
//!         ldc.i4 id; ldloc P; ldc.i8 enter; conv.i; calli int64(int32, native int)
//!         stloc S                            // the entry handler's state
//! TRY:    <original code, each `ret` now: [stloc R]; leave END>
//! FAULT:  ldc.i4 id; ldloc S; null; ldc.i4.1
//!         ldc.i8 exit; conv.i; calli void(int32, int64, native int, int32)
//!         endfinally                         // fault: TRY..FAULT, handler FAULT..END
//! END:    ldc.i4 id; ldloc S; ldloca R|null; conv.u; ldc.i4.0
//!         ldc.i8 exit; conv.i; calli void(int32, int64, native int, int32)
//!         [ldloc R]; ret
//! ```
//!
//! A normal return leaves the `try` and calls the exit handler from the
//! epilogue, outside every exception region, with R holding the value
//! (which the handler may replace before `ret` returns it); an exception
//! runs the `fault` handler, which calls the exit handler and lets the
//! exception go on unchanged. Both unmanaged calls of a normal call sit
//! outside exception regions, where the JIT inlines the transition to
//! native code (in a handler it calls a stub instead). The original clauses
//! stay as they were, nested inside the new one (a `ret` never sits inside
//! a protected region, ECMA-335 III.3.56, so every return leaves from the
//! top level of the new `try`).

use crate::error::{Error, Result};
use crate::ids::{MdSignature, MdToken};
use crate::il::{ClauseKind, ExceptionClause, HeaderFormat, Label, MethodBody, OpCode, Operand};

/// What [`build`] needs besides the original body.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The wrapper's number, passed to both probes.
    pub id: i32,
    /// Address of the entry probe.
    pub enter: usize,
    /// Address of the exit probe.
    pub exit: usize,
    /// `calli` signature of the entry probe: unmanaged `int64(int32, native int)`.
    pub enter_sig: MdSignature,
    /// `calli` signature of the exit probe: unmanaged `void(int32, int64, native int, int32)`.
    pub exit_sig: MdSignature,
    /// The new local signature: the original locals, then S, P and (for a
    /// method returning a value) R.
    pub local_sig: MdSignature,
    /// How many locals the original has (index of S).
    pub first_local: u16,
    /// Whether the method returns a value.
    pub returns: bool,
    /// Number of arguments, `this` included, whose addresses go to the entry
    /// probe; `None` passes null (the handler does not read arguments).
    pub arguments: Option<u16>,
}

/// The `calli` signatures of the entry probe (unmanaged `int64(int32,
/// native int)`) and of the exit probe (unmanaged `void(int32, int64,
/// native int, int32)`), matching their Rust declarations.
pub(crate) fn probe_sigs() -> Result<(Vec<u8>, Vec<u8>)> {
    use crate::metadata_emit::{PrimitiveType as P, SigBuilder, UnmanagedCallConv};
    let p = SigBuilder::primitive;
    let enter = SigBuilder::unmanaged_calli(
        UnmanagedCallConv::StdCall,
        &p(P::I8),
        &[&p(P::I4), &p(P::I)],
    )?;
    let exit = SigBuilder::unmanaged_calli(
        UnmanagedCallConv::StdCall,
        &p(P::Void),
        &[&p(P::I4), &p(P::I8), &p(P::I), &p(P::I4)],
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
    /// The first original instruction: where the new `try` starts.
    first: Label,
    /// The three added locals (the shapes' S, then P or X, then R).
    locals: [Operand; 3],
    /// The epilogue's label.
    end: Label,
    /// How many `ret`s the original has.
    returns: usize,
}

fn start(
    original: &MethodBody,
    local_sig: MdSignature,
    first_local: u16,
    returns_value: bool,
) -> Result<Start> {
    if let Some(why) = refusal(original) {
        return Err(Error::Usage(why.into()));
    }
    let first = original
        .instructions()
        .first()
        .map(|i| i.label)
        .ok_or_else(|| Error::Malformed("IL method body: no code".into()))?;
    let var = |k: u16| -> Result<Operand> {
        first_local
            .checked_add(k)
            .map(Operand::Var)
            .ok_or(Error::InvalidArgument(
                "too many locals to add the wrapper's",
            ))
    };
    let locals = [var(0)?, var(1)?, var(2)?];

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
            body.replace(index, OpCode::STLOC, locals[2].clone())?;
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

/// Builds the wrapped body (see the module docs). The caller recomputes max
/// stack and verifies the result.
pub(crate) fn build(original: &MethodBody, plan: &Plan) -> Result<MethodBody> {
    let Start {
        mut body,
        first,
        locals,
        end,
        returns,
    } = start(original, plan.local_sig, plan.first_local, plan.returns)?;
    let [state, args, ret] = locals;
    let s = plan.first_local;

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
        (OpCode::LDC_I4, Operand::Int(plan.id)),
        (OpCode::LDLOC, args),
        (OpCode::LDC_I8, Operand::Long(plan.enter as u64 as i64)),
        (OpCode::CONV_I, Operand::None),
        (OpCode::CALLI, Operand::Token(MdToken(plan.enter_sig.0))),
        (OpCode::STLOC, state.clone()),
    ]);
    body.insert_at_entry(&prologue)?;

    // The exit call: `value` pushes the return value's address (or null).
    let exit_call = |body: &mut MethodBody, value: Option<&Operand>, threw: OpCode| {
        let first = body.push(OpCode::LDC_I4, Operand::Int(plan.id));
        body.push(OpCode::LDLOC, state.clone());
        match value {
            Some(r) => body.push(OpCode::LDLOCA, r.clone()),
            None => body.push(OpCode::LDC_I4_0, Operand::None),
        };
        body.push(OpCode::CONV_U, Operand::None);
        body.push(threw, Operand::None);
        body.push(OpCode::LDC_I8, Operand::Long(plan.exit as u64 as i64));
        body.push(OpCode::CONV_I, Operand::None);
        body.push(OpCode::CALLI, Operand::Token(MdToken(plan.exit_sig.0)));
        first
    };

    // The fault handler: the method is leaving by an exception.
    let fault = exit_call(&mut body, None, OpCode::LDC_I4_1);
    body.push(OpCode::ENDFINALLY, Operand::None);

    // The epilogue: a normal return.
    let handler_end = if returns > 0 {
        let value = plan.returns.then_some(&ret);
        let first = exit_call(&mut body, value, OpCode::LDC_I4_0);
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
    env.calls.insert(
        MdToken(plan.enter_sig.0),
        (vec![Ty::I4, Ty::N], Some(Ty::I8)),
    );
    env.calls.insert(
        MdToken(plan.exit_sig.0),
        (vec![Ty::I4, Ty::I8, Ty::N, Ty::I4], None),
    );
    close(
        body,
        ClauseKind::Fault,
        (first, fault, handler_end),
        &[],
        (end, returns),
        &env,
    )
}

/// Ends both shapes: the outermost clause of `kind` (the new `try` from the
/// first original instruction to the handler, the handler up to
/// `handler_end`; ECMA-335 II.19 wants inner clauses first, so it goes
/// last), then the type check of everything added: the prologue, the
/// handler (entered with `handler_stack`) and, for a method that returns,
/// the epilogue at `end`.
fn close(
    mut body: MethodBody,
    kind: ClauseKind,
    (first, handler, handler_end): (Label, Label, Label),
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
    let start = body.instructions()[0].label;
    check(&body, start, Some(first), &[], env)?;
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

/// The new local signature: `LOCAL_SIG`, the count plus three (or two when
/// the method returns nothing), the original types, then the shape's two
/// locals (`int64` S and `native int` P for Rust handlers, `object` S and
/// `object` X for C# handlers) and the return type R.
pub(crate) fn local_sig(
    original_count: u32,
    original_types: &[u8],
    added: [crate::metadata_emit::PrimitiveType; 2],
    return_type: Option<&[u8]>,
) -> Result<Vec<u8>> {
    use crate::metadata_emit::SigBuilder;
    let n = if return_type.is_some() { 3 } else { 2 };
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
        b.raw(&SigBuilder::primitive(t));
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
    pub name: crate::ids::MdString,
    /// MemberRef of `object OnEntry(string, object[])`.
    pub on_entry: crate::ids::MdMemberRef,
    /// MemberRef of `object OnExit(string, object, object, object)`.
    pub on_exit: crate::ids::MdMemberRef,
    /// TypeSpec of `object` (for `newarr` and the catch clause).
    pub object: crate::ids::MdTypeSpec,
    /// Per declared parameter: the TypeSpec to box it with, or `None` to
    /// pass null (`ref`, pointer and `TypedReference` parameters).
    pub params: Vec<Option<crate::ids::MdTypeSpec>>,
    /// Index of the first declared parameter (1 with `this`).
    pub first_arg: u16,
    /// The return type's TypeSpec (`None` for `void`).
    pub ret: Option<crate::ids::MdTypeSpec>,
    /// The new local signature: the original locals, then S (`object`), X
    /// (`object`) and, for a method returning a value, R.
    pub local_sig: MdSignature,
    /// How many locals the original has (index of S).
    pub first_local: u16,
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
        plan.first_local,
        plan.ret.is_some(),
    )?;
    let [state, exc, ret] = locals;
    let s = plan.first_local;
    let name = Operand::Token(MdToken(plan.name.0));
    let tok = |t: crate::ids::MdTypeSpec| Operand::Token(MdToken(t.0));

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
    body.insert_at_entry(&prologue)?;

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
        (first, catch, handler_end),
        &[Ty::O],
        (end, returns),
        &env,
    )
}
