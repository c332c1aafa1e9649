//! The wrapped shape on hand-built bodies (verified like the runtime's
//! bodies are), and the probes called as the injected code calls them.

use super::build::{self, build, local_sig, Plan};
use super::*;
use clrprof::ids::{MdSignature, MdToken};
use clrprof::il::{CallSite, ClauseKind, ExceptionClause, Label, OpCode, Operand};
use std::collections::HashMap;
use std::sync::Mutex;

const ENTER_SIG: MdSignature = MdSignature(0x1100_0001);
const EXIT_SIG: MdSignature = MdSignature(0x1100_0002);
const CALLEE: MdToken = MdToken(0x0600_0009);

fn sites() -> HashMap<MdToken, CallSite> {
    let prim = |t| SigBuilder::primitive(t);
    let (enter, exit) = build::probe_sigs().unwrap();
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
        handler: 0x7000,
        enter: 0x1000,
        exit: 0x2000,
        enter_sig: ENTER_SIG,
        exit_sig: EXIT_SIG,
        object: clrprof::ids::MdTypeSpec(0x1b00_0001),
        local_sig: MdSignature(0x1100_0003),
        first_local,
        returns,
        arguments,
        split: build::Split::Whole,
        read_class: true,
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
fn every_return_leaves_to_the_epilogue_and_the_value_is_returned_once() {
    let wrapped = wrap_and_verify(&two_returns(), &plan(true, None, 0));
    assert_eq!(count(&wrapped, OpCode::RET), 1, "one ret, in the epilogue");
    assert_eq!(
        count(&wrapped, OpCode::LEAVE) + count(&wrapped, OpCode::LEAVE_S),
        2
    );
    assert_eq!(
        count(&wrapped, OpCode::CALLI),
        3,
        "the entry probe, and the exit probe in the catch handler and the epilogue"
    );
    assert_eq!(wrapped.clauses.len(), 1);
    assert_eq!(
        wrapped.clauses[0].kind,
        ClauseKind::Catch(MdToken(0x1b00_0001)),
        "a catch of every exception (object)"
    );
    assert_eq!(count(&wrapped, OpCode::RETHROW), 1);
    // Both probe calls of a normal call sit outside every exception region.
    let c = wrapped.clauses[0];
    let (try_start, handler_end) = (
        wrapped.index_of(c.try_start).unwrap(),
        wrapped.index_of(c.handler_end).unwrap(),
    );
    let callis: Vec<usize> = wrapped
        .instructions()
        .iter()
        .enumerate()
        .filter(|(_, i)| i.opcode == OpCode::CALLI)
        .map(|(k, _)| k)
        .collect();
    assert!(
        callis[0] < try_start && callis[2] >= handler_end,
        "{callis:?}"
    );
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
    b.format = clrprof::il::HeaderFormat::Fat;
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
    assert!(matches!(wrapped.clauses[2].kind, ClauseKind::Catch(_)));
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
        let e = build(&b, &plan(false, None, 0)).expect_err("refused");
        assert!(matches!(e, Error::Usage(_)), "{op:?}: {e}");
    }
}

#[test]
fn the_local_signature_appends_state_table_and_return_value() {
    // Original: two locals, int32 and string.
    let rust: [&[u8]; 3] = [&[0x0a], &[0x18], &[0x45, 0x1c]];
    let sig = local_sig(2, &[0x08, 0x0e], &rust, Some(&[0x0d])).unwrap();
    assert_eq!(
        sig,
        vec![0x07, 6, 0x08, 0x0e, 0x0a, 0x18, 0x45, 0x1c, 0x0d],
        "S int64, P native int, X pinned object, R"
    );
    let (n, types) = local_var_sig(&sig).unwrap();
    assert_eq!((n, types.len()), (6, 7));
    assert_eq!(
        local_sig(0, &[], &rust, None).unwrap(),
        vec![0x07, 3, 0x0a, 0x18, 0x45, 0x1c]
    );
    let managed: [&[u8]; 2] = [&[0x1c], &[0x1c]];
    assert_eq!(
        local_sig(0, &[], &managed, None).unwrap(),
        vec![0x07, 2, 0x1c, 0x1c]
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
            let thrown = call.exception().expect("the exception");
            let name = thrown.type_name().unwrap_or_else(|e| e.to_string());
            format!(
                "{state} | threw {name} ({:#x}): {e}",
                thrown.class().as_sys()
            )
        } else {
            let v = call.return_value();
            let old: bool = v.get().unwrap();
            v.set(!old).unwrap();
            format!("{state} | returned {old}")
        };
        self.seen.lock().unwrap().push(line);
    }
}

