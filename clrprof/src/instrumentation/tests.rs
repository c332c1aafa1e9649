//! The wrapped shape on hand-built bodies (verified like the runtime's
//! bodies are), and the probes called as the injected code calls them.

use super::build::{build, local_sig, Plan};
use super::*;
use crate::ids::{MdSignature, MdToken};
use crate::il::{CallSite, ClauseKind, ExceptionClause, Label, OpCode, Operand};
use std::collections::HashMap;
use std::sync::Mutex;

const ENTER_SIG: MdSignature = MdSignature(0x1100_0001);
const EXIT_SIG: MdSignature = MdSignature(0x1100_0002);
const CALLEE: MdToken = MdToken(0x0600_0009);

fn sites() -> HashMap<MdToken, CallSite> {
    let prim = |t| SigBuilder::primitive(t);
    let enter = SigBuilder::unmanaged_calli(
        UnmanagedCallConv::StdCall,
        &prim(PrimitiveType::I8),
        &[&prim(PrimitiveType::I4), &prim(PrimitiveType::I)],
    )
    .unwrap();
    let exit = SigBuilder::unmanaged_calli(
        UnmanagedCallConv::StdCall,
        &prim(PrimitiveType::Void),
        &[
            &prim(PrimitiveType::I4),
            &prim(PrimitiveType::I8),
            &prim(PrimitiveType::I),
            &prim(PrimitiveType::I4),
        ],
    )
    .unwrap();
    let callee =
        SigBuilder::static_method(&prim(PrimitiveType::Void), &[&prim(PrimitiveType::I4)]).unwrap();
    HashMap::from([
        (
            MdToken(ENTER_SIG.0),
            CallSite::from_signature(&enter).unwrap(),
        ),
        (
            MdToken(EXIT_SIG.0),
            CallSite::from_signature(&exit).unwrap(),
        ),
        (CALLEE, CallSite::from_signature(&callee).unwrap()),
    ])
}

fn plan(returns: bool, arguments: Option<u16>, first_local: u16) -> Plan {
    Plan {
        id: 7,
        enter: 0x1000,
        exit: 0x2000,
        enter_sig: ENTER_SIG,
        exit_sig: EXIT_SIG,
        local_sig: MdSignature(0x1100_0003),
        first_local,
        returns,
        arguments,
    }
}

/// Wraps, recomputes max stack, writes and verifies like `wrap` does.
fn wrap_and_verify(original: &MethodBody, plan: &Plan) -> MethodBody {
    let mut body = build(original, plan).expect("build");
    recompute_max_stack(&mut body, plan.returns, &sites()).expect("max stack");
    let written = body.write().expect("write");
    verify(&written.bytes, plan.returns, &sites()).expect("verify");
    MethodBody::parse(&written.bytes).expect("parse")
}

fn count(body: &MethodBody, op: OpCode) -> usize {
    body.instructions()
        .iter()
        .filter(|i| i.opcode == op)
        .count()
}

/// `if (a == 0) return 1; while (a != 0) a--; return 2;` with a loop back
/// to the first instruction.
fn two_returns() -> MethodBody {
    let mut b = MethodBody::new();
    let first = b.new_label();
    let other = b.new_label();
    b.push_labeled(first, OpCode::LDARG_0, Operand::None);
    b.push(OpCode::BRTRUE, Operand::Target(other));
    b.push(OpCode::LDC_I4_1, Operand::None);
    b.push(OpCode::RET, Operand::None);
    b.push_labeled(other, OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDC_I4_1, Operand::None);
    b.push(OpCode::SUB, Operand::None);
    b.push(OpCode::STARG, Operand::Var(0));
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::BRTRUE, Operand::Target(first));
    b.push(OpCode::LDC_I4_2, Operand::None);
    b.push(OpCode::RET, Operand::None);
    b
}

#[test]
fn every_return_leaves_through_the_finally_and_the_value_is_returned_once() {
    let wrapped = wrap_and_verify(&two_returns(), &plan(true, None, 0));
    assert_eq!(count(&wrapped, OpCode::RET), 1, "one ret, in the epilogue");
    assert_eq!(
        count(&wrapped, OpCode::LEAVE) + count(&wrapped, OpCode::LEAVE_S),
        2
    );
    assert_eq!(count(&wrapped, OpCode::CALLI), 2, "entry and exit probes");
    assert_eq!(wrapped.clauses.len(), 1);
    assert!(matches!(wrapped.clauses[0].kind, ClauseKind::Finally));
    assert!(wrapped.init_locals);
    // The loop still goes back to the first original instruction, inside
    // the try, not to the prologue.
    let first_original = wrapped
        .instructions()
        .iter()
        .position(|i| i.opcode == OpCode::LDARG_0)
        .unwrap();
    let try_start = wrapped
        .index_of(wrapped.clauses[0].try_start)
        .expect("try start is an instruction");
    assert_eq!(try_start, first_original);
}

