//! IL method bodies (ECMA-335 II.25.4): header, code, exception-handling
//! sections; decoding, editing and encoding.
//!
//! A body is a list of [`Instruction`]s, each named by a [`Label`]. Branch
//! operands and exception clauses refer to labels, not byte offsets, so
//! inserting or removing instructions never invalidates them; offsets are
//! computed again when the body is written. Instructions decoded from an
//! existing body are labelled by their original offset
//! ([`Label::original_offset`]), which is what the old-to-new IL map for
//! `SetILInstrumentedCodeMap` is built from.

use super::opcodes::{OpCode, OperandKind};
use crate::error::{Error, Result};
use crate::ids::{MdSignature, MdToken};
use crate::info::IlMapEntry;
use std::collections::HashMap;

/// Names an instruction of a [`MethodBody`] (or the end of the code, for
/// exception regions that reach it).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(u32);

/// Labels made by [`MethodBody::new_label`] have this bit set; decoded
/// instructions are labelled by their offset, which stays below it.
const FRESH: u32 = 0x8000_0000;

impl Label {
    /// The end of the code: the exclusive end of an exception region that
    /// runs to the last instruction. Never a branch target.
    pub const END: Label = Label(u32::MAX);

    /// The offset in the original body, for decoded instructions.
    pub fn original_offset(self) -> Option<u32> {
        (self.0 & FRESH == 0).then_some(self.0)
    }
}

impl core::fmt::Debug for Label {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match (*self, self.original_offset()) {
            (Label::END, _) => f.write_str("END"),
            (_, Some(o)) => write!(f, "IL_{o:04x}"),
            (_, None) => write!(f, "new_{}", self.0 & !FRESH),
        }
    }
}

/// The operand of an instruction, matching its opcode's [`OperandKind`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `InlineNone`.
    None,
    /// `ShortInlineI` (must fit in `i8`) or `InlineI`.
    Int(i32),
    /// `InlineI8`.
    Long(i64),
    /// `ShortInlineR`, as IEEE bits (so operands compare exactly).
    Float32(u32),
    /// `InlineR`, as IEEE bits.
    Float64(u64),
    /// `ShortInlineVar` (must fit in `u8`) or `InlineVar`.
    Var(u16),
    /// A metadata token (`InlineMethod`, `InlineField`, `InlineType`,
    /// `InlineTok`, `InlineString`, `InlineSig`).
    Token(MdToken),
    /// A branch target (short or long).
    Target(Label),
    /// The targets of `switch`.
    Switch(Vec<Label>),
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instruction {
    /// Its name in the body.
    pub label: Label,
    /// The opcode.
    pub opcode: OpCode,
    /// The operand.
    pub operand: Operand,
}

impl Instruction {
    /// Encoded size for this opcode (a short branch counts as short).
    pub fn size(&self) -> usize {
        let n = match &self.operand {
            Operand::Switch(t) => 4 * t.len(),
            _ => 0,
        };
        self.opcode.size() + self.opcode.operand().size() + n
    }
}

/// The method header format (ECMA-335 II.25.4.2, II.25.4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderFormat {
    /// One byte: code under 64 bytes, max stack 8, no locals, no exception
    /// sections.
    Tiny,
    /// Twelve bytes: flags, max stack, code size, local-signature token.
    Fat,
}

/// What an exception clause does (`CorExceptionFlag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClauseKind {
    /// A typed catch (`COR_ILEXCEPTION_CLAUSE_NONE`) of the given type token.
    Catch(MdToken),
    /// A filter (`COR_ILEXCEPTION_CLAUSE_FILTER`) whose code starts at the
    /// label and runs up to the handler.
    Filter(Label),
    /// A finally (`COR_ILEXCEPTION_CLAUSE_FINALLY`).
    Finally,
    /// A fault (`COR_ILEXCEPTION_CLAUSE_FAULT`).
    Fault,
}

/// One exception-handling clause; the ends are exclusive (the label of the
/// first instruction after the region, or [`Label::END`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExceptionClause {
    /// Kind (and catch type or filter start).
    pub kind: ClauseKind,
    /// First instruction of the protected region.
    pub try_start: Label,
    /// End of the protected region.
    pub try_end: Label,
    /// First instruction of the handler.
    pub handler_start: Label,
    /// End of the handler.
    pub handler_end: Label,
}