/// A fake runtime that knows one exception class, `Ns.Oops` (ClassID
/// `OOPS`), for the exit handler's [`Thrown::type_name`].
const OOPS: usize = 0x5100;

fn oops_runtime() -> RuntimeHandle {
    use clrprof::testing::fake::{FakeClass, FakeMetaData, FakeModule, FakeRuntime};
    static FAKE: OnceLock<FakeRuntime> = OnceLock::new();
    let fake = FAKE.get_or_init(|| {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            st.modules.insert(
                0x2100,
                FakeModule {
                    metadata: Arc::new(FakeMetaData::default().with_type(0x0200_0001, "Ns.Oops")),
                    ..Default::default()
                },
            );
            st.classes.insert(
                OOPS,
                FakeClass {
                    module: 0x2100,
                    type_def: 0x0200_0001,
                    ..Default::default()
                },
            );
        }
        fake
    });
    // SAFETY: [test-fake] the fake lives in a static; its IDs never reach a real runtime.
    unsafe { fake.runtime_handle(false) }
}

fn registered_recorder() -> (Arc<Recorder>, *const Registered) {
    // static bool M(int32, float64, string)
    let sig = MethodSig::parse(&[0x00, 0x03, 0x02, 0x08, 0x0d, 0x0e]).unwrap();
    let handler = Arc::new(Recorder::default());
    let (_, r) = register(Registered::new(
        WrappedMethod::new(
            "Ns.T::M".into(),
            RawModuleId(1),
            MdMethodDef(0x0600_0001),
            sig,
        ),
        Box::new(Typed(handler.clone())),
        oops_runtime(),
    ))
    .unwrap();
    (handler, r)
}

#[test]
fn probes_read_arguments_by_the_methods_own_types_and_replace_the_return_value() {
    // The exit handler's type_name starts the SDK's class-name thread; no
    // other test of this crate starts a profiler thread (the SDK's tests
    // that expect none run in the SDK's own test binary).
    let (handler, id) = registered_recorder();
    // The wrapped frame: argument homes and the return local.
    let (a0, a1, a2) = (41i32, 2.5f64, 0usize);
    let table: [*const u8; 3] = [
        (&a0 as *const i32).cast(),
        (&a1 as *const f64).cast(),
        (&a2 as *const usize).cast(),
    ];
    let mut ret: u8 = 0;
    let state = enter_probe::<Recorder>(id, table.as_ptr());
    exit_probe::<Recorder>(id, state, &mut ret, 0);
    assert_eq!(ret, 1, "the handler replaced false with true");

    let state = enter_probe::<Recorder>(id, table.as_ptr());
    exit_probe::<Recorder>(id, state, &mut ret, OOPS);
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
    assert!(
        seen[1].contains("threw Ns.Oops (0x5100): no return value"),
        "the exception's class and type name: {}",
        seen[1]
    );
    namer::wait_until_stopped();
    assert!(
        !clrprof::thread::running_except_current()
            .iter()
            .any(|n| n == "clrprof-class-names"),
        "the class-name thread exits when idle, so a detach is not refused for it"
    );
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
    let state = enter_probe::<Recorder>(id, table.as_ptr());
    assert_eq!(state, 0);
    exit_probe::<Recorder>(id, state, &mut ret, 0);
    assert!(handler_panics() > before);
    assert!(handler.seen.lock().unwrap().is_empty());
    assert_eq!(ret, 0);
}

