//! A verifier-style checker for encoded method bodies: the structural rules
//! of ECMA-335 (II.25.4, II.19 and III.1.7) that a rewritten body must keep
//! for the JIT to accept it. It is no type checker; it checks
//!
//! - the body decodes: known opcodes, operands inside the code, every branch
//!   and switch target and every exception-region bound on an instruction
//!   boundary;
//! - the stack: no underflow, one depth per instruction, the declared max
//!   stack not exceeded, empty at `leave`, `endfinally` and `jmp`, only the
//!   return value at `ret`;
//! - the exception clauses: non-empty regions, a handler outside its own
//!   `try`, a filter block just before its handler, every two blocks either
//!   disjoint or nested, inner clauses listed before the clauses enclosing
//!   them, no control falling off the end of a block, branches entering a
//!   `try` only at its first instruction and leaving blocks only by `leave`
//!   (or `throw`, `ret`, `endfinally`, `endfilter`).

use super::body::{ClauseKind, Label, MethodBody, Operand};
use super::opcodes::{FlowControl, OpCode};
use super::stack::{analyze, CallSites, StackAnalysis};
use crate::error::{Error, Result};

fn fail(what: impl Into<String>) -> Error {
    Error::Malformed(format!("IL verification: {}", what.into()))
}

/// A block of code `[start, end)` by offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    start: u32,
    end: u32,
    is_try: bool,
    clause: usize,
}

impl Block {
    fn contains(&self, o: u32) -> bool {
        self.start <= o && o < self.end
    }
    fn nests_in(&self, other: &Block) -> bool {
        other.start <= self.start && self.end <= other.end
    }
    fn disjoint(&self, other: &Block) -> bool {
        self.end <= other.start || other.end <= self.start
    }
}

/// Decodes `bytes` and checks it; returns the decoded body and its stack
/// analysis. `returns_value` is whether the method returns a value.
pub fn verify(
    bytes: &[u8],
    returns_value: bool,
    sites: &dyn CallSites,
) -> Result<(MethodBody, StackAnalysis)> {
    let body = MethodBody::parse(bytes)?;
    let code = body.instructions();
    if code.is_empty() {
        return Err(fail("no code"));
    }
    let written = body.write()?;
    let code_size = written.code_size;
    let off = |l: Label| -> u32 {
        match l.original_offset() {
            Some(o) if l != Label::END => o,
            _ => code_size,
        }
    };

    let stack = analyze(&body, returns_value, sites)?;
    if stack.max_stack > body.max_stack as u32 {
        return Err(fail(format!(
            "stack reaches {} but the header declares max stack {}",
            stack.max_stack, body.max_stack
        )));
    }
    for (ins, depth) in code.iter().zip(&stack.depths) {
        if matches!(ins.opcode, OpCode::LEAVE | OpCode::LEAVE_S) && depth.is_some_and(|d| d != 0) {
            return Err(fail(format!(
                "leave at {:?} with a non-empty stack",
                ins.label
            )));
        }
    }

    // Blocks of every clause.
    let mut blocks = Vec::new();
    for (k, c) in body.clauses.iter().enumerate() {
        let (ts, te, hs, he) = (
            off(c.try_start),
            off(c.try_end),
            off(c.handler_start),
            off(c.handler_end),
        );
        if ts >= te || hs >= he {
            return Err(fail(format!("clause {k} has an empty region")));
        }
        let t = Block {
            start: ts,
            end: te,
            is_try: true,
            clause: k,
        };
        let h = Block {
            start: hs,
            end: he,
            is_try: false,
            clause: k,
        };
        if !t.disjoint(&h) {
            return Err(fail(format!("clause {k}: handler overlaps its try")));
        }
        blocks.push(t);
        blocks.push(h);
        if let ClauseKind::Filter(f) = c.kind {
            let fs = off(f);
            if fs >= hs {
                return Err(fail(format!(
                    "clause {k}: filter does not precede its handler"
                )));
            }
            let fb = Block {
                start: fs,
                end: hs,
                is_try: false,
                clause: k,
            };
            if !fb.disjoint(&t) {
                return Err(fail(format!("clause {k}: filter overlaps its try")));
            }
            blocks.push(fb);
        }
    }
    for (a, x) in blocks.iter().enumerate() {
        for y in &blocks[a + 1..] {
            if x.clause == y.clause {
                continue;
            }
            let nested = x.nests_in(y) || y.nests_in(x);
            if !nested && !x.disjoint(y) {
                return Err(fail(format!(
                    "blocks of clauses {} and {} overlap without nesting",
                    x.clause, y.clause
                )));
            }
            // An inner clause (its try strictly inside a block of another
            // clause) must come first.
            if x.is_try
                && x.nests_in(y)
                && *x != *y
                && x.clause > y.clause
                && !(y.is_try && x.start == y.start && x.end == y.end)
            {
                return Err(fail(format!(
                    "clause {} is nested in clause {} but listed after it",
                    x.clause, y.clause
                )));
            }
            if y.is_try
                && y.nests_in(x)
                && y.clause > x.clause
                && !(x.is_try && x.start == y.start && x.end == y.end)
            {
                return Err(fail(format!(
                    "clause {} is nested in clause {} but listed after it",
                    y.clause, x.clause
                )));
            }
        }
    }

    // No fall-through off the end of a block: the instruction before each
    // block end must not continue to the next one.
    let offsets = &written.offsets;
    for b in &blocks {
        let last = offsets
            .iter()
            .rposition(|o| *o < b.end)
            .ok_or_else(|| fail("block before the first instruction"))?;
        let ins = &code[last];
        let falls = matches!(
            ins.opcode.flow(),
            FlowControl::Next
                | FlowControl::Call
                | FlowControl::Break
                | FlowControl::Meta
                | FlowControl::CondBranch
        );
        if falls && stack.depths[last].is_some() {
            return Err(fail(format!(
                "{} at {:?} falls through the end of a {} block",
                ins.opcode,
                ins.label,
                if b.is_try { "try" } else { "handler" }
            )));
        }
    }

    // Branches: enter a try only at its start; leave blocks only by leave.
    for (ins, from) in code.iter().zip(offsets) {
        let targets: Vec<Label> = match &ins.operand {
            Operand::Target(t) => vec![*t],
            Operand::Switch(ts) => ts.clone(),
            _ => continue,
        };
        let is_leave = matches!(ins.opcode, OpCode::LEAVE | OpCode::LEAVE_S);
        for t in targets {
            let to = off(t);
            for b in &blocks {
                let (in_from, in_to) = (b.contains(*from), b.contains(to));
                if in_to && !in_from && !(b.is_try && to == b.start) {
                    return Err(fail(format!(
                        "{} at {:?} enters a {} block in its middle ({t:?})",
                        ins.opcode,
                        ins.label,
                        if b.is_try { "try" } else { "handler" }
                    )));
                }
                if in_from && !in_to && !is_leave {
                    return Err(fail(format!(
                        "{} at {:?} leaves a block without leave",
                        ins.opcode, ins.label
                    )));
                }
            }
        }
    }
    Ok((body, stack))
}
