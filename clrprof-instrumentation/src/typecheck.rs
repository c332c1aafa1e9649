//! A type check of the code the wrapping layer adds (its prologue, exit
//! paths and handler blocks), run on every body it builds: `il::verify`
//! checks structure and stack depth; this checks that every added
//! instruction gets operands of the types it needs (ECMA-335 III.1.5) and
//! that each call gets the types its signature declares.

use clrprof::error::{Error, Result};
use clrprof::ids::MdToken;
use clrprof::il::{Label, MethodBody, OpCode, Operand};
use std::collections::HashMap;

/// The evaluation-stack types the added code uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    I4,
    I8,
    /// `native int` (an unmanaged pointer included).
    N,
    /// A managed pointer (`ldarga`, `ldloca`).
    Ptr,
    /// An object reference.
    O,
    /// A string (an object reference).
    Str,
    /// An object reference loaded from a `pinned` local: the only reference
    /// `conv.u` may turn into an address (the object cannot move while the
    /// local holds it, as C# `fixed` relies on).
    Pinned,
    /// A value of the method's own declared types (an argument, the return
    /// value): the added code only stores it, boxes it or passes its address.
    Declared,
}

impl Ty {
    fn fits(self, wanted: Ty) -> bool {
        self == wanted
            || (matches!(self, Ty::Str | Ty::Pinned) && wanted == Ty::O)
            || (matches!(self, Ty::O | Ty::Str) && wanted == Ty::Pinned)
    }
}

/// What the added code refers to: its locals' types and the signatures of
/// what it calls.
#[derive(Default)]
pub(crate) struct Env {
    pub locals: HashMap<u16, Ty>,
    /// `calli` and `call` tokens: parameter types and return type.
    pub calls: HashMap<MdToken, (Vec<Ty>, Option<Ty>)>,
}

fn fail(at: usize, op: OpCode, why: String) -> Error {
    Error::Malformed(format!(
        "the wrapper's added code fails its type check at instruction {at} ({}): {why}",
        op.name()
    ))
}

/// Simulates the added code from the instruction labelled `from` with the
/// stack `initial` (a catch handler starts with the exception) until a
/// `leave`, `endfinally`, `ret` or `rethrow`, or until the instruction
/// labelled `stop` (reached with an empty stack).
pub(crate) fn check(
    body: &MethodBody,
    from: Label,
    stop: Option<Label>,
    initial: &[Ty],
    env: &Env,
) -> Result<()> {
    let code = body.instructions();
    let start = body
        .index_of(from)
        .ok_or_else(|| Error::Malformed("type check: no such instruction".into()))?;
    let mut stack: Vec<Ty> = initial.to_vec();
    for (at, i) in code.iter().enumerate().skip(start) {
        if Some(i.label) == stop {
            return if stack.is_empty() {
                Ok(())
            } else {
                Err(fail(
                    at,
                    i.opcode,
                    format!("stack {stack:?} left at the original code"),
                ))
            };
        }
        let op = i.opcode;
        let mut pop = |want: &[Ty]| -> Result<Vec<Ty>> {
            let mut got = Vec::new();
            for w in want.iter().rev() {
                let t = stack
                    .pop()
                    .ok_or_else(|| fail(at, op, format!("empty stack, wanted {w:?}")))?;
                if *w != Ty::Declared && !t.fits(*w) {
                    return Err(fail(at, op, format!("{t:?} where {w:?} is needed")));
                }
                got.push(t);
            }
            got.reverse();
            Ok(got)
        };
        let local = |v: &Operand| match v {
            Operand::Var(n) => Some(*env.locals.get(n).unwrap_or(&Ty::Declared)),
            _ => None,
        };
        let push: Option<Ty> = match op {
            OpCode::LDC_I4 | OpCode::LDC_I4_0 | OpCode::LDC_I4_1 => Some(Ty::I4),
            OpCode::LDC_I8 => Some(Ty::I8),
            OpCode::CONV_I | OpCode::CONV_U => {
                let t = pop(&[Ty::Declared])?[0];
                if !matches!(t, Ty::I4 | Ty::I8 | Ty::N | Ty::Ptr | Ty::Pinned) {
                    return Err(fail(at, op, format!("converting {t:?} to native int")));
                }
                Some(Ty::N)
            }
            OpCode::LDLOC => local(&i.operand),
            OpCode::STLOC => {
                let want = local(&i.operand).unwrap_or(Ty::Declared);
                pop(&[want])?;
                None
            }
            OpCode::LDLOCA | OpCode::LDARGA => Some(Ty::Ptr),
            OpCode::LDARG => Some(Ty::Declared),
            OpCode::LOCALLOC => {
                pop(&[Ty::N])?;
                if !stack.is_empty() {
                    return Err(fail(
                        at,
                        op,
                        "localloc needs an otherwise empty stack".into(),
                    ));
                }
                Some(Ty::N)
            }
            OpCode::ADD => {
                pop(&[Ty::N, Ty::I4])?;
                Some(Ty::N)
            }
            OpCode::NOP => None,
            OpCode::LDIND_I => {
                pop(&[Ty::N])?;
                Some(Ty::N)
            }
            OpCode::STIND_I => {
                pop(&[Ty::N, Ty::N])?;
                None
            }
            OpCode::CALLI | OpCode::CALL => {
                let Operand::Token(t) = &i.operand else {
                    return Err(fail(at, op, "no token".into()));
                };
                let (params, ret) = env
                    .calls
                    .get(t)
                    .ok_or_else(|| fail(at, op, format!("unknown target {:#010x}", t.0)))?;
                if op == OpCode::CALLI {
                    pop(&[Ty::N])?;
                }
                pop(params)?;
                *ret
            }
            OpCode::LDSTR => Some(Ty::Str),
            OpCode::LDNULL => Some(Ty::O),
            OpCode::NEWARR => {
                pop(&[Ty::I4])?;
                Some(Ty::O)
            }
            OpCode::DUP => {
                let t = *stack
                    .last()
                    .ok_or_else(|| fail(at, op, "dup of an empty stack".into()))?;
                Some(t)
            }
            OpCode::BOX => {
                pop(&[Ty::Declared])?;
                Some(Ty::O)
            }
            OpCode::STELEM_REF => {
                pop(&[Ty::O, Ty::I4, Ty::O])?;
                None
            }
            OpCode::UNBOX_ANY => {
                pop(&[Ty::O])?;
                Some(Ty::Declared)
            }
            OpCode::POP => {
                pop(&[Ty::Declared])?;
                None
            }
            OpCode::LEAVE | OpCode::LEAVE_S | OpCode::ENDFINALLY | OpCode::RETHROW => {
                return if stack.is_empty() {
                    Ok(())
                } else {
                    Err(fail(at, op, format!("stack {stack:?} not empty")))
                };
            }
            OpCode::RET => {
                return if stack.len() <= 1 {
                    Ok(())
                } else {
                    Err(fail(at, op, format!("stack {stack:?} at ret")))
                };
            }
            other => {
                return Err(fail(at, other, "an opcode the wrapper never adds".into()));
            }
        };
        if let Some(t) = push {
            stack.push(t);
        }
    }
    Err(Error::Malformed(
        "the wrapper's added code runs off the end of the body".into(),
    ))
}