#[test]
fn a_null_wrapper_is_ignored() {
    assert_eq!(
        enter_probe::<Recorder>(core::ptr::null(), core::ptr::null()),
        0
    );
    exit_probe::<Recorder>(core::ptr::null(), 12345, core::ptr::null_mut(), 0);
    // A wrapper of another handler type is not called with this one's.
    let (handler, r) = registered_recorder();
    struct Other;
    impl MethodHandler for Other {
        type State = ();
        fn on_entry(&self, _: &Entry<'_>) {
            panic!("called with another handler's wrapper")
        }
        fn on_exit(&self, _: &mut Exit<'_>, _: ()) {
            panic!("called with another handler's wrapper")
        }
    }
    // An exception of unknown class (1): threw, but no class.
    struct Unknown(Mutex<Vec<(bool, bool)>>);
    impl MethodHandler for Unknown {
        type State = ();
        fn on_entry(&self, _: &Entry<'_>) {}
        fn on_exit(&self, call: &mut Exit<'_>, _: ()) {
            let seen = (call.threw(), call.exception().is_some());
            self.0.lock().unwrap().push(seen);
        }
    }
    let unknown = Arc::new(Unknown(Mutex::new(Vec::new())));
    let (_, u) = register(Registered::new(
        WrappedMethod::new(
            "Ns.T::U".into(),
            RawModuleId(1),
            MdMethodDef(0x0600_0002),
            MethodSig::parse(&[0x00, 0x00, 0x01]).unwrap(),
        ),
        Box::new(Typed(unknown.clone())),
        oops_runtime(),
    ))
    .unwrap();
    exit_probe::<Unknown>(u, 1, core::ptr::null_mut(), 1);
    exit_probe::<Unknown>(u, 1, core::ptr::null_mut(), 0);
    assert_eq!(*unknown.0.lock().unwrap(), [(true, false), (false, false)]);

    let before = handler_panics();
    assert_eq!(enter_probe::<Other>(r, core::ptr::null()), 0);
    exit_probe::<Other>(r, 1, core::ptr::null_mut(), 0);
    assert_eq!(handler_panics(), before);
    assert!(handler.seen.lock().unwrap().is_empty());
}

#[test]
fn without_arguments_the_table_is_null_and_reads_fail() {
    let sig = MethodSig::parse(&[0x00, 0x01, 0x01, 0x08]).unwrap();
    let elements = [0x08u8];
    let a = Arguments {
        params: &sig.params,
        elements: &elements,
        has_this: false,
        table: core::ptr::null(),
    };
    let e = a.get::<i32>(0).unwrap_err().to_string();
    assert!(e.contains("without MethodHandler::ARGUMENTS"), "{e}");
}

// ---- the managed-handler shape ----

fn managed_plan(ret: bool, params: Vec<Option<clrprof::ids::MdTypeSpec>>) -> build::ManagedPlan {
    build::ManagedPlan {
        name: clrprof::ids::MdString(0x7000_0001),
        on_entry: clrprof::ids::MdMemberRef(0x0a00_0001),
        on_exit: clrprof::ids::MdMemberRef(0x0a00_0002),
        object: clrprof::ids::MdTypeSpec(0x1b00_0001),
        params,
        first_arg: 0,
        ret: ret.then_some(clrprof::ids::MdTypeSpec(0x1b00_0002)),
        local_sig: MdSignature(0x1100_0004),
        first_local: 0,
        split: build::Split::Whole,
    }
}

fn managed_sites() -> HashMap<MdToken, CallSite> {
    let o = [0x1cu8];
    let st = [0x0eu8];
    let entry = SigBuilder::static_method(&o, &[&st, &[0x1d, 0x1c]]).unwrap();
    let exit = SigBuilder::static_method(&o, &[&st, &o, &o, &o]).unwrap();
    let mut s = sites();
    s.insert(
        MdToken(0x0a00_0001),
        CallSite::from_signature(&entry).unwrap(),
    );
    s.insert(
        MdToken(0x0a00_0002),
        CallSite::from_signature(&exit).unwrap(),
    );
    s
}

#[test]
fn the_managed_shape_boxes_arguments_catches_rethrows_and_unboxes_the_return_value() {
    let plan = managed_plan(
        true,
        vec![Some(clrprof::ids::MdTypeSpec(0x1b00_0003)), None],
    );
    let mut body = build::build_managed(&two_returns(), &plan).expect("build");
    recompute_max_stack(&mut body, true, &managed_sites()).expect("max stack");
    let written = body.write().expect("write");
    let (wrapped, _) = verify(&written.bytes, true, &managed_sites()).expect("verify");
    assert_eq!(count(&wrapped, OpCode::NEWARR), 1);
    assert_eq!(
        count(&wrapped, OpCode::BOX),
        2,
        "one argument and the return value"
    );
    assert_eq!(
        count(&wrapped, OpCode::LDNULL),
        3,
        "the ref argument, and two null exceptions/values"
    );
    assert_eq!(count(&wrapped, OpCode::RETHROW), 1);
    assert_eq!(count(&wrapped, OpCode::UNBOX_ANY), 1);
    assert_eq!(count(&wrapped, OpCode::RET), 1);
    assert_eq!(wrapped.clauses.len(), 1);
    assert!(matches!(wrapped.clauses[0].kind, ClauseKind::Catch(t) if t.0 == 0x1b00_0001));
}

#[test]
fn managed_handlers_serve_only_a_startup_hook_load_of_their_version_in_that_runtime() {
    use super::handlers::Seen;
    use clrprof::testing::fake::FakeRuntime;
    // Two runtimes of one side-by-side process.
    let (a, b) = (FakeRuntime::new(), FakeRuntime::new());
    // SAFETY: [test-fake] the fakes describe no memory the SDK reads.
    let (ia, ib) = unsafe { (a.profiler_info(), b.profiler_info()) };
    let h = ManagedHandlers::new("Handlers", [1, 2, 0, 0], "Ns.Handlers");
    let e = h.check(&ia, "Ns.T::M").unwrap_err().to_string();
    assert_eq!(
        e,
        "cannot wrap Ns.T::M: the handler assembly `Handlers` is not loaded; load it before \
         the application's code runs (DOTNET_STARTUP_HOOKS=<path to Handlers.dll>); the \
         method was left unchanged"
    );
    h.note(
        &ia.handle(),
        Seen::Accepted {
            module: RawModuleId(0x10),
            version: [2, 0, 0, 0],
        },
    );
    let e = h.check(&ia, "Ns.T::M").unwrap_err().to_string();
    assert!(
        e.contains("loaded `Handlers` 2.0.0.0, the handlers were built for 1.2.0.0"),
        "{e}"
    );
    let ok = ManagedHandlers::new("Handlers", [1, 2, 0, 0], "Ns.Handlers");
    ok.note(
        &ia.handle(),
        Seen::Accepted {
            module: RawModuleId(0x10),
            version: [1, 2, 0, 0],
        },
    );
    assert!(ok.check(&ia, "Ns.T::M").is_ok());
    // The other runtime's methods bind in its own default context, which
    // has not loaded the handlers.
    let e = ok.check(&ib, "Ns.T::M").unwrap_err();
    assert!(
        matches!(&e, Error::CannotWrap { why, .. } if why.contains("`Handlers` is not loaded")),
        "{e}"
    );
    // A load that cannot serve: every method is refused with its reason.
    ok.note(
        &ib.handle(),
        Seen::Refused {
            module: RawModuleId(0x20),
            why: "it was loaded by `App.Program::LoadPlugin`".into(),
        },
    );
    let e = ok.check(&ib, "Ns.T::M").unwrap_err().to_string();
    assert_eq!(
        e,
        "cannot wrap Ns.T::M: it was loaded by `App.Program::LoadPlugin`; the method was left \
         unchanged"
    );
    assert!(ok.check(&ia, "Ns.T::M").is_ok());
}

#[test]
fn the_startup_hook_rule_accepts_only_the_runtimes_hook_code_with_corelib_above_it() {
    use super::handlers::{loaded_by_startup_hook, FrameFact};
    let core = |n: &str| FrameFact {
        name: n.into(),
        corelib: true,
    };
    let other = |n: &str| FrameFact {
        name: n.into(),
        corelib: false,
    };
    let load = core("System.Runtime.Loader.AssemblyLoadContext::LoadFromAssemblyPath");
    let hook = core("System.StartupHookProvider::CallStartupHook");
    // DOTNET_STARTUP_HOOKS: AssemblyLoadContext.Default.LoadFromAssemblyPath
    // called by the runtime's startup hook code.
    assert_eq!(
        loaded_by_startup_hook(&[load.clone(), hook.clone()]),
        Ok(())
    );
    // Review 36: the app loads it into a plugin context.
    assert_eq!(
        loaded_by_startup_hook(&[
            load.clone(),
            other("ReviewAlc.Program::LoadPlugin"),
            other("ReviewAlc.Program::Main"),
        ]),
        Err("it was loaded by `ReviewAlc.Program::LoadPlugin`".into())
    );
    // A `Resolving` handler (or a hook's `Initialize`) between the load and
    // the hook code chose where it went.
    assert_eq!(
        loaded_by_startup_hook(&[
            load.clone(),
            other("Plugins.Loader::OnResolving"),
            core("System.Runtime.Loader.AssemblyLoadContext::ResolveUsingEvent"),
            hook.clone(),
        ]),
        Err("it was loaded by `Plugins.Loader::OnResolving`".into())
    );
    // A dynamic method (no token) is never CoreLib's code, whatever its module.
    assert_eq!(
        loaded_by_startup_hook(&[load.clone(), other("function 0x1234"), hook.clone()]),
        Err("it was loaded by `function 0x1234`".into())
    );
    // An application class named like the runtime's is not of CoreLib.
    assert_eq!(
        loaded_by_startup_hook(&[other("System.StartupHookProvider::CallStartupHook")]),
        Err("it was loaded by `System.StartupHookProvider::CallStartupHook`".into())
    );
    assert_eq!(
        loaded_by_startup_hook(&[load]),
        Err("it was loaded by the runtime's own code, not its startup hook code".into())
    );
    assert_eq!(
        loaded_by_startup_hook(&[]),
        Err("no managed code was on the loading thread's stack".into())
    );
}

#[test]
fn the_type_check_refuses_an_operand_of_the_wrong_type() {
    use super::typecheck::{check, Env, Ty};
    let mut env = Env::default();
    env.locals.insert(0, Ty::I8);
    env.calls
        .insert(MdToken(ENTER_SIG.0), (vec![Ty::I4, Ty::N], Some(Ty::I8)));
    let body = |second: OpCode| {
        let mut b = MethodBody::new();
        b.push(OpCode::LDC_I4, Operand::Int(7));
        b.push(second, Operand::None);
        if second == OpCode::LDC_I4_0 {
            b.push(OpCode::CONV_U, Operand::None);
        }
        b.push(OpCode::LDC_I8, Operand::Long(0x1000));
        b.push(OpCode::CONV_I, Operand::None);
        b.push(OpCode::CALLI, Operand::Token(MdToken(ENTER_SIG.0)));
        b.push(OpCode::STLOC, Operand::Var(0));
        b.push(OpCode::RET, Operand::None);
        b
    };
    let good = body(OpCode::LDC_I4_0);
    check(&good, good.instructions()[0].label, None, &[], &env).expect("well typed");
    // An `object` where the probe takes a native int.
    let bad = body(OpCode::LDNULL);
    let e = check(&bad, bad.instructions()[0].label, None, &[], &env)
        .expect_err("ill typed")
        .to_string();
    assert!(e.contains("O where N is needed"), "{e}");
}

// ---- the exception's class, read in the catch handler ----

#[test]
fn the_catch_handler_reads_the_class_of_the_pinned_exception_and_rethrows() {
    let wrapped = wrap_and_verify(&two_returns(), &plan(true, None, 0));
    let c = wrapped.clauses[0];
    let handler = wrapped.index_of(c.handler_start).unwrap();
    let ops: Vec<(OpCode, Operand)> = wrapped.instructions()[handler..]
        .iter()
        .take(15)
        .map(|i| (i.opcode, i.operand.clone()))
        .collect();
    // X (local 2) is the pinned object: stored, its address read through
    // (`conv.u; ldind.i`: the method-table pointer, the ClassID) before the
    // exit probe, then released before the rethrow.
    let x = Operand::Var(2);
    assert_eq!(ops[0], (OpCode::STLOC, x.clone()));
    let class_read = [
        (OpCode::LDLOC, x.clone()),
        (OpCode::CONV_U, Operand::None),
        (OpCode::LDIND_I, Operand::None),
    ];
    let at = ops
        .windows(3)
        .position(|w| w == class_read)
        .expect("the class read");
    let calli = ops.iter().position(|(o, _)| *o == OpCode::CALLI).unwrap();
    assert!(at < calli, "read before the unmanaged call: {ops:?}");
    assert_eq!(
        ops[calli + 1..calli + 4],
        [
            (OpCode::LDNULL, Operand::None),
            (OpCode::STLOC, x),
            (OpCode::RETHROW, Operand::None)
        ]
    );
}

#[test]
fn the_type_check_refuses_conv_u_of_an_unpinned_reference() {
    use super::typecheck::{check, Env, Ty};
    let mut b = MethodBody::new();
    let first = b.push(OpCode::LDLOC, Operand::Var(0));
    b.push(OpCode::CONV_U, Operand::None);
    b.push(OpCode::POP, Operand::None);
    b.push(OpCode::RET, Operand::None);
    let mut env = Env::default();
    env.locals.insert(0, Ty::O);
    let e = check(&b, first, None, &[], &env).unwrap_err().to_string();
    assert!(e.contains("converting O to native int"), "{e}");
    env.locals.insert(0, Ty::Pinned);
    check(&b, first, None, &[], &env).expect("a pinned reference's address");
}

// ---- constructors: wrapped after the base constructor call ----

const BASE_CTOR: MdToken = MdToken(0x0a00_0010);
const FIELD: MdToken = MdToken(0x0400_0001);

/// `this.f = a; base(a); if (a < 0) throw null; ret` — a field initializer,
/// the base call on `this`, then the body (with a loop to its start).
fn constructor() -> MethodBody {
    let mut b = MethodBody::new();
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::STFLD, Operand::Token(FIELD));
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::CALL, Operand::Token(BASE_CTOR));
    let body = b.new_label();
    let done = b.new_label();
    b.push_labeled(body, OpCode::LDARG_1, Operand::None);
    b.push(OpCode::BRTRUE, Operand::Target(done));
    b.push(OpCode::LDNULL, Operand::None);
    b.push(OpCode::THROW, Operand::None);
    b.push_labeled(done, OpCode::RET, Operand::None);
    b
}