/// A method body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodBody {
    /// The header format to prefer when writing; a tiny body is written fat
    /// when it no longer fits the tiny format (code of 64 bytes or more, max
    /// stack above 8, locals, `init_locals` or exception clauses).
    pub format: HeaderFormat,
    /// Max stack (8 for a tiny header). See
    /// [`stack::recompute_max_stack`](super::stack::recompute_max_stack).
    pub max_stack: u16,
    /// `CorILMethod_InitLocals`: zero the locals on entry.
    pub init_locals: bool,
    /// The locals' signature token (nil for none).
    pub local_var_sig: MdSignature,
    /// The exception clauses, inner before outer (ECMA-335 II.19).
    pub clauses: Vec<ExceptionClause>,
    instructions: Vec<Instruction>,
    next_fresh: u32,
}

/// The result of [`MethodBody::write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenBody {
    /// The encoded method: header, code and exception sections.
    pub bytes: Vec<u8>,
    /// Original IL offset → new IL offset, for every instruction decoded from
    /// the original body, sorted by original offset (for
    /// `SetILInstrumentedCodeMap`).
    pub map: Vec<IlMapEntry>,
    /// Offset of each instruction (in body order) in the new code.
    pub offsets: Vec<u32>,
    /// Size of the code.
    pub code_size: u32,
    /// `true` if the header was written fat.
    pub fat: bool,
}

const TINY: u8 = 0x2;
const FAT: u16 = 0x3;
const MORE_SECTS: u16 = 0x8;
const INIT_LOCALS: u16 = 0x10;
const SECT_EH: u8 = 0x1;
const SECT_FAT: u8 = 0x40;
const SECT_MORE: u8 = 0x80;
const SECT_KIND_MASK: u8 = 0x3f;

fn bad(what: impl Into<String>) -> Error {
    Error::Malformed(format!("IL method body: {}", what.into()))
}

/// Little-endian reader that never reads past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or_else(|| bad("size overflow"))?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or_else(|| bad(format!("truncated at offset {}", self.pos)))?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// An operand as decoded, before branch offsets become labels.
enum RawOperand {
    Plain(Operand),
    Target(i64),
    Switch(Vec<i64>),
}

impl MethodBody {
    /// An empty body with a tiny header preference and max stack 8.
    pub fn new() -> MethodBody {
        MethodBody {
            format: HeaderFormat::Tiny,
            max_stack: 8,
            init_locals: false,
            local_var_sig: MdSignature(0),
            clauses: Vec::new(),
            instructions: Vec::new(),
            next_fresh: 0,
        }
    }

