//! The return registers a leave hook can read a value from: what the
//! WithInfo leave path (`frame.rs`) and the .NET Core 3.x leave stub
//! (`legacy_stub.rs`) share.

/// The four System V x86-64 return registers as the runtime's leave stub
/// saved them (the low 8 bytes of `xmm0` and `xmm1`), laid out in every
/// order a struct of one or two eightbytes can take, so that a value
/// returned in any pair is one contiguous slice: `rax rdx`, `xmm0 xmm1`,
/// `rax xmm0`, `xmm0 rax`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReturnRegisters {
    bytes: [u8; 64],
}

/// Where a struct's eightbyte travels under the System V x86-64 ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EightByte {
    /// In a general-purpose register (`rax`, then `rdx`).
    Integer,
    /// In an SSE register (`xmm0`, then `xmm1`).
    Sse,
}

impl ReturnRegisters {
    /// From the saved registers.
    #[cfg_attr(not(all(target_arch = "x86_64", unix)), allow(dead_code))]
    pub(crate) fn new(rax: u64, rdx: u64, xmm0: u64, xmm1: u64) -> Self {
        let mut bytes = [0u8; 64];
        for (slot, word) in bytes
            .chunks_exact_mut(8)
            .zip([rax, rdx, xmm0, xmm1, rax, xmm0, xmm0, rax])
        {
            slot.copy_from_slice(&word.to_ne_bytes());
        }
        ReturnRegisters { bytes }
    }

    /// The bytes of a value of `len` bytes whose eightbytes are classified
    /// `classes` (one or two), as the registers hold it; `None` when the
    /// length does not fit the classification.
    pub(crate) fn value(&self, classes: &[EightByte], len: usize) -> Option<&[u8]> {
        use EightByte::{Integer, Sse};
        let start = match classes {
            [Integer] | [Integer, Integer] => 0,
            [Sse] | [Sse, Sse] => 16,
            [Integer, Sse] => 32,
            [Sse, Integer] => 48,
            _ => return None,
        };
        if len == 0 || len > 8 * classes.len() || len <= 8 * (classes.len() - 1) {
            return None;
        }
        self.bytes.get(start..start + len)
    }
}