fn ctor_sites() -> HashMap<MdToken, CallSite> {
    let mut s = sites();
    // instance void .ctor(int32)
    s.insert(
        BASE_CTOR,
        CallSite::from_signature(&[0x20, 0x01, 0x01, 0x08]).unwrap(),
    );
    s
}

fn split_of(body: &MethodBody) -> core::result::Result<usize, &'static str> {
    let depths = clrprof::il::analyze(body, false, &ctor_sites())
        .unwrap()
        .depths;
    build::base_call(body, &depths, &|t| t == BASE_CTOR)
}

#[test]
fn a_constructor_is_wrapped_after_its_base_call() {
    let original = constructor();
    let call = split_of(&original).expect("the base call");
    assert_eq!(call, 5);
    let mut p = plan(false, None, 0);
    p.split = build::Split::After(call);
    let mut body = build(&original, &p).expect("build");
    recompute_max_stack(&mut body, false, &ctor_sites()).expect("max stack");
    let written = body.write().expect("write");
    verify(&written.bytes, false, &ctor_sites()).expect("verify");
    let wrapped = MethodBody::parse(&written.bytes).unwrap();
    let code = wrapped.instructions();
    // The field initializer and the base call come first, unchanged.
    let head: Vec<OpCode> = code[..6].iter().map(|i| i.opcode).collect();
    assert_eq!(
        head,
        [
            OpCode::LDARG_0,
            OpCode::LDARG_1,
            OpCode::STFLD,
            OpCode::LDARG_0,
            OpCode::LDARG_1,
            OpCode::CALL
        ]
    );
    // Then the prologue (the entry probe), then the try.
    let enter = code.iter().position(|i| i.opcode == OpCode::CALLI).unwrap();
    assert!(enter > 5, "the entry probe runs after the base call");
    let try_start = wrapped.index_of(wrapped.clauses[0].try_start).unwrap();
    assert!(try_start > enter);
    assert_eq!(code[try_start].opcode, OpCode::LDARG_1);
}