    /// Decodes an IL method (as `GetILFunctionBody` returns it).
    ///
    /// Fails with [`Error::Malformed`] for a truncated or unknown header, an
    /// unknown opcode, an operand running past the code, a branch target
    /// that is not the start of an instruction, an exception region whose
    /// bounds are not instruction boundaries, or an unknown clause kind.
    /// Extra sections other than exception tables are skipped.
    pub fn parse(bytes: &[u8]) -> Result<MethodBody> {
        let mut r = Reader { bytes, pos: 0 };
        let first = r.u8()?;
        let (format, max_stack, init_locals, local_var_sig, code_size, more, code_start) =
            match first & 0x3 {
                TINY => (
                    HeaderFormat::Tiny,
                    8u16,
                    false,
                    0u32,
                    (first >> 2) as usize,
                    false,
                    1usize,
                ),
                0x3 => {
                    r.pos = 0;
                    let flags = r.u16()?;
                    let header = 4 * (flags >> 12) as usize;
                    if header < 12 {
                        return Err(bad(format!("fat header of {header} bytes (12 at least)")));
                    }
                    let max_stack = r.u16()?;
                    let code_size = r.u32()? as usize;
                    let sig = r.u32()?;
                    if sig != 0 && sig & 0xff00_0000 != MdSignature::TABLE {
                        return Err(bad(format!("local signature token {sig:#010x}")));
                    }
                    (
                        HeaderFormat::Fat,
                        max_stack,
                        flags & INIT_LOCALS != 0,
                        sig,
                        code_size,
                        flags & MORE_SECTS != 0,
                        header,
                    )
                }
                _ => return Err(bad(format!("unknown header format {first:#04x}"))),
            };
        if code_size >= FRESH as usize {
            return Err(bad("code of 2 GiB or more"));
        }
        r.pos = code_start;
        let code = r.take(code_size)?;
        let raw = decode_code(code)?;
        let boundaries: HashMap<u32, ()> = raw.iter().map(|(o, _, _)| (*o, ())).collect();
        let label_at = |offset: i64, what: &str| -> Result<Label> {
            if (0..code_size as i64).contains(&offset) && boundaries.contains_key(&(offset as u32))
            {
                Ok(Label(offset as u32))
            } else {
                Err(bad(format!(
                    "{what} {offset} is not the start of an instruction"
                )))
            }
        };
        let region_end = |offset: i64, what: &str| -> Result<Label> {
            if offset == code_size as i64 {
                Ok(Label::END)
            } else {
                label_at(offset, what)
            }
        };
        let mut instructions = Vec::with_capacity(raw.len());
        for (offset, opcode, operand) in raw {
            let operand = match operand {
                RawOperand::Plain(op) => op,
                RawOperand::Target(t) => Operand::Target(label_at(t, "branch target")?),
                RawOperand::Switch(ts) => Operand::Switch(
                    ts.into_iter()
                        .map(|t| label_at(t, "switch target"))
                        .collect::<Result<_>>()?,
                ),
            };
            instructions.push(Instruction {
                label: Label(offset),
                opcode,
                operand,
            });
        }

        // Extra sections start at the next 4-byte boundary after the code.
        let mut clauses = Vec::new();
        let mut more = more;
        let mut sections = 0;
        let mut pos = code_start + code_size;
        while more {
            sections += 1;
            if sections > 1024 {
                return Err(bad("too many extra sections"));
            }
            pos = pos.checked_add(3).ok_or_else(|| bad("size overflow"))? & !3;
            r.pos = pos;
            let kind = r.u8()?;
            let fat = kind & SECT_FAT != 0;
            let size = if fat {
                let b = r.take(3)?;
                u32::from_le_bytes([b[0], b[1], b[2], 0]) as usize
            } else {
                let s = r.u8()? as usize;
                r.u16()?;
                s
            };
            if size < 4 {
                return Err(bad(format!("extra section of {size} bytes")));
            }
            let data = r.take(size - 4)?;
            if kind & SECT_KIND_MASK == SECT_EH {
                let clause_size = if fat { 24 } else { 12 };
                if data.len() % clause_size != 0 {
                    return Err(bad(format!(
                        "exception section of {} bytes is no multiple of {clause_size}",
                        data.len()
                    )));
                }
                let mut c = Reader {
                    bytes: data,
                    pos: 0,
                };
                while c.pos < data.len() {
                    let (flags, try_off, try_len, h_off, h_len, extra) = if fat {
                        (c.u32()?, c.u32()?, c.u32()?, c.u32()?, c.u32()?, c.u32()?)
                    } else {
                        (
                            c.u16()? as u32,
                            c.u16()? as u32,
                            c.u8()? as u32,
                            c.u16()? as u32,
                            c.u8()? as u32,
                            c.u32()?,
                        )
                    };
                    let kind = match flags {
                        0 => ClauseKind::Catch(MdToken(extra)),
                        1 => ClauseKind::Filter(label_at(extra as i64, "filter start")?),
                        2 => ClauseKind::Finally,
                        4 => ClauseKind::Fault,
                        f => return Err(bad(format!("exception clause flags {f:#x}"))),
                    };
                    let (try_off, try_len, h_off, h_len) =
                        (try_off as i64, try_len as i64, h_off as i64, h_len as i64);
                    clauses.push(ExceptionClause {
                        kind,
                        try_start: label_at(try_off, "try start")?,
                        try_end: region_end(try_off + try_len, "try end")?,
                        handler_start: label_at(h_off, "handler start")?,
                        handler_end: region_end(h_off + h_len, "handler end")?,
                    });
                }
            }
            more = kind & SECT_MORE != 0;
            pos = r.pos;
        }

        Ok(MethodBody {
            format,
            max_stack,
            init_locals,
            local_var_sig: MdSignature(local_var_sig),
            clauses,
            instructions,
            next_fresh: 0,
        })
    }

    /// The instructions, in order.
    pub fn instructions(&self) -> &[Instruction] {
        &self.instructions
    }

