//! Evaluation-stack depth analysis (ECMA-335 III.1.7.5): the depth before
//! every reachable instruction, the maximum (for the header's max stack) and
//! the consistency rules a verifier checks: no underflow, one depth per
//! instruction whatever path reaches it, empty stack at `leave`, and the
//! method's return value alone on the stack at `ret`.

use super::body::{ClauseKind, Label, MethodBody, Operand};
use super::opcodes::{FlowControl, OpCode, Pop, Push};
use crate::error::{Error, Result};
use crate::ids::MdToken;
use crate::signature::{MethodSig, TypeSig};
use std::collections::HashMap;

/// What a call instruction does to the stack, from the callee's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallSite {
    /// Declared parameters (all of them for a vararg call site).
    pub params: u32,
    /// `HASTHIS` without `EXPLICITTHIS`: the call also pops `this`.
    pub has_this: bool,
    /// The return type is not `void`.
    pub returns_value: bool,
}

impl CallSite {
    /// From a method signature blob (`MethodDefSig`, `MethodRefSig` or
    /// `StandAloneMethodSig`).
    pub fn from_signature(blob: &[u8]) -> Result<CallSite> {
        let sig = MethodSig::parse(blob)?;
        Ok(CallSite::from_sig(&sig))
    }

    /// From a decoded method signature.
    pub fn from_sig(sig: &MethodSig) -> CallSite {
        let explicit_this = sig.calling_convention & 0x40 != 0;
        let mut ret = &sig.ret;
        while let TypeSig::Modified { inner, .. } = ret {
            ret = inner;
        }
        CallSite {
            params: (sig.params.len() + sig.varargs.len()) as u32,
            has_this: sig.has_this() && !explicit_this,
            returns_value: *ret != TypeSig::Primitive(clrprof_sys::ELEMENT_TYPE_VOID as u8),
        }
    }

    /// Slots popped by `opcode` calling this site.
    pub fn pops(&self, opcode: OpCode) -> u32 {
        match opcode {
            // The constructor's `this` is created by newobj, not popped.
            OpCode::NEWOBJ => self.params,
            // calli also pops the function pointer.
            OpCode::CALLI => self.params + self.has_this as u32 + 1,
            _ => self.params + self.has_this as u32,
        }
    }

    /// Slots pushed by `opcode` calling this site.
    pub fn pushes(&self, opcode: OpCode) -> u32 {
        match opcode {
            OpCode::NEWOBJ => 1,
            _ => self.returns_value as u32,
        }
    }
}

/// Resolves the call sites of `call`, `callvirt`, `newobj`, `calli` (and
/// the `jmp` target) to their stack effect; typically backed by the module's
/// metadata (see [`MetaDataCallSites`](super::MetaDataCallSites)).
pub trait CallSites {
    /// The call site of `token` (MethodDef, MemberRef, MethodSpec or, for
    /// `calli`, StandAloneSig).
    fn call_site(&self, token: MdToken) -> Result<CallSite>;
}

impl<F: Fn(MdToken) -> Result<CallSite>> CallSites for F {
    fn call_site(&self, token: MdToken) -> Result<CallSite> {
        self(token)
    }
}

/// A fixed table of call sites, for tests and for bodies built by hand.
impl CallSites for HashMap<MdToken, CallSite> {
    fn call_site(&self, token: MdToken) -> Result<CallSite> {
        self.get(&token).copied().ok_or_else(|| {
            Error::Malformed(format!("no signature known for token {:#010x}", token.0))
        })
    }
}

/// The result of [`analyze`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackAnalysis {
    /// The largest depth reached.
    pub max_stack: u32,
    /// Depth before each instruction (body order); `None` for unreachable
    /// instructions.
    pub depths: Vec<Option<u32>>,
}

fn fail(at: Label, what: impl core::fmt::Display) -> Error {
    Error::Malformed(format!("IL stack at {at:?}: {what}"))
}

