//! IL rewriting: method bodies, the CIL opcode table, stack analysis, a
//! structural verifier, and ReJIT.
//!
//! The usual flow, at `JITCompilationStarted` of a method to instrument:
//! 1. [`ProfilerInfo::il_function_body`] and [`MethodBody::parse`];
//! 2. edit: [`MethodBody::insert`], [`MethodBody::remove`], ... (branches
//!    and exception clauses follow by label);
//! 3. [`stack::recompute_max_stack`] with the module's call sites
//!    ([`MetaDataCallSites`]);
//! 4. [`MethodBody::write`], copy into memory from
//!    [`ProfilerInfo::il_function_body_allocator`] and
//!    [`ProfilerInfo::set_il_function_body`] (`unsafe`: the JIT runs
//!    whatever IL it is given, and [`verify()`] checks structure and stack
//!    depth, not types; the caller states why the body is type-safe.
//!    Safe code will go through the method-wrapping layer of DESIGN.md
//!    decision 15, which builds and verifies bodies of known shapes);
//! 5. [`ProfilerInfo::set_il_instrumented_code_map`] with
//!    [`WrittenBody::map`] so IL offsets in stack traces and debuggers keep
//!    meaning the original IL.
//!
//! With ReJIT ([`rejit`]) the same body is handed to
//! [`FunctionControl::set_il_function_body`](crate::rejit::FunctionControl::set_il_function_body)
//! from `GetReJITParameters` instead.
//!
//! [`ProfilerInfo::il_function_body`]: crate::ProfilerInfo::il_function_body
//! [`ProfilerInfo::il_function_body_allocator`]: crate::ProfilerInfo::il_function_body_allocator
//! [`ProfilerInfo::set_il_function_body`]: crate::ProfilerInfo::set_il_function_body
//! [`ProfilerInfo::set_il_instrumented_code_map`]: crate::ProfilerInfo::set_il_instrumented_code_map

pub mod body;
pub mod opcodes;
pub mod rejit;
pub mod stack;
pub mod verify;

pub use body::{
    ClauseKind, ExceptionClause, HeaderFormat, Instruction, Label, MethodBody, Operand, WrittenBody,
};
pub use opcodes::{FlowControl, OpCode, OpCodeInfo, OperandKind};
pub use rejit::{ReJitFlags, ReJitThread};
pub use stack::{analyze, recompute_max_stack, CallSite, CallSites, StackAnalysis};
pub use verify::verify;

use crate::error::{Error, Result};
use crate::ids::*;
use crate::metadata::MetaDataImport;
use clrprof_sys as sys;

/// Call sites resolved through a module's metadata: MethodDef and MemberRef
/// signatures, MethodSpecs through their generic method, StandAloneSigs
/// (`calli`) through `GetSigFromToken`.
pub struct MetaDataCallSites<'a, 'm>(pub &'a MetaDataImport<'m>);

impl MetaDataCallSites<'_, '_> {
    fn signature(&self, token: MdToken, depth: u32) -> Result<Vec<u8>> {
        let md = self.0;
        match token.table() {
            t if t == sys::mdtMethodDef => Ok(md.method_props(MdMethodDef(token.0))?.signature),
            t if t == sys::mdtMemberRef => Ok(md.member_ref_props(MdMemberRef(token.0))?.signature),
            t if t == sys::mdtMethodSpec && depth == 0 => {
                let import2 = md.raw2().ok_or(Error::Unsupported {
                    needs: 2,
                    has: 1,
                    call: "IMetaDataImport2::GetMethodSpecProps",
                })?;
                let (mut parent, mut blob, mut len) = (0u32, core::ptr::null::<u8>(), 0u32);
                crate::error::check(
                    // SAFETY: [plain-call] out pointers are locals; the metadata checks the token.
                    unsafe {
                        import2.GetMethodSpecProps(token.0, &mut parent, &mut blob, &mut len)
                    },
                    "IMetaDataImport2::GetMethodSpecProps",
                )?;
                self.signature(MdToken(parent), depth + 1)
            }
            t if t == sys::mdtSignature => standalone_sig(md, MdSignature(token.0)),
            _ => Err(Error::Malformed(format!(
                "token {:#010x} is no method or signature",
                token.0
            ))),
        }
    }
}

/// `GetSigFromToken`: the blob of a StandAloneSig (a `calli` site or a
/// local-variable signature), copied.
// provenance: token-module
pub fn standalone_sig(md: &MetaDataImport<'_>, token: MdSignature) -> Result<Vec<u8>> {
    let (mut blob, mut len) = (core::ptr::null::<u8>(), 0u32);
    crate::error::check(
        // SAFETY: [plain-call] out pointers are locals.
        unsafe { md.raw().GetSigFromToken(token.0, &mut blob, &mut len) },
        "IMetaDataImport::GetSigFromToken",
    )?;
    if blob.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: [module-lifetime] the metadata returns `len` bytes of its blob heap,
    // in the module's image: alive while we hold the import
    // interface and the module is loaded; copied at once.
    Ok(unsafe { core::slice::from_raw_parts(blob, len as usize) }.to_vec())
}

impl CallSites for MetaDataCallSites<'_, '_> {
    fn call_site(&self, token: MdToken) -> Result<CallSite> {
        CallSite::from_signature(&self.signature(token, 0)?)
    }
}

/// The code that calls a native function at `address` with one `int32`
/// argument through `calli` (`ldc.i4 argument; ldc.i8 address; conv.i;
/// calli signature`), where `signature` is the StandAloneSig of an
/// unmanaged `void (int32)` signature (see
/// [`SigBuilder::unmanaged_calli`](crate::metadata_emit::SigBuilder::unmanaged_calli)).
/// It leaves the stack as it found it and needs two slots.
pub fn native_call(
    address: usize,
    argument: i32,
    signature: MdSignature,
) -> Vec<(OpCode, Operand)> {
    vec![
        (OpCode::LDC_I4, Operand::Int(argument)),
        (OpCode::LDC_I8, Operand::Long(address as u64 as i64)),
        (OpCode::CONV_I, Operand::None),
        (OpCode::CALLI, Operand::Token(MdToken(signature.0))),
    ]
}

#[cfg(test)]
mod tests;