#[test]
fn a_void_method_gets_no_return_local() {
    let mut b = MethodBody::new();
    b.push(OpCode::LDC_I4_5, Operand::None);
    b.push(OpCode::CALL, Operand::Token(CALLEE));
    b.push(OpCode::RET, Operand::None);
    let wrapped = wrap_and_verify(&b, &plan(false, None, 0));
    assert_eq!(count(&wrapped, OpCode::LDLOCA), 0);
    assert_eq!(count(&wrapped, OpCode::RET), 1);
}

#[test]
fn the_original_clauses_stay_inner_and_the_wrappers_is_last() {
    // try { try { call } catch (T) { pop; leave } leave } finally { endfinally } ret
    let mut b = MethodBody::new();
    let (l_after, l_outer_end, l_catch, l_fin, l_ret) = (
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
        b.new_label(),
    );
    let t0 = b.push(OpCode::LDC_I4_1, Operand::None);
    b.push(OpCode::CALL, Operand::Token(CALLEE));
    b.push(OpCode::LEAVE, Operand::Target(l_after));
    b.push_labeled(l_catch, OpCode::POP, Operand::None);
    b.push(OpCode::LEAVE, Operand::Target(l_after));
    b.push_labeled(l_after, OpCode::LEAVE, Operand::Target(l_ret));
    b.push_labeled(l_fin, OpCode::ENDFINALLY, Operand::None);
    b.push_labeled(l_ret, OpCode::RET, Operand::None);
    let _ = l_outer_end;
    b.format = crate::il::HeaderFormat::Fat;
    b.clauses = vec![
        ExceptionClause {
            kind: ClauseKind::Catch(MdToken(0x0100_0001)),
            try_start: t0,
            try_end: l_catch,
            handler_start: l_catch,
            handler_end: l_after,
        },
        ExceptionClause {
            kind: ClauseKind::Finally,
            try_start: t0,
            try_end: l_fin,
            handler_start: l_fin,
            handler_end: l_ret,
        },
    ];
    let wrapped = wrap_and_verify(&b, &plan(false, None, 2));
    assert_eq!(wrapped.clauses.len(), 3);
    assert!(matches!(wrapped.clauses[0].kind, ClauseKind::Catch(_)));
    assert!(matches!(wrapped.clauses[1].kind, ClauseKind::Finally));
    assert!(matches!(wrapped.clauses[2].kind, ClauseKind::Finally));
    // The locals used by the wrapper start after the original two.
    assert!(wrapped
        .instructions()
        .iter()
        .any(|i| i.opcode == OpCode::STLOC && i.operand == Operand::Var(2)));
}

#[test]
fn a_method_that_only_throws_has_no_epilogue() {
    let mut b = MethodBody::new();
    b.push(OpCode::LDNULL, Operand::None);
    b.push(OpCode::THROW, Operand::None);
    let wrapped = wrap_and_verify(&b, &plan(true, None, 0));
    assert_eq!(count(&wrapped, OpCode::RET), 0);
    assert_eq!(wrapped.clauses[0].handler_end, Label::END);
}

#[test]
fn arguments_are_passed_as_a_table_of_their_addresses() {
    let wrapped = wrap_and_verify(&two_returns(), &plan(true, Some(3), 0));
    assert_eq!(count(&wrapped, OpCode::LOCALLOC), 1);
    let ldarga: Vec<_> = wrapped
        .instructions()
        .iter()
        .filter(|i| i.opcode == OpCode::LDARGA || i.opcode == OpCode::LDARGA_S)
        .map(|i| i.operand.clone())
        .collect();
    assert_eq!(
        ldarga,
        vec![Operand::Var(0), Operand::Var(1), Operand::Var(2)]
    );
    // localloc needs an otherwise empty stack: it is in the prologue,
    // before any original code and outside every clause.
    let localloc = wrapped
        .instructions()
        .iter()
        .position(|i| i.opcode == OpCode::LOCALLOC)
        .unwrap();
    let try_start = wrapped.index_of(wrapped.clauses[0].try_start).unwrap();
    assert!(localloc < try_start);
}

#[test]
fn tail_calls_jmp_and_arglist_are_refused_not_built() {
    for (op, operand) in [
        (OpCode::TAILCALL, Operand::None),
        (OpCode::JMP, Operand::Token(CALLEE)),
        (OpCode::ARGLIST, Operand::None),
    ] {
        let mut b = MethodBody::new();
        b.push(op, operand);
        b.push(OpCode::RET, Operand::None);
        let Err(e) = build(&b, &plan(false, None, 0)) else {
            panic!("{op:?} was not refused");
        };
        assert!(matches!(e, Error::Usage(_)), "{op:?}: {e}");
    }
}

#[test]
fn the_local_signature_appends_state_flag_table_and_return_value() {
    // Original: two locals, int32 and string.
    let sig = local_sig(2, &[0x08, 0x0e], Some(&[0x0d])).unwrap();
    assert_eq!(sig, vec![0x07, 6, 0x08, 0x0e, 0x0a, 0x08, 0x18, 0x0d]);
    let (n, types) = local_var_sig(&sig).unwrap();
    assert_eq!((n, types.len()), (6, 6));
    assert_eq!(
        local_sig(0, &[], None).unwrap(),
        vec![0x07, 3, 0x0a, 0x08, 0x18]
    );
}