    /// The instructions, to change opcodes and operands in place. Labels
    /// should stay unique: [`write`](Self::write) refuses duplicates.
    pub fn instructions_mut(&mut self) -> &mut [Instruction] {
        &mut self.instructions
    }

    /// A label no instruction of this body has yet.
    pub fn new_label(&mut self) -> Label {
        let l = Label(FRESH | self.next_fresh);
        self.next_fresh = (self.next_fresh + 1) & !FRESH;
        l
    }

    /// Index of the instruction with this label.
    pub fn index_of(&self, label: Label) -> Option<usize> {
        self.instructions.iter().position(|i| i.label == label)
    }

    /// Appends an instruction, returning its label.
    pub fn push(&mut self, opcode: OpCode, operand: Operand) -> Label {
        let label = self.new_label();
        self.instructions.push(Instruction {
            label,
            opcode,
            operand,
        });
        label
    }

    /// Appends an instruction under a label made earlier with
    /// [`new_label`](Self::new_label) (for forward branches).
    pub fn push_labeled(&mut self, label: Label, opcode: OpCode, operand: Operand) {
        self.instructions.push(Instruction {
            label,
            opcode,
            operand,
        });
    }

    /// Inserts `code` before the instruction at `index` (or at the end for
    /// `index == len`), returning the new labels.
    ///
    /// Branches and exception clauses that referred to the instruction at
    /// `index` keep referring to it, so the inserted code runs only when
    /// control falls into it from the instruction before (or, at index 0,
    /// on method entry): a loop back to the first instruction does not run
    /// an entry probe again, and a `try` that began at `index` does not
    /// grow to cover the inserted code.
    pub fn insert(&mut self, index: usize, code: &[(OpCode, Operand)]) -> Result<Vec<Label>> {
        if index > self.instructions.len() {
            return Err(Error::InvalidArgument(
                "insert index past the end of the body",
            ));
        }
        let mut labels = Vec::with_capacity(code.len());
        let mut new = Vec::with_capacity(code.len());
        for (opcode, operand) in code {
            let label = self.new_label();
            labels.push(label);
            new.push(Instruction {
                label,
                opcode: *opcode,
                operand: operand.clone(),
            });
        }
        self.instructions.splice(index..index, new);
        Ok(labels)
    }

    /// Inserts `code` at method entry (see [`insert`](Self::insert)).
    pub fn insert_at_entry(&mut self, code: &[(OpCode, Operand)]) -> Result<Vec<Label>> {
        self.insert(0, code)
    }

    /// Removes the instruction at `index`. Branches and exception clauses
    /// that referred to it refer to the instruction that follows it
    /// (exception regions may then end at [`Label::END`]); removing the last
    /// instruction while a branch targets it fails.
    pub fn remove(&mut self, index: usize) -> Result<Instruction> {
        let removed =
            self.instructions
                .get(index)
                .map(|i| i.label)
                .ok_or(Error::InvalidArgument(
                    "remove index past the end of the body",
                ))?;
        let next = self
            .instructions
            .get(index + 1)
            .map(|i| i.label)
            .unwrap_or(Label::END);
        let retarget = |l: &mut Label| {
            if *l == removed {
                *l = next;
            }
        };
        if next == Label::END {
            let targeted = self.instructions.iter().any(|i| match &i.operand {
                Operand::Target(t) => *t == removed,
                Operand::Switch(ts) => ts.contains(&removed),
                _ => false,
            });
            if targeted {
                return Err(Error::InvalidArgument(
                    "the last instruction is a branch target and cannot be removed",
                ));
            }
        }
        for i in &mut self.instructions {
            match &mut i.operand {
                Operand::Target(t) => retarget(t),
                Operand::Switch(ts) => ts.iter_mut().for_each(retarget),
                _ => {}
            }
        }
        for c in &mut self.clauses {
            retarget(&mut c.try_start);
            retarget(&mut c.try_end);
            retarget(&mut c.handler_start);
            retarget(&mut c.handler_end);
            if let ClauseKind::Filter(f) = &mut c.kind {
                retarget(f);
            }
        }
        Ok(self.instructions.remove(index))
    }