#[test]
fn a_constructor_without_a_base_call_on_this_is_refused() {
    // No call at all.
    let mut b = MethodBody::new();
    b.push(OpCode::RET, Operand::None);
    assert!(split_of(&b).is_err());

    // The call is made on something other than `this`.
    let mut b = MethodBody::new();
    b.push(OpCode::LDNULL, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::CALL, Operand::Token(BASE_CTOR));
    b.push(OpCode::RET, Operand::None);
    let e = split_of(&b).unwrap_err();
    assert!(e.contains("not made on `this`"), "{e}");

    // A branch jumps over the call.
    let mut b = MethodBody::new();
    let after = b.new_label();
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::BRTRUE, Operand::Target(after));
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::CALL, Operand::Token(BASE_CTOR));
    b.push_labeled(after, OpCode::RET, Operand::None);
    let e = split_of(&b).unwrap_err();
    assert!(e.contains("crosses"), "{e}");

    // The stack is not empty after the call.
    let mut b = MethodBody::new();
    b.push(OpCode::LDC_I4_0, Operand::None);
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::CALL, Operand::Token(BASE_CTOR));
    b.push(OpCode::POP, Operand::None);
    b.push(OpCode::RET, Operand::None);
    let e = split_of(&b).unwrap_err();
    assert!(e.contains("stack is empty"), "{e}");
}

