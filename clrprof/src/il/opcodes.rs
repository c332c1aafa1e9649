//! The CIL opcode table (ECMA-335 Partition III): every one- and two-byte
//! opcode with its name, operand kind, stack behaviour and control flow.

use core::fmt;

/// What follows an opcode in the instruction stream (ECMA-335 III.1.9 and
/// the operand-type names of the runtime's opcode table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperandKind {
    /// No operand (`InlineNone`).
    None,
    /// A signed 8-bit branch displacement (`ShortInlineBrTarget`).
    ShortBranchTarget,
    /// A signed 32-bit branch displacement (`InlineBrTarget`).
    BranchTarget,
    /// An 8-bit integer (`ShortInlineI`): signed for `ldc.i4.s`, an
    /// alignment or check mask for `unaligned.` / `no.`.
    ShortInt,
    /// A 32-bit integer (`InlineI`).
    Int,
    /// A 64-bit integer (`InlineI8`).
    Long,
    /// A 32-bit float (`ShortInlineR`).
    ShortFloat,
    /// A 64-bit float (`InlineR`).
    Float,
    /// An 8-bit argument or local index (`ShortInlineVar`).
    ShortVar,
    /// A 16-bit argument or local index (`InlineVar`).
    Var,
    /// A MethodDef, MemberRef or MethodSpec token (`InlineMethod`).
    Method,
    /// A FieldDef or MemberRef token (`InlineField`).
    Field,
    /// A TypeDef, TypeRef or TypeSpec token (`InlineType`).
    Type,
    /// Any of the method, field or type tokens (`InlineTok`, for `ldtoken`).
    Tok,
    /// A user-string token (`InlineString`).
    String,
    /// A StandAloneSig token (`InlineSig`, for `calli`).
    Sig,
    /// A count N and N signed 32-bit displacements (`InlineSwitch`).
    Switch,
}

impl OperandKind {
    /// Size of the operand in bytes; for `Switch` the size of the count only.
    pub const fn size(self) -> usize {
        match self {
            OperandKind::None => 0,
            OperandKind::ShortBranchTarget | OperandKind::ShortInt | OperandKind::ShortVar => 1,
            OperandKind::Var => 2,
            OperandKind::Long | OperandKind::Float => 8,
            _ => 4,
        }
    }
}

/// How many stack slots an instruction pops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pop {
    /// A fixed number.
    Fixed(u8),
    /// Depends on a signature (`call`, `callvirt`, `newobj`, `calli`) or on
    /// the method's return type (`ret`).
    Signature,
}

/// How many stack slots an instruction pushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Push {
    /// A fixed number.
    Fixed(u8),
    /// Depends on the callee's return type (`call`, `callvirt`, `calli`).
    Signature,
}

/// Where control goes after an instruction (the runtime's `FlowControl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowControl {
    /// To the next instruction.
    Next,
    /// A call; then to the next instruction.
    Call,
    /// Unconditionally to the target (`br`, `leave`).
    Branch,
    /// To the target(s) or the next instruction.
    CondBranch,
    /// Leaves the method or the handler: `ret`, `jmp`, `endfinally`,
    /// `endfilter`.
    Return,
    /// `throw`, `rethrow`.
    Throw,
    /// `break`.
    Break,
    /// A prefix: applies to the next instruction.
    Meta,
}

/// Everything the table knows about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpCodeInfo {
    /// The opcode.
    pub opcode: OpCode,
    /// Its assembler name, e.g. `ldc.i4.s`.
    pub name: &'static str,
    /// Its operand.
    pub operand: OperandKind,
    /// What it pops.
    pub pop: Pop,
    /// What it pushes.
    pub push: Push,
    /// Its control flow.
    pub flow: FlowControl,
}

/// A CIL opcode: `0x00..=0xE0` for one-byte opcodes, `0xFE00 | b` for the
/// two-byte ones (first byte `0xFE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpCode(u16);

impl OpCode {
    /// The opcode with this value, if the table has it.
    pub fn from_value(value: u16) -> Option<OpCode> {
        lookup(value).map(|i| i.opcode)
    }

    /// The numeric value (two-byte opcodes as `0xFExx`).
    pub const fn value(self) -> u16 {
        self.0
    }