    /// Replaces opcode and operand of the instruction at `index`, keeping
    /// its label.
    pub fn replace(&mut self, index: usize, opcode: OpCode, operand: Operand) -> Result<()> {
        let i = self
            .instructions
            .get_mut(index)
            .ok_or(Error::InvalidArgument(
                "replace index past the end of the body",
            ))?;
        i.opcode = opcode;
        i.operand = operand;
        Ok(())
    }

    /// `true` if this body can be written with a tiny header.
    pub fn fits_tiny(&self, code_size: usize) -> bool {
        code_size < 64
            && self.max_stack <= 8
            && self.local_var_sig.0 == 0
            && !self.init_locals
            && self.clauses.is_empty()
    }

    /// Encodes the body: lays the code out (short branches whose target is
    /// out of `i8` range become long branches), chooses the header (the
    /// preferred format, upgraded to fat when tiny no longer fits), writes
    /// the exception clauses in the small format when every clause fits it,
    /// else in the fat one, and builds the old-to-new offset map.
    pub fn write(&self) -> Result<WrittenBody> {
        let (opcodes, offsets, code_size) = self.layout()?;
        let index: HashMap<Label, u32> = self
            .instructions
            .iter()
            .zip(&offsets)
            .map(|(i, o)| (i.label, *o))
            .collect();
        if index.len() != self.instructions.len() {
            return Err(Error::InvalidArgument("two instructions share a label"));
        }
        let target = |l: Label| -> Result<u32> {
            index.get(&l).copied().ok_or_else(|| {
                Error::Usage(format!(
                    "branch to {l:?}, which is no instruction of the body"
                ))
            })
        };
        let region = |l: Label| -> Result<u32> {
            if l == Label::END {
                Ok(code_size)
            } else {
                index.get(&l).copied().ok_or_else(|| {
                    Error::Usage(format!(
                        "exception region bound {l:?} is no instruction of the body"
                    ))
                })
            }
        };

        let mut code = Vec::with_capacity(code_size as usize);
        for ((ins, opcode), offset) in self.instructions.iter().zip(&opcodes).zip(&offsets) {
            let v = opcode.value();
            if v > 0xff {
                code.push(0xfe);
            }
            code.push(v as u8);
            let next = *offset as i64 + ins_size(*opcode, &ins.operand) as i64;
            let mismatch = || {
                Error::Usage(format!(
                    "operand {:?} does not fit {} ({:?})",
                    ins.operand,
                    opcode.name(),
                    opcode.operand()
                ))
            };
            match (opcode.operand(), &ins.operand) {
                (OperandKind::None, Operand::None) => {}
                (OperandKind::ShortInt, Operand::Int(n)) => {
                    code.push(i8::try_from(*n).map_err(|_| mismatch())? as u8)
                }
                (OperandKind::Int, Operand::Int(n)) => code.extend_from_slice(&n.to_le_bytes()),
                (OperandKind::Long, Operand::Long(n)) => code.extend_from_slice(&n.to_le_bytes()),
                (OperandKind::ShortFloat, Operand::Float32(b)) => {
                    code.extend_from_slice(&b.to_le_bytes())
                }
                (OperandKind::Float, Operand::Float64(b)) => {
                    code.extend_from_slice(&b.to_le_bytes())
                }
                (OperandKind::ShortVar, Operand::Var(n)) => {
                    code.push(u8::try_from(*n).map_err(|_| mismatch())?)
                }
                (OperandKind::Var, Operand::Var(n)) => code.extend_from_slice(&n.to_le_bytes()),
                (
                    OperandKind::Method
                    | OperandKind::Field
                    | OperandKind::Type
                    | OperandKind::Tok
                    | OperandKind::String
                    | OperandKind::Sig,
                    Operand::Token(t),
                ) => code.extend_from_slice(&t.0.to_le_bytes()),
                (OperandKind::ShortBranchTarget, Operand::Target(l)) => {
                    let d = target(*l)? as i64 - next;
                    // `layout` promoted every short branch that does not fit.
                    code.push(i8::try_from(d).map_err(|_| mismatch())? as u8);
                }
                (OperandKind::BranchTarget, Operand::Target(l)) => {
                    let d = target(*l)? as i64 - next;
                    code.extend_from_slice(&(d as i32).to_le_bytes());
                }
                (OperandKind::Switch, Operand::Switch(ts)) => {
                    let n = u32::try_from(ts.len()).map_err(|_| mismatch())?;
                    code.extend_from_slice(&n.to_le_bytes());
                    for l in ts {
                        let d = target(*l)? as i64 - next;
                        code.extend_from_slice(&(d as i32).to_le_bytes());
                    }
                }
                _ => return Err(mismatch()),
            }
        }
        debug_assert_eq!(code.len(), code_size as usize);

        // Exception clauses as (flags, try offset, try length, handler
        // offset, handler length, class token or filter offset).
        let mut clauses = Vec::with_capacity(self.clauses.len());
        for c in &self.clauses {
            let (ts, te) = (region(c.try_start)?, region(c.try_end)?);
            let (hs, he) = (region(c.handler_start)?, region(c.handler_end)?);
            if te < ts || he < hs {
                return Err(Error::Usage(format!(
                    "exception region ends before it starts: {c:?}"
                )));
            }
            let (flags, extra) = match c.kind {
                ClauseKind::Catch(t) => (0u32, t.0),
                ClauseKind::Filter(l) => (1, target(l)?),
                ClauseKind::Finally => (2, 0),
                ClauseKind::Fault => (4, 0),
            };
            clauses.push([flags, ts, te - ts, hs, he - hs, extra]);
        }

        let fat = self.format == HeaderFormat::Fat || !self.fits_tiny(code.len());
        let mut bytes = Vec::with_capacity(12 + code.len() + 4 + 24 * clauses.len());
        if fat {
            let mut flags = FAT | (3 << 12);
            if self.init_locals {
                flags |= INIT_LOCALS;
            }
            if !clauses.is_empty() {
                flags |= MORE_SECTS;
            }
            bytes.extend_from_slice(&flags.to_le_bytes());
            bytes.extend_from_slice(&self.max_stack.to_le_bytes());
            bytes.extend_from_slice(&code_size.to_le_bytes());
            bytes.extend_from_slice(&self.local_var_sig.0.to_le_bytes());
        } else {
            bytes.push(TINY | (code.len() as u8) << 2);
        }
        bytes.extend_from_slice(&code);
        if !clauses.is_empty() {
            while bytes.len() % 4 != 0 {
                bytes.push(0);
            }
            // The small format holds up to 20 clauses (data size is one byte)
            // with 16-bit offsets and 8-bit lengths.
            let small = clauses.len() <= 20
                && clauses.iter().all(|c| {
                    c[0] <= 0xffff
                        && c[1] <= 0xffff
                        && c[2] <= 0xff
                        && c[3] <= 0xffff
                        && c[4] <= 0xff
                });
            if small {
                bytes.push(SECT_EH);
                bytes.push((4 + 12 * clauses.len()) as u8);
                bytes.extend_from_slice(&[0, 0]);
                for c in &clauses {
                    bytes.extend_from_slice(&(c[0] as u16).to_le_bytes());
                    bytes.extend_from_slice(&(c[1] as u16).to_le_bytes());
                    bytes.push(c[2] as u8);
                    bytes.extend_from_slice(&(c[3] as u16).to_le_bytes());
                    bytes.push(c[4] as u8);
                    bytes.extend_from_slice(&c[5].to_le_bytes());
                }
            } else {
                let size = 4 + 24 * clauses.len();
                if size > 0x00ff_ffff {
                    return Err(Error::InvalidArgument("too many exception clauses"));
                }
                bytes.push(SECT_EH | SECT_FAT);
                bytes.extend_from_slice(&(size as u32).to_le_bytes()[..3]);
                for c in &clauses {
                    for v in c {
                        bytes.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }

        let mut map: Vec<IlMapEntry> = self
            .instructions
            .iter()
            .zip(&offsets)
            .filter_map(|(i, o)| {
                i.label.original_offset().map(|old| IlMapEntry {
                    old_offset: old,
                    new_offset: *o,
                    accurate: true,
                })
            })
            .collect();
        map.sort_by_key(|e| e.old_offset);
        Ok(WrittenBody {
            bytes,
            map,
            offsets,
            code_size,
            fat,
        })
    }

    /// Chooses short or long form for every branch and computes offsets:
    /// starts from the forms as given and promotes any short branch whose
    /// displacement does not fit in `i8` until nothing changes (promotion
    /// only grows the code, so this terminates).
    fn layout(&self) -> Result<(Vec<OpCode>, Vec<u32>, u32)> {
        let mut opcodes: Vec<OpCode> = self.instructions.iter().map(|i| i.opcode).collect();
        loop {
            let mut offsets = Vec::with_capacity(opcodes.len());
            let mut at: u64 = 0;
            for (i, op) in self.instructions.iter().zip(&opcodes) {
                offsets.push(
                    u32::try_from(at)
                        .map_err(|_| Error::InvalidArgument("code of 4 GiB or more"))?,
                );
                at += ins_size(*op, &i.operand) as u64;
            }
            let code_size = u32::try_from(at)
                .ok()
                .filter(|s| *s < FRESH)
                .ok_or(Error::InvalidArgument("code of 2 GiB or more"))?;
            let index: HashMap<Label, u32> = self
                .instructions
                .iter()
                .zip(&offsets)
                .map(|(i, o)| (i.label, *o))
                .collect();
            let mut changed = false;
            for (k, i) in self.instructions.iter().enumerate() {
                if opcodes[k].operand() != OperandKind::ShortBranchTarget {
                    continue;
                }
                if let Operand::Target(l) = &i.operand {
                    let Some(t) = index.get(l) else { continue };
                    let next = offsets[k] as i64 + ins_size(opcodes[k], &i.operand) as i64;
                    if i8::try_from(*t as i64 - next).is_err() {
                        if let Some(long) = opcodes[k].long_form() {
                            opcodes[k] = long;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                return Ok((opcodes, offsets, code_size));
            }
        }
    }
}

impl Default for MethodBody {
    fn default() -> Self {
        MethodBody::new()
    }
}

fn ins_size(opcode: OpCode, operand: &Operand) -> usize {
    let n = match (opcode.operand(), operand) {
        (OperandKind::Switch, Operand::Switch(t)) => 4 * t.len(),
        _ => 0,
    };
    opcode.size() + opcode.operand().size() + n
}

/// Decodes the code bytes into (offset, opcode, operand) with branch targets
/// as absolute offsets (not yet checked).
fn decode_code(code: &[u8]) -> Result<Vec<(u32, OpCode, RawOperand)>> {
    let mut r = Reader {
        bytes: code,
        pos: 0,
    };
    let mut out = Vec::new();
    while r.pos < code.len() {
        let offset = r.pos as u32;
        let b = r.u8()?;
        let value = if b == 0xfe {
            0xfe00 | r.u8()? as u16
        } else {
            b as u16
        };
        let opcode = OpCode::from_value(value)
            .ok_or_else(|| bad(format!("unknown opcode {value:#x} at IL_{offset:04x}")))?;
        let operand = match opcode.operand() {
            OperandKind::None => RawOperand::Plain(Operand::None),
            OperandKind::ShortInt => RawOperand::Plain(Operand::Int(r.u8()? as i8 as i32)),
            OperandKind::Int => RawOperand::Plain(Operand::Int(r.u32()? as i32)),
            OperandKind::Long => RawOperand::Plain(Operand::Long(r.u64()? as i64)),
            OperandKind::ShortFloat => RawOperand::Plain(Operand::Float32(r.u32()?)),
            OperandKind::Float => RawOperand::Plain(Operand::Float64(r.u64()?)),
            OperandKind::ShortVar => RawOperand::Plain(Operand::Var(r.u8()? as u16)),
            OperandKind::Var => RawOperand::Plain(Operand::Var(r.u16()?)),
            OperandKind::Method
            | OperandKind::Field
            | OperandKind::Type
            | OperandKind::Tok
            | OperandKind::String
            | OperandKind::Sig => RawOperand::Plain(Operand::Token(MdToken(r.u32()?))),
            OperandKind::ShortBranchTarget => {
                let d = r.u8()? as i8 as i64;
                RawOperand::Target(r.pos as i64 + d)
            }
            OperandKind::BranchTarget => {
                let d = r.u32()? as i32 as i64;
                RawOperand::Target(r.pos as i64 + d)
            }
            OperandKind::Switch => {
                let n = r.u32()? as usize;
                let table = r.take(n.checked_mul(4).ok_or_else(|| bad("switch too large"))?)?;
                let end = r.pos as i64;
                RawOperand::Switch(
                    table
                        .chunks_exact(4)
                        .map(|c| end + i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                        .collect(),
                )
            }
        };
        out.push((offset, opcode, operand));
    }
    Ok(out)
}