#[test]
fn a_conditional_argument_of_the_base_call_is_kept_before_the_wrapper() {
    // base(a != 0 ? 1 : 2): a branch among the call's arguments.
    let mut b = MethodBody::new();
    let (two, call) = (b.new_label(), b.new_label());
    b.push(OpCode::LDARG_0, Operand::None);
    b.push(OpCode::LDARG_1, Operand::None);
    b.push(OpCode::BRFALSE, Operand::Target(two));
    b.push(OpCode::LDC_I4_1, Operand::None);
    b.push(OpCode::BR, Operand::Target(call));
    b.push_labeled(two, OpCode::LDC_I4_2, Operand::None);
    b.push_labeled(call, OpCode::CALL, Operand::Token(BASE_CTOR));
    b.push(OpCode::RET, Operand::None);
    assert_eq!(split_of(&b), Ok(6));
}

#[test]
fn a_typespec_instantiating_the_type_itself_is_its_own() {
    // GENERICINST CLASS TypeDef 0x02000005 <1> !0
    let blob = [0x15, 0x12, 0x05 << 2, 0x01, 0x13, 0x00];
    assert!(instantiates(&blob, MdToken(0x0200_0005)));
    assert!(!instantiates(&blob, MdToken(0x0200_0004)));
    // A TypeRef (tag 1) of the same row is another type.
    let blob = [0x15, 0x12, (0x05 << 2) | 1, 0x01, 0x13, 0x00];
    assert!(!instantiates(&blob, MdToken(0x0200_0005)));
}