    /// Encoded size of the opcode itself: 1 or 2 bytes.
    pub const fn size(self) -> usize {
        if self.0 > 0xff {
            2
        } else {
            1
        }
    }

    /// The table entry. Every `OpCode` value comes from the table, so this
    /// always exists.
    pub fn info(self) -> &'static OpCodeInfo {
        match lookup(self.0) {
            Some(i) => i,
            None => &NOP_INFO,
        }
    }

    /// The assembler name.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The operand kind.
    pub fn operand(self) -> OperandKind {
        self.info().operand
    }

    /// The control flow.
    pub fn flow(self) -> FlowControl {
        self.info().flow
    }

    /// `true` for branches (short, long, `leave` and `switch`).
    pub fn is_branch(self) -> bool {
        matches!(
            self.operand(),
            OperandKind::ShortBranchTarget | OperandKind::BranchTarget | OperandKind::Switch
        )
    }

    /// For a short branch, its long form (`br.s` → `br`, `leave.s` → `leave`).
    pub fn long_form(self) -> Option<OpCode> {
        match self.0 {
            0x2b..=0x37 => Some(OpCode(self.0 + 0x0d)),
            0xde => Some(OpCode::LEAVE),
            _ => None,
        }
    }

    /// For a long branch, its short form.
    pub fn short_form(self) -> Option<OpCode> {
        match self.0 {
            0x38..=0x44 => Some(OpCode(self.0 - 0x0d)),
            0xdd => Some(OpCode::LEAVE_S),
            _ => None,
        }
    }

    /// Every opcode of the table, in value order.
    pub fn all() -> impl Iterator<Item = OpCode> {
        TABLE.iter().map(|i| i.opcode)
    }
}

impl fmt::Debug for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! opcodes {
    ($($konst:ident = $value:literal, $name:literal, $operand:ident, $pop:expr, $push:expr, $flow:ident;)*) => {
        impl OpCode {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $konst: OpCode = OpCode($value);
            )*
        }

        /// The whole table, in value order.
        pub static TABLE: &[OpCodeInfo] = &[
            $(OpCodeInfo {
                opcode: OpCode($value),
                name: $name,
                operand: OperandKind::$operand,
                pop: $pop,
                push: $push,
                flow: FlowControl::$flow,
            },)*
        ];

        fn lookup(value: u16) -> Option<&'static OpCodeInfo> {
            // One-byte opcodes index the first part of the table directly
            // through this map; built once at compile time.
            const fn index_of(value: u16) -> i16 {
                let values: &[u16] = &[$($value),*];
                let mut i = 0;
                while i < values.len() {
                    if values[i] == value {
                        return i as i16;
                    }
                    i += 1;
                }
                -1
            }
            const ONE: [i16; 256] = {
                let mut m = [-1i16; 256];
                let mut v = 0;
                while v < 256 {
                    m[v] = index_of(v as u16);
                    v += 1;
                }
                m
            };
            const TWO: [i16; 256] = {
                let mut m = [-1i16; 256];
                let mut v = 0;
                while v < 256 {
                    m[v] = index_of(0xfe00 | v as u16);
                    v += 1;
                }
                m
            };
            let slot = match value {
                0..=0xff => ONE[value as usize],
                0xfe00..=0xfeff => TWO[(value & 0xff) as usize],
                _ => -1,
            };
            usize::try_from(slot).ok().and_then(|i| TABLE.get(i))
        }
    };
}

static NOP_INFO: OpCodeInfo = OpCodeInfo {
    opcode: OpCode(0),
    name: "nop",
    operand: OperandKind::None,
    pop: Pop::Fixed(0),
    push: Push::Fixed(0),
    flow: FlowControl::Next,
};

const P0: Pop = Pop::Fixed(0);
const P1: Pop = Pop::Fixed(1);
const P2: Pop = Pop::Fixed(2);
const P3: Pop = Pop::Fixed(3);
const PV: Pop = Pop::Signature;
const U0: Push = Push::Fixed(0);
const U1: Push = Push::Fixed(1);
const U2: Push = Push::Fixed(2);
const UV: Push = Push::Signature;