/// Computes the stack depth before every reachable instruction.
///
/// Entry points are the first instruction (depth 0), catch and filter
/// handlers and filter blocks (depth 1: the exception), and finally and
/// fault handlers (depth 0). `returns_value` is whether the method itself
/// returns a value (what `ret` pops). Fails on underflow, on two paths
/// reaching one instruction with different depths, on falling off the end
/// of the code, on `endfinally` or `jmp` with a non-empty stack, on
/// `endfilter` without exactly the filter result, and on `ret` with anything
/// but the return value on the stack.
pub fn analyze(
    body: &MethodBody,
    returns_value: bool,
    sites: &dyn CallSites,
) -> Result<StackAnalysis> {
    let code = body.instructions();
    let index: HashMap<Label, usize> = code.iter().enumerate().map(|(k, i)| (i.label, k)).collect();
    let find = |l: Label, from: Label| -> Result<usize> {
        index
            .get(&l)
            .copied()
            .ok_or_else(|| fail(from, format_args!("target {l:?} is no instruction")))
    };
    let mut depths: Vec<Option<u32>> = vec![None; code.len()];
    let mut work: Vec<(usize, u32)> = Vec::new();
    if !code.is_empty() {
        work.push((0, 0));
    }
    for c in &body.clauses {
        let d = match c.kind {
            ClauseKind::Catch(_) | ClauseKind::Filter(_) => 1,
            ClauseKind::Finally | ClauseKind::Fault => 0,
        };
        work.push((find(c.handler_start, c.handler_start)?, d));
        if let ClauseKind::Filter(f) = c.kind {
            work.push((find(f, f)?, 1));
        }
    }
    let mut max = 0u32;
    while let Some((k, depth)) = work.pop() {
        match depths[k] {
            Some(d) if d == depth => continue,
            Some(d) => {
                return Err(fail(
                    code[k].label,
                    format_args!("reached with depth {depth} and with depth {d}"),
                ))
            }
            None => depths[k] = Some(depth),
        }
        max = max.max(depth);
        let ins = &code[k];
        let op = ins.opcode;
        let info = op.info();
        let (pops, pushes) = match (info.pop, info.push) {
            (Pop::Fixed(p), Push::Fixed(u)) if op != OpCode::RET => (p as u32, u as u32),
            _ if op == OpCode::RET => (returns_value as u32, 0),
            _ => {
                let Operand::Token(t) = &ins.operand else {
                    return Err(fail(ins.label, format_args!("{op} without a token")));
                };
                let site = sites.call_site(*t)?;
                (site.pops(op), site.pushes(op))
            }
        };
        if depth < pops {
            return Err(fail(
                ins.label,
                format_args!("{op} pops {pops} but the stack holds {depth}"),
            ));
        }
        let after = depth - pops + pushes;
        max = max.max(after);
        let next = |work: &mut Vec<(usize, u32)>, d: u32| -> Result<()> {
            if k + 1 >= code.len() {
                return Err(fail(ins.label, "control falls off the end of the code"));
            }
            work.push((k + 1, d));
            Ok(())
        };
        match info.flow {
            FlowControl::Next | FlowControl::Call | FlowControl::Break | FlowControl::Meta => {
                next(&mut work, after)?
            }
            FlowControl::Branch => {
                let Operand::Target(t) = &ins.operand else {
                    return Err(fail(ins.label, "branch without a target"));
                };
                // leave empties the stack (ECMA-335 III.3.46); whether it was
                // empty already is for the verifier to judge.
                let d = if matches!(op, OpCode::LEAVE | OpCode::LEAVE_S) {
                    0
                } else {
                    after
                };
                work.push((find(*t, ins.label)?, d));
            }
            FlowControl::CondBranch => {
                match &ins.operand {
                    Operand::Target(t) => work.push((find(*t, ins.label)?, after)),
                    Operand::Switch(ts) => {
                        for t in ts {
                            work.push((find(*t, ins.label)?, after));
                        }
                    }
                    _ => return Err(fail(ins.label, "branch without a target")),
                }
                next(&mut work, after)?;
            }
            FlowControl::Return => {
                let ok = match op {
                    OpCode::RET | OpCode::ENDFINALLY | OpCode::ENDFILTER | OpCode::JMP => {
                        after == 0
                    }
                    _ => true,
                };
                if !ok {
                    return Err(fail(
                        ins.label,
                        format_args!("{op} leaves {after} values on the stack"),
                    ));
                }
            }
            FlowControl::Throw => {}
        }
    }
    Ok(StackAnalysis {
        max_stack: max,
        depths,
    })
}

/// Sets `body.max_stack` to what [`analyze`] finds and returns it.
pub fn recompute_max_stack(
    body: &mut MethodBody,
    returns_value: bool,
    sites: &dyn CallSites,
) -> Result<u16> {
    let a = analyze(body, returns_value, sites)?;
    let max = u16::try_from(a.max_stack)
        .map_err(|_| Error::Malformed(format!("max stack {} above 65535", a.max_stack)))?;
    body.max_stack = max;
    Ok(max)
}