#[test]
fn without_wrapped_non_exception_throws_the_class_is_not_read() {
    let mut p = plan(true, None, 0);
    p.read_class = false;
    let wrapped = wrap_and_verify(&two_returns(), &p);
    assert_eq!(count(&wrapped, OpCode::LDIND_I), 0);
    let handler = wrapped.index_of(wrapped.clauses[0].handler_start).unwrap();
    let calli = handler
        + wrapped.instructions()[handler..]
            .iter()
            .position(|i| i.opcode == OpCode::CALLI)
            .unwrap();
    // The last argument: 1, an exception of unknown class.
    assert!(wrapped.instructions()[handler..calli]
        .iter()
        .any(|i| i.opcode == OpCode::LDC_I4_1));
}

/// An `ICorProfilerFunctionControl` that counts what reaches it.
#[windows_core::implement(sys::ICorProfilerFunctionControl)]
struct CountingControl {
    calls: Arc<AtomicU32>,
}

impl sys::ICorProfilerFunctionControl_Impl for CountingControl_Impl {
    unsafe fn SetCodegenFlags(&self, _flags: sys::DWORD) -> sys::HRESULT {
        self.calls.fetch_add(1, Ordering::Relaxed);
        sys::HRESULT(0)
    }
    unsafe fn SetILFunctionBody(&self, _cb: sys::ULONG, _body: sys::LPCBYTE) -> sys::HRESULT {
        self.calls.fetch_add(1, Ordering::Relaxed);
        sys::HRESULT(0)
    }
    unsafe fn SetILInstrumentedCodeMap(
        &self,
        _n: sys::ULONG,
        _map: *const sys::COR_IL_MAP,
    ) -> sys::HRESULT {
        self.calls.fetch_add(1, Ordering::Relaxed);
        sys::HRESULT(0)
    }
}