#[test]
fn the_return_type_is_cut_from_the_method_signature() {
    // instance !!0 M<1>(int32, string)
    let blob = [0x30, 0x01, 0x02, 0x1e, 0x00, 0x08, 0x0e];
    assert_eq!(return_type_bytes(&blob).unwrap(), &[0x1e, 0x00]);
    assert!(return_type_bytes(&[0x00, 0x01]).is_err(), "truncated");
    assert!(
        local_var_sig(&[0x07, 0x02, 0x08]).is_err(),
        "one type of two"
    );
    assert!(local_var_sig(&[0x06, 0x00]).is_err(), "not LOCAL_SIG");
}

// ---- the probes, called as the injected code calls them ----

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl MethodHandler for Recorder {
    type State = String;
    const ARGUMENTS: bool = true;
    fn on_entry(&self, call: &Entry<'_>) -> String {
        let a = call.arguments();
        let first: i32 = a.get(0).unwrap();
        let second: f64 = a.get(1).unwrap();
        let wrong = a.get::<i64>(0).unwrap_err().to_string();
        let object = a.get::<i64>(2).unwrap_err().to_string();
        let missing = a.get::<i32>(9).unwrap_err().to_string();
        if first < 0 {
            panic!("a handler bug");
        }
        format!("{first} {second} | {wrong} | {object} | {missing}")
    }
    fn on_exit(&self, call: &mut Exit<'_>, state: String) {
        let line = if call.threw() {
            let e = call.return_value().get::<bool>().unwrap_err().to_string();
            format!("{state} | threw: {e}")
        } else {
            let v = call.return_value();
            let old: bool = v.get().unwrap();
            v.set(!old).unwrap();
            format!("{state} | returned {old}")
        };
        self.seen.lock().unwrap().push(line);
    }
}

fn registered_recorder() -> (Arc<Recorder>, i32) {
    // static bool M(int32, float64, string)
    let sig = MethodSig::parse(&[0x00, 0x03, 0x02, 0x08, 0x0d, 0x0e]).unwrap();
    let handler = Arc::new(Recorder::default());
    let id = register(Registered {
        method: WrappedMethod {
            name: "Ns.T::M".into(),
            module: RawModuleId(1),
            token: MdMethodDef(0x0600_0001),
            sig,
        },
        handler: Box::new(Typed(handler.clone())),
    })
    .unwrap();
    (handler, id)
}

#[test]
fn probes_read_arguments_by_the_methods_own_types_and_replace_the_return_value() {
    let (handler, id) = registered_recorder();
    // The wrapped frame: argument homes and the return local.
    let (a0, a1, a2) = (41i32, 2.5f64, 0usize);
    let table: [*const u8; 3] = [
        (&a0 as *const i32).cast(),
        (&a1 as *const f64).cast(),
        (&a2 as *const usize).cast(),
    ];
    let mut ret: u8 = 0;
    let state = enter_probe(id, table.as_ptr());
    exit_probe(id, state, &mut ret, 0);
    assert_eq!(ret, 1, "the handler replaced false with true");

    let state = enter_probe(id, table.as_ptr());
    exit_probe(id, state, &mut ret, 1);
    assert_eq!(ret, 1, "no value is touched after an exception");

    let seen = handler.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[0].starts_with("41 2.5 | parameter 0 is int, not a i64 | parameter 2 is string"),
        "{}",
        seen[0]
    );
    assert!(seen[0].contains("there is no parameter 9"), "{}", seen[0]);
    assert!(seen[0].ends_with("| returned false"), "{}", seen[0]);
    assert!(seen[1].contains("threw: no return value"), "{}", seen[1]);
}

#[test]
fn a_panicking_handler_is_caught_and_its_exit_skipped() {
    let (handler, id) = registered_recorder();
    let before = handler_panics();
    let (a0, a1, a2) = (-1i32, 0f64, 0usize);
    let table: [*const u8; 3] = [
        (&a0 as *const i32).cast(),
        (&a1 as *const f64).cast(),
        (&a2 as *const usize).cast(),
    ];
    let mut ret = 0u8;
    let state = enter_probe(id, table.as_ptr());
    assert_eq!(state, 0);
    exit_probe(id, state, &mut ret, 0);
    assert!(handler_panics() > before);
    assert!(handler.seen.lock().unwrap().is_empty());
    assert_eq!(ret, 0);
}

#[test]
fn unknown_wrapper_numbers_are_ignored() {
    assert_eq!(enter_probe(-1, core::ptr::null()), 0);
    assert_eq!(enter_probe(i32::MAX, core::ptr::null()), 0);
    exit_probe(i32::MAX, 12345, core::ptr::null_mut(), 0);
}

#[test]
fn without_arguments_the_table_is_null_and_reads_fail() {
    let sig = MethodSig::parse(&[0x00, 0x01, 0x01, 0x08]).unwrap();
    let a = Arguments {
        params: &sig.params,
        has_this: false,
        table: core::ptr::null(),
    };
    let e = a.get::<i32>(0).unwrap_err().to_string();
    assert!(e.contains("without MethodHandler::ARGUMENTS"), "{e}");
}