opcodes! {
    NOP = 0x00, "nop", None, P0, U0, Next;
    BREAK = 0x01, "break", None, P0, U0, Break;
    LDARG_0 = 0x02, "ldarg.0", None, P0, U1, Next;
    LDARG_1 = 0x03, "ldarg.1", None, P0, U1, Next;
    LDARG_2 = 0x04, "ldarg.2", None, P0, U1, Next;
    LDARG_3 = 0x05, "ldarg.3", None, P0, U1, Next;
    LDLOC_0 = 0x06, "ldloc.0", None, P0, U1, Next;
    LDLOC_1 = 0x07, "ldloc.1", None, P0, U1, Next;
    LDLOC_2 = 0x08, "ldloc.2", None, P0, U1, Next;
    LDLOC_3 = 0x09, "ldloc.3", None, P0, U1, Next;
    STLOC_0 = 0x0a, "stloc.0", None, P1, U0, Next;
    STLOC_1 = 0x0b, "stloc.1", None, P1, U0, Next;
    STLOC_2 = 0x0c, "stloc.2", None, P1, U0, Next;
    STLOC_3 = 0x0d, "stloc.3", None, P1, U0, Next;
    LDARG_S = 0x0e, "ldarg.s", ShortVar, P0, U1, Next;
    LDARGA_S = 0x0f, "ldarga.s", ShortVar, P0, U1, Next;
    STARG_S = 0x10, "starg.s", ShortVar, P1, U0, Next;
    LDLOC_S = 0x11, "ldloc.s", ShortVar, P0, U1, Next;
    LDLOCA_S = 0x12, "ldloca.s", ShortVar, P0, U1, Next;
    STLOC_S = 0x13, "stloc.s", ShortVar, P1, U0, Next;
    LDNULL = 0x14, "ldnull", None, P0, U1, Next;
    LDC_I4_M1 = 0x15, "ldc.i4.m1", None, P0, U1, Next;
    LDC_I4_0 = 0x16, "ldc.i4.0", None, P0, U1, Next;
    LDC_I4_1 = 0x17, "ldc.i4.1", None, P0, U1, Next;
    LDC_I4_2 = 0x18, "ldc.i4.2", None, P0, U1, Next;
    LDC_I4_3 = 0x19, "ldc.i4.3", None, P0, U1, Next;
    LDC_I4_4 = 0x1a, "ldc.i4.4", None, P0, U1, Next;
    LDC_I4_5 = 0x1b, "ldc.i4.5", None, P0, U1, Next;
    LDC_I4_6 = 0x1c, "ldc.i4.6", None, P0, U1, Next;
    LDC_I4_7 = 0x1d, "ldc.i4.7", None, P0, U1, Next;
    LDC_I4_8 = 0x1e, "ldc.i4.8", None, P0, U1, Next;
    LDC_I4_S = 0x1f, "ldc.i4.s", ShortInt, P0, U1, Next;
    LDC_I4 = 0x20, "ldc.i4", Int, P0, U1, Next;
    LDC_I8 = 0x21, "ldc.i8", Long, P0, U1, Next;
    LDC_R4 = 0x22, "ldc.r4", ShortFloat, P0, U1, Next;
    LDC_R8 = 0x23, "ldc.r8", Float, P0, U1, Next;
    DUP = 0x25, "dup", None, P1, U2, Next;
    POP = 0x26, "pop", None, P1, U0, Next;
    JMP = 0x27, "jmp", Method, P0, U0, Return;
    CALL = 0x28, "call", Method, PV, UV, Call;
    CALLI = 0x29, "calli", Sig, PV, UV, Call;
    RET = 0x2a, "ret", None, PV, U0, Return;
    BR_S = 0x2b, "br.s", ShortBranchTarget, P0, U0, Branch;
    BRFALSE_S = 0x2c, "brfalse.s", ShortBranchTarget, P1, U0, CondBranch;
    BRTRUE_S = 0x2d, "brtrue.s", ShortBranchTarget, P1, U0, CondBranch;
    BEQ_S = 0x2e, "beq.s", ShortBranchTarget, P2, U0, CondBranch;
    BGE_S = 0x2f, "bge.s", ShortBranchTarget, P2, U0, CondBranch;
    BGT_S = 0x30, "bgt.s", ShortBranchTarget, P2, U0, CondBranch;
    BLE_S = 0x31, "ble.s", ShortBranchTarget, P2, U0, CondBranch;
    BLT_S = 0x32, "blt.s", ShortBranchTarget, P2, U0, CondBranch;
    BNE_UN_S = 0x33, "bne.un.s", ShortBranchTarget, P2, U0, CondBranch;
    BGE_UN_S = 0x34, "bge.un.s", ShortBranchTarget, P2, U0, CondBranch;
    BGT_UN_S = 0x35, "bgt.un.s", ShortBranchTarget, P2, U0, CondBranch;
    BLE_UN_S = 0x36, "ble.un.s", ShortBranchTarget, P2, U0, CondBranch;
    BLT_UN_S = 0x37, "blt.un.s", ShortBranchTarget, P2, U0, CondBranch;
    BR = 0x38, "br", BranchTarget, P0, U0, Branch;
    BRFALSE = 0x39, "brfalse", BranchTarget, P1, U0, CondBranch;
    BRTRUE = 0x3a, "brtrue", BranchTarget, P1, U0, CondBranch;
    BEQ = 0x3b, "beq", BranchTarget, P2, U0, CondBranch;
    BGE = 0x3c, "bge", BranchTarget, P2, U0, CondBranch;
    BGT = 0x3d, "bgt", BranchTarget, P2, U0, CondBranch;
    BLE = 0x3e, "ble", BranchTarget, P2, U0, CondBranch;
    BLT = 0x3f, "blt", BranchTarget, P2, U0, CondBranch;
    BNE_UN = 0x40, "bne.un", BranchTarget, P2, U0, CondBranch;
    BGE_UN = 0x41, "bge.un", BranchTarget, P2, U0, CondBranch;
    BGT_UN = 0x42, "bgt.un", BranchTarget, P2, U0, CondBranch;
    BLE_UN = 0x43, "ble.un", BranchTarget, P2, U0, CondBranch;
    BLT_UN = 0x44, "blt.un", BranchTarget, P2, U0, CondBranch;
    SWITCH = 0x45, "switch", Switch, P1, U0, CondBranch;
    LDIND_I1 = 0x46, "ldind.i1", None, P1, U1, Next;
    LDIND_U1 = 0x47, "ldind.u1", None, P1, U1, Next;
    LDIND_I2 = 0x48, "ldind.i2", None, P1, U1, Next;
    LDIND_U2 = 0x49, "ldind.u2", None, P1, U1, Next;
    LDIND_I4 = 0x4a, "ldind.i4", None, P1, U1, Next;
    LDIND_U4 = 0x4b, "ldind.u4", None, P1, U1, Next;
    LDIND_I8 = 0x4c, "ldind.i8", None, P1, U1, Next;
    LDIND_I = 0x4d, "ldind.i", None, P1, U1, Next;
    LDIND_R4 = 0x4e, "ldind.r4", None, P1, U1, Next;
    LDIND_R8 = 0x4f, "ldind.r8", None, P1, U1, Next;
    LDIND_REF = 0x50, "ldind.ref", None, P1, U1, Next;
    STIND_REF = 0x51, "stind.ref", None, P2, U0, Next;
    STIND_I1 = 0x52, "stind.i1", None, P2, U0, Next;
    STIND_I2 = 0x53, "stind.i2", None, P2, U0, Next;
    STIND_I4 = 0x54, "stind.i4", None, P2, U0, Next;
    STIND_I8 = 0x55, "stind.i8", None, P2, U0, Next;
    STIND_R4 = 0x56, "stind.r4", None, P2, U0, Next;
    STIND_R8 = 0x57, "stind.r8", None, P2, U0, Next;
    ADD = 0x58, "add", None, P2, U1, Next;
    SUB = 0x59, "sub", None, P2, U1, Next;
    MUL = 0x5a, "mul", None, P2, U1, Next;
    DIV = 0x5b, "div", None, P2, U1, Next;
    DIV_UN = 0x5c, "div.un", None, P2, U1, Next;
    REM = 0x5d, "rem", None, P2, U1, Next;
    REM_UN = 0x5e, "rem.un", None, P2, U1, Next;
    AND = 0x5f, "and", None, P2, U1, Next;
    OR = 0x60, "or", None, P2, U1, Next;
    XOR = 0x61, "xor", None, P2, U1, Next;
    SHL = 0x62, "shl", None, P2, U1, Next;
    SHR = 0x63, "shr", None, P2, U1, Next;
    SHR_UN = 0x64, "shr.un", None, P2, U1, Next;
    NEG = 0x65, "neg", None, P1, U1, Next;
    NOT = 0x66, "not", None, P1, U1, Next;
    CONV_I1 = 0x67, "conv.i1", None, P1, U1, Next;
    CONV_I2 = 0x68, "conv.i2", None, P1, U1, Next;
    CONV_I4 = 0x69, "conv.i4", None, P1, U1, Next;
    CONV_I8 = 0x6a, "conv.i8", None, P1, U1, Next;
    CONV_R4 = 0x6b, "conv.r4", None, P1, U1, Next;
    CONV_R8 = 0x6c, "conv.r8", None, P1, U1, Next;
    CONV_U4 = 0x6d, "conv.u4", None, P1, U1, Next;
    CONV_U8 = 0x6e, "conv.u8", None, P1, U1, Next;
    CALLVIRT = 0x6f, "callvirt", Method, PV, UV, Call;
    CPOBJ = 0x70, "cpobj", Type, P2, U0, Next;
    LDOBJ = 0x71, "ldobj", Type, P1, U1, Next;
    LDSTR = 0x72, "ldstr", String, P0, U1, Next;
    NEWOBJ = 0x73, "newobj", Method, PV, U1, Call;
    CASTCLASS = 0x74, "castclass", Type, P1, U1, Next;
    ISINST = 0x75, "isinst", Type, P1, U1, Next;
    CONV_R_UN = 0x76, "conv.r.un", None, P1, U1, Next;
    UNBOX = 0x79, "unbox", Type, P1, U1, Next;
    THROW = 0x7a, "throw", None, P1, U0, Throw;
    LDFLD = 0x7b, "ldfld", Field, P1, U1, Next;
    LDFLDA = 0x7c, "ldflda", Field, P1, U1, Next;
    STFLD = 0x7d, "stfld", Field, P2, U0, Next;
    LDSFLD = 0x7e, "ldsfld", Field, P0, U1, Next;
    LDSFLDA = 0x7f, "ldsflda", Field, P0, U1, Next;
    STSFLD = 0x80, "stsfld", Field, P1, U0, Next;
    STOBJ = 0x81, "stobj", Type, P2, U0, Next;
    CONV_OVF_I1_UN = 0x82, "conv.ovf.i1.un", None, P1, U1, Next;
    CONV_OVF_I2_UN = 0x83, "conv.ovf.i2.un", None, P1, U1, Next;
    CONV_OVF_I4_UN = 0x84, "conv.ovf.i4.un", None, P1, U1, Next;
    CONV_OVF_I8_UN = 0x85, "conv.ovf.i8.un", None, P1, U1, Next;
    CONV_OVF_U1_UN = 0x86, "conv.ovf.u1.un", None, P1, U1, Next;
    CONV_OVF_U2_UN = 0x87, "conv.ovf.u2.un", None, P1, U1, Next;
    CONV_OVF_U4_UN = 0x88, "conv.ovf.u4.un", None, P1, U1, Next;
    CONV_OVF_U8_UN = 0x89, "conv.ovf.u8.un", None, P1, U1, Next;
    CONV_OVF_I_UN = 0x8a, "conv.ovf.i.un", None, P1, U1, Next;
    CONV_OVF_U_UN = 0x8b, "conv.ovf.u.un", None, P1, U1, Next;
    BOX = 0x8c, "box", Type, P1, U1, Next;
    NEWARR = 0x8d, "newarr", Type, P1, U1, Next;
    LDLEN = 0x8e, "ldlen", None, P1, U1, Next;
    LDELEMA = 0x8f, "ldelema", Type, P2, U1, Next;
    LDELEM_I1 = 0x90, "ldelem.i1", None, P2, U1, Next;
    LDELEM_U1 = 0x91, "ldelem.u1", None, P2, U1, Next;
    LDELEM_I2 = 0x92, "ldelem.i2", None, P2, U1, Next;
    LDELEM_U2 = 0x93, "ldelem.u2", None, P2, U1, Next;
    LDELEM_I4 = 0x94, "ldelem.i4", None, P2, U1, Next;
    LDELEM_U4 = 0x95, "ldelem.u4", None, P2, U1, Next;
    LDELEM_I8 = 0x96, "ldelem.i8", None, P2, U1, Next;
    LDELEM_I = 0x97, "ldelem.i", None, P2, U1, Next;
    LDELEM_R4 = 0x98, "ldelem.r4", None, P2, U1, Next;
    LDELEM_R8 = 0x99, "ldelem.r8", None, P2, U1, Next;
    LDELEM_REF = 0x9a, "ldelem.ref", None, P2, U1, Next;
    STELEM_I = 0x9b, "stelem.i", None, P3, U0, Next;
    STELEM_I1 = 0x9c, "stelem.i1", None, P3, U0, Next;
    STELEM_I2 = 0x9d, "stelem.i2", None, P3, U0, Next;
    STELEM_I4 = 0x9e, "stelem.i4", None, P3, U0, Next;
    STELEM_I8 = 0x9f, "stelem.i8", None, P3, U0, Next;
    STELEM_R4 = 0xa0, "stelem.r4", None, P3, U0, Next;
    STELEM_R8 = 0xa1, "stelem.r8", None, P3, U0, Next;
    STELEM_REF = 0xa2, "stelem.ref", None, P3, U0, Next;
    LDELEM = 0xa3, "ldelem", Type, P2, U1, Next;
    STELEM = 0xa4, "stelem", Type, P3, U0, Next;
    UNBOX_ANY = 0xa5, "unbox.any", Type, P1, U1, Next;
    CONV_OVF_I1 = 0xb3, "conv.ovf.i1", None, P1, U1, Next;
    CONV_OVF_U1 = 0xb4, "conv.ovf.u1", None, P1, U1, Next;
    CONV_OVF_I2 = 0xb5, "conv.ovf.i2", None, P1, U1, Next;
    CONV_OVF_U2 = 0xb6, "conv.ovf.u2", None, P1, U1, Next;
    CONV_OVF_I4 = 0xb7, "conv.ovf.i4", None, P1, U1, Next;
    CONV_OVF_U4 = 0xb8, "conv.ovf.u4", None, P1, U1, Next;
    CONV_OVF_I8 = 0xb9, "conv.ovf.i8", None, P1, U1, Next;
    CONV_OVF_U8 = 0xba, "conv.ovf.u8", None, P1, U1, Next;
    REFANYVAL = 0xc2, "refanyval", Type, P1, U1, Next;
    CKFINITE = 0xc3, "ckfinite", None, P1, U1, Next;
    MKREFANY = 0xc6, "mkrefany", Type, P1, U1, Next;
    LDTOKEN = 0xd0, "ldtoken", Tok, P0, U1, Next;
    CONV_U2 = 0xd1, "conv.u2", None, P1, U1, Next;
    CONV_U1 = 0xd2, "conv.u1", None, P1, U1, Next;
    CONV_I = 0xd3, "conv.i", None, P1, U1, Next;
    CONV_OVF_I = 0xd4, "conv.ovf.i", None, P1, U1, Next;
    CONV_OVF_U = 0xd5, "conv.ovf.u", None, P1, U1, Next;
    ADD_OVF = 0xd6, "add.ovf", None, P2, U1, Next;
    ADD_OVF_UN = 0xd7, "add.ovf.un", None, P2, U1, Next;
    MUL_OVF = 0xd8, "mul.ovf", None, P2, U1, Next;
    MUL_OVF_UN = 0xd9, "mul.ovf.un", None, P2, U1, Next;
    SUB_OVF = 0xda, "sub.ovf", None, P2, U1, Next;
    SUB_OVF_UN = 0xdb, "sub.ovf.un", None, P2, U1, Next;
    ENDFINALLY = 0xdc, "endfinally", None, P0, U0, Return;
    LEAVE = 0xdd, "leave", BranchTarget, P0, U0, Branch;
    LEAVE_S = 0xde, "leave.s", ShortBranchTarget, P0, U0, Branch;
    STIND_I = 0xdf, "stind.i", None, P2, U0, Next;
    CONV_U = 0xe0, "conv.u", None, P1, U1, Next;
    ARGLIST = 0xfe00, "arglist", None, P0, U1, Next;
    CEQ = 0xfe01, "ceq", None, P2, U1, Next;
    CGT = 0xfe02, "cgt", None, P2, U1, Next;
    CGT_UN = 0xfe03, "cgt.un", None, P2, U1, Next;
    CLT = 0xfe04, "clt", None, P2, U1, Next;
    CLT_UN = 0xfe05, "clt.un", None, P2, U1, Next;
    LDFTN = 0xfe06, "ldftn", Method, P0, U1, Next;
    LDVIRTFTN = 0xfe07, "ldvirtftn", Method, P1, U1, Next;
    LDARG = 0xfe09, "ldarg", Var, P0, U1, Next;
    LDARGA = 0xfe0a, "ldarga", Var, P0, U1, Next;
    STARG = 0xfe0b, "starg", Var, P1, U0, Next;
    LDLOC = 0xfe0c, "ldloc", Var, P0, U1, Next;
    LDLOCA = 0xfe0d, "ldloca", Var, P0, U1, Next;
    STLOC = 0xfe0e, "stloc", Var, P1, U0, Next;
    LOCALLOC = 0xfe0f, "localloc", None, P1, U1, Next;
    ENDFILTER = 0xfe11, "endfilter", None, P1, U0, Return;
    UNALIGNED = 0xfe12, "unaligned.", ShortInt, P0, U0, Meta;
    VOLATILE = 0xfe13, "volatile.", None, P0, U0, Meta;
    TAILCALL = 0xfe14, "tail.", None, P0, U0, Meta;
    INITOBJ = 0xfe15, "initobj", Type, P1, U0, Next;
    CONSTRAINED = 0xfe16, "constrained.", Type, P0, U0, Meta;
    CPBLK = 0xfe17, "cpblk", None, P3, U0, Next;
    INITBLK = 0xfe18, "initblk", None, P3, U0, Next;
    NO = 0xfe19, "no.", ShortInt, P0, U0, Meta;
    RETHROW = 0xfe1a, "rethrow", None, P0, U0, Throw;
    SIZEOF = 0xfe1c, "sizeof", Type, P0, U1, Next;
    REFANYTYPE = 0xfe1d, "refanytype", None, P1, U1, Next;
    READONLY = 0xfe1e, "readonly.", None, P0, U0, Meta;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_complete() {
        let values: Vec<u16> = TABLE.iter().map(|i| i.opcode.value()).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(values, sorted);
        // The holes of the one-byte table (ECMA-335 III.1.2.1 leaves them
        // unused) and of the 0xFE page.
        let one_byte_holes: Vec<u16> = (0..=0xe0u16).filter(|v| !values.contains(v)).collect();
        let mut expected: Vec<u16> = vec![0x24, 0x77, 0x78];
        expected.extend(0xa6..=0xb2);
        expected.extend(0xbb..=0xc1);
        expected.extend([0xc4, 0xc5]);
        expected.extend(0xc7..=0xcf);
        assert_eq!(one_byte_holes, expected);
        let two_byte_holes: Vec<u16> = (0xfe00..=0xfe1eu16)
            .filter(|v| !values.contains(v))
            .collect();
        assert_eq!(two_byte_holes, vec![0xfe08, 0xfe10, 0xfe1b]);
        assert_eq!(values.len(), 219);
        for v in 0..=0xffffu16 {
            let found = OpCode::from_value(v);
            assert_eq!(found.is_some(), values.contains(&v), "{v:#x}");
            if let Some(op) = found {
                assert_eq!(op.value(), v);
                assert_eq!(op.info().opcode, op);
            }
        }
    }

    #[test]
    fn short_and_long_branches_pair_up() {
        let shorts: Vec<OpCode> = OpCode::all()
            .filter(|o| o.operand() == OperandKind::ShortBranchTarget)
            .collect();
        assert_eq!(shorts.len(), 14);
        for s in shorts {
            let l = s.long_form().unwrap();
            assert_eq!(l.operand(), OperandKind::BranchTarget);
            assert_eq!(l.short_form(), Some(s));
            assert_eq!(format!("{s}"), format!("{l}.s"));
            assert_eq!(s.info().pop, l.info().pop);
        }
    }

    #[test]
    fn names_are_known_values() {
        assert_eq!(OpCode::LDC_I4_S.name(), "ldc.i4.s");
        assert_eq!(OpCode::CALLI.value(), 0x29);
        assert_eq!(OpCode::CEQ.size(), 2);
        assert_eq!(OpCode::READONLY.value(), 0xfe1e);
        assert_eq!(OpCode::SWITCH.operand(), OperandKind::Switch);
    }
}