#[test]
fn a_wrapped_body_is_installed_only_in_the_rejit_control_of_its_method() {
    let sig = MethodSig::parse(&[0x00, 0x00, 0x08]).unwrap();
    let (id, _) = register(Registered::new(
        WrappedMethod::new(
            "Ns.T::M".into(),
            RawModuleId(1),
            MdMethodDef(0x0600_0001),
            sig,
        ),
        Box::new(()),
        oops_runtime(),
    ))
    .unwrap();
    let body = WrappedBody {
        // SAFETY: [test-fake] never handed to a runtime.
        module: unsafe { RawModuleId(1).assume_valid() },
        token: MdMethodDef(0x0600_0001),
        id,
        // `ldc.i4.0; ret` in a tiny header.
        bytes: vec![(2 << 2) | 2, 0x16, 0x2a],
        map: Vec::new(),
    };
    let calls = Arc::new(AtomicU32::new(0));
    let raw: sys::ICorProfilerFunctionControl = CountingControl {
        calls: calls.clone(),
    }
    .into();
    let control = |module: usize, token: u32| {
        let ptr = windows_core::Interface::as_raw(&raw);
        // SAFETY: [test-fake] `raw` lives for the test; the method is the one this test names.
        unsafe {
            clrprof::rejit::FunctionControl::from_raw_borrowed(
                ptr,
                RawModuleId(module),
                MdMethodDef(token),
            )
        }
        .unwrap()
    };
    // Another method of the same module, the same token of another module:
    // refused, nothing reaches the control.
    for (module, token) in [(1, 0x0600_0002), (2, 0x0600_0001)] {
        let e = body.install_in_rejit(&control(module, token)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::WrongPartner {
                    call: "instrumentation::WrappedBody::install_in_rejit",
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(calls.load(Ordering::Relaxed), 0);
    }
    let e = body.install_in_rejit(&control(1, 0x0600_0002)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "instrumentation::WrappedBody::install_in_rejit refused (nothing was handed to the \
         runtime): the body wraps Ns.T::M (method 0x06000001 of module 0x1), but this ReJIT \
         control is for method 0x06000002 of module 0x1; a wrapped body is installed only for \
         the method it was built for (build one with `wrap` for this method)"
    );
    // Its own method's control: the body and the map.
    body.install_in_rejit(&control(1, 0x0600_0001)).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}
