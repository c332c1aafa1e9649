//! Unit tests of the IL reader, writer, editor, stack analysis and verifier
//! on hand-assembled bodies, plus the deterministic proptest fuzz run of
//! parse → write → parse.

use super::*;
use crate::info::IlMapEntry;
use proptest::prelude::*;
use std::collections::HashMap;

fn t(l: Label) -> Operand {
    Operand::Target(l)
}

fn no_calls() -> HashMap<MdToken, CallSite> {
    HashMap::new()
}

/// A tiny body: `while (n != 0) n = n - 1; return 0;` with the loop
/// branching back to the first instruction.
fn tiny_loop() -> Vec<u8> {
    let code: Vec<u8> = vec![
        0x02, // ldarg.0
        0x2c, 0x07, // brfalse.s +7 -> IL_000a
        0x02, // ldarg.0
        0x17, // ldc.i4.1
        0x59, // sub
        0x10, 0x00, // starg.s 0
        0x2b, 0xf6, // br.s -10 -> IL_0000
        0x16, // IL_000a: ldc.i4.0
        0x2a, // ret
    ];
    let mut b = vec![0x02 | (code.len() as u8) << 2];
    b.extend(code);
    b
}

/// A fat body with locals and a try/catch/finally.
fn fat_with_eh() -> Vec<u8> {
    let code: Vec<u8> = vec![
        // try {
        0x00, // IL_0000: nop
        //   try {
        0x02, // IL_0001: ldarg.0
        0x0a, // IL_0002: stloc.0
        0xde, 0x05, // IL_0003: leave.s IL_000a
        //   } catch (Exception) {
        0x26, // IL_0005: pop
        0xde, 0x02, // IL_0006: leave.s IL_000a
        0x00, 0x00, // IL_0008: nop nop (dead)
        //   }
        0xde, 0x03, // IL_000a: leave.s IL_000f
        // } finally {
        0x00, // IL_000c: nop
        0xdc, // IL_000d: endfinally
        0x00, // IL_000e: nop (dead, keeps the finally 3 bytes long)
        // }
        0x06, // IL_000f: ldloc.0
        0x2a, // IL_0010: ret
    ];
    let mut b = Vec::new();
    let flags: u16 = 0x3 | 0x8 | 0x10 | (3 << 12);
    b.extend(flags.to_le_bytes());
    b.extend(2u16.to_le_bytes());
    b.extend((code.len() as u32).to_le_bytes());
    b.extend(0x1100_0001u32.to_le_bytes());
    b.extend(&code);
    while b.len() % 4 != 0 {
        b.push(0);
    }
    // Small EH section with two clauses, inner first.
    b.push(0x01);
    b.push(4 + 2 * 12);
    b.extend([0, 0]);
    // catch [System.Exception] try IL_0001..IL_0005, handler IL_0005..IL_000a
    b.extend(0u16.to_le_bytes());
    b.extend(1u16.to_le_bytes());
    b.push(4);
    b.extend(5u16.to_le_bytes());
    b.push(5);
    b.extend(0x0100_0005u32.to_le_bytes());
    // finally try IL_0000..IL_000c, handler IL_000c..IL_000f
    b.extend(2u16.to_le_bytes());
    b.extend(0u16.to_le_bytes());
    b.push(12);
    b.extend(12u16.to_le_bytes());
    b.push(3);
    b.extend(0u32.to_le_bytes());
    b
}

#[test]
fn tiny_body_decodes() {
    let body = MethodBody::parse(&tiny_loop()).unwrap();
    assert_eq!(body.format, HeaderFormat::Tiny);
    assert_eq!(body.max_stack, 8);
    let ops: Vec<&str> = body
        .instructions()
        .iter()
        .map(|i| i.opcode.name())
        .collect();
    assert_eq!(
        ops,
        [
            "ldarg.0",
            "brfalse.s",
            "ldarg.0",
            "ldc.i4.1",
            "sub",
            "starg.s",
            "br.s",
            "ldc.i4.0",
            "ret"
        ]
    );
    let labels: Vec<Option<u32>> = body
        .instructions()
        .iter()
        .map(|i| i.label.original_offset())
        .collect();
    assert_eq!(labels, [0, 1, 3, 4, 5, 6, 8, 10, 11].map(Some).to_vec());
    assert_eq!(
        body.instructions()[1].operand,
        t(body.instructions()[7].label)
    );
    assert_eq!(
        body.instructions()[6].operand,
        t(body.instructions()[0].label)
    );
    // Unchanged, it writes back byte for byte.
    assert_eq!(body.write().unwrap().bytes, tiny_loop());
}

#[test]
fn fat_body_with_eh_decodes_and_round_trips() {
    let bytes = fat_with_eh();
    let body = MethodBody::parse(&bytes).unwrap();
    assert_eq!(body.format, HeaderFormat::Fat);
    assert!(body.init_locals);
    assert_eq!(body.max_stack, 2);
    assert_eq!(body.local_var_sig, MdSignature(0x1100_0001));
    assert_eq!(body.clauses.len(), 2);
    assert_eq!(
        body.clauses[0].kind,
        ClauseKind::Catch(MdToken(0x0100_0005))
    );
    assert_eq!(body.clauses[1].kind, ClauseKind::Finally);
    assert_eq!(body.clauses[1].try_start.original_offset(), Some(0));
    assert_eq!(body.clauses[1].handler_end.original_offset(), Some(15));
    assert_eq!(body.write().unwrap().bytes, bytes);
    verify(&bytes, true, &no_calls()).unwrap();
}

#[test]
fn entry_insert_keeps_loop_target_and_upgrades_tiny_to_fat() {
    let mut body = MethodBody::parse(&tiny_loop()).unwrap();
    let first = body.instructions()[0].label;
    // 60 bytes of ldc.i4 0 / pop pairs: code grows past 63 bytes.
    let mut code = Vec::new();
    for _ in 0..10 {
        code.push((OpCode::LDC_I4, Operand::Int(0)));
        code.push((OpCode::POP, Operand::None));
    }
    body.insert_at_entry(&code).unwrap();
    // The loop still branches to the original first instruction.
    let br = body
        .instructions()
        .iter()
        .find(|i| i.opcode == OpCode::BR_S)
        .unwrap();
    assert_eq!(br.operand, t(first));
    let w = body.write().unwrap();
    assert!(w.fat, "a 72-byte body cannot keep a tiny header");
    assert_eq!(w.code_size, 60 + 12);
    assert_eq!(w.bytes[0] & 0x3, 0x3);
    // Old offsets map to old + 60.
    assert_eq!(
        w.map,
        [0u32, 1, 3, 4, 5, 6, 8, 10, 11]
            .iter()
            .map(|o| IlMapEntry {
                old_offset: *o,
                new_offset: o + 60,
                accurate: true
            })
            .collect::<Vec<_>>()
    );
    let (again, stack) = verify(&w.bytes, true, &no_calls()).unwrap();
    assert_eq!(again.instructions().len(), 29);
    assert_eq!(stack.max_stack, 2);
}

#[test]
fn short_branch_is_promoted_when_its_target_moves_out_of_range() {
    let mut body = MethodBody::parse(&tiny_loop()).unwrap();
    // Insert 200 bytes between brfalse.s and its target.
    let code: Vec<_> = (0..100)
        .flat_map(|_| [(OpCode::NOP, Operand::None)])
        .collect();
    let code: Vec<_> = code
        .into_iter()
        .chain((0..100).map(|_| (OpCode::NOP, Operand::None)))
        .collect();
    body.insert(2, &code).unwrap();
    let w = body.write().unwrap();
    let again = MethodBody::parse(&w.bytes).unwrap();
    let ops: Vec<OpCode> = again.instructions().iter().map(|i| i.opcode).collect();
    assert!(ops.contains(&OpCode::BRFALSE), "{ops:?}");
    assert!(ops.contains(&OpCode::BR), "{ops:?}");
    assert!(!ops.contains(&OpCode::BRFALSE_S));
    // Targets still land on the same instructions.
    let target_of = |i: &Instruction| match &i.operand {
        Operand::Target(l) => again.index_of(*l).map(|k| again.instructions()[k].opcode),
        _ => None,
    };
    let brfalse = again
        .instructions()
        .iter()
        .find(|i| i.opcode == OpCode::BRFALSE)
        .unwrap();
    assert_eq!(target_of(brfalse), Some(OpCode::LDC_I4_0));
    let br = again
        .instructions()
        .iter()
        .find(|i| i.opcode == OpCode::BR)
        .unwrap();
    assert_eq!(target_of(br), Some(OpCode::LDARG_0));
    verify(&w.bytes, true, &no_calls()).unwrap();
}

#[test]
fn eh_clauses_follow_inserted_and_removed_code() {
    let mut body = MethodBody::parse(&fat_with_eh()).unwrap();
    // Insert inside the inner try (before stloc.0), then remove the first nop.
    body.insert(
        2,
        &[(OpCode::NOP, Operand::None), (OpCode::NOP, Operand::None)],
    )
    .unwrap();
    let removed = body.remove(0).unwrap();
    assert_eq!(removed.opcode, OpCode::NOP);
    let w = body.write().unwrap();
    let again = MethodBody::parse(&w.bytes).unwrap();
    let off = |l: Label| l.original_offset().unwrap();
    let inner = again.clauses[0];
    // The inner try covers ldarg.0, nop, nop, stloc.0, leave.s: 0..6.
    assert_eq!((off(inner.try_start), off(inner.try_end)), (0, 6));
    assert_eq!((off(inner.handler_start), off(inner.handler_end)), (6, 11));
    let outer = again.clauses[1];
    // The outer try lost its first nop and starts at the inner try now.
    assert_eq!((off(outer.try_start), off(outer.try_end)), (0, 13));
    assert_eq!((off(outer.handler_start), off(outer.handler_end)), (13, 16));
    verify(&w.bytes, true, &no_calls()).unwrap();
    // The map has the removed nop dropped and the rest shifted by +1.
    assert_eq!(
        w.map[0],
        IlMapEntry {
            old_offset: 1,
            new_offset: 0,
            accurate: true
        }
    );
}

#[test]
fn fat_exception_section_when_small_does_not_fit() {
    let mut body = MethodBody::parse(&fat_with_eh()).unwrap();
    // 300 nops inside the finally handler: handler length over 255.
    let finally_start = body.index_of(body.clauses[1].handler_start).unwrap();
    let nops: Vec<_> = (0..300).map(|_| (OpCode::NOP, Operand::None)).collect();
    body.insert(finally_start + 1, &nops).unwrap();
    let w = body.write().unwrap();
    let sect = (12 + w.code_size as usize + 3) & !3;
    assert_eq!(w.bytes[sect], 0x41, "fat EH section kind");
    let again = MethodBody::parse(&w.bytes).unwrap();
    assert_eq!(again.clauses.len(), 2);
    verify(&w.bytes, true, &no_calls()).unwrap();
}

fn switch_body(extra_push_in_case1: bool) -> MethodBody {
    let mut body = MethodBody::new();
    let (case1, case2, end) = (body.new_label(), body.new_label(), body.new_label());
    body.push(OpCode::LDARG_0, Operand::None);
    body.push(OpCode::SWITCH, Operand::Switch(vec![case1, case2]));
    body.push(OpCode::LDC_I4_1, Operand::None);
    body.push(OpCode::BR_S, t(end));
    body.push_labeled(case1, OpCode::LDC_I4_2, Operand::None);
    if extra_push_in_case1 {
        body.push(OpCode::DUP, Operand::None);
    }
    body.push(OpCode::BR_S, t(end));
    body.push_labeled(case2, OpCode::LDC_I4_3, Operand::None);
    body.push_labeled(end, OpCode::LDARG_1, Operand::None);
    body.push(OpCode::CALL, Operand::Token(MdToken(0x0600_0002)));
    body.push(OpCode::RET, Operand::None);
    body
}

#[test]
fn switch_targets_and_calls_drive_the_stack() {
    let mut sites = HashMap::new();
    sites.insert(
        MdToken(0x0600_0002),
        CallSite {
            params: 2,
            has_this: false,
            returns_value: true,
        },
    );
    let mut body = switch_body(false);
    let a = analyze(&body, true, &sites).unwrap();
    assert_eq!(a.max_stack, 2);
    assert_eq!(a.depths, [0, 1, 0, 1, 0, 1, 0, 1, 2, 1].map(Some).to_vec());
    assert_eq!(recompute_max_stack(&mut body, true, &sites).unwrap(), 2);
    let w = body.write().unwrap();
    let (again, _) = verify(&w.bytes, true, &sites).unwrap();
    let sw = &again.instructions()[1];
    let Operand::Switch(targets) = &sw.operand else {
        panic!("{sw:?}")
    };
    let ops: Vec<OpCode> = targets
        .iter()
        .map(|l| again.instructions()[again.index_of(*l).unwrap()].opcode)
        .collect();
    assert_eq!(ops, [OpCode::LDC_I4_2, OpCode::LDC_I4_3]);
    // One path reaching `end` with a value more is refused.
    let err = analyze(&switch_body(true), true, &sites).unwrap_err();
    assert!(
        err.to_string().contains("depth 2 and with depth 1")
            || err.to_string().contains("depth 1 and with depth 2"),
        "{err}"
    );
}

#[test]
fn stack_analysis_counts_call_sites() {
    let mut body = MethodBody::new();
    let f = MdToken(0x0a00_0001);
    body.push(OpCode::LDARG_0, Operand::None);
    body.push(OpCode::LDARG_1, Operand::None);
    body.push(OpCode::LDARG_2, Operand::None);
    body.push(OpCode::CALLVIRT, Operand::Token(f));
    body.push(OpCode::RET, Operand::None);
    let mut sites = HashMap::new();
    sites.insert(
        f,
        CallSite {
            params: 2,
            has_this: true,
            returns_value: true,
        },
    );
    assert_eq!(recompute_max_stack(&mut body, true, &sites).unwrap(), 3);
    assert_eq!(body.max_stack, 3);
    // With a void return the method's ret would find one value too many.
    assert!(analyze(&body, false, &sites).is_err());
    // Underflow.
    sites.insert(
        f,
        CallSite {
            params: 3,
            has_this: true,
            returns_value: true,
        },
    );
    assert!(analyze(&body, true, &sites)
        .unwrap_err()
        .to_string()
        .contains("pops 4"));
}

#[test]
fn native_call_sequence_is_balanced() {
    let mut body = MethodBody::parse(&tiny_loop()).unwrap();
    let sig = MdSignature(0x1100_0007);
    body.insert_at_entry(&native_call(0x7fff_1234_5678, 42, sig))
        .unwrap();
    let mut sites = HashMap::new();
    sites.insert(
        MdToken(sig.0),
        CallSite {
            params: 1,
            has_this: false,
            returns_value: false,
        },
    );
    let max = recompute_max_stack(&mut body, true, &sites).unwrap();
    assert_eq!(max, 2);
    let w = body.write().unwrap();
    // 5 + 9 + 1 + 5 = 20 bytes of probe in front of 12 bytes: still tiny.
    assert!(!w.fat);
    assert_eq!(w.bytes[0] >> 2, 32);
    verify(&w.bytes, true, &sites).unwrap();
}

#[test]
fn verifier_rejects_broken_bodies() {
    let sites = no_calls();
    // Branch into the middle of an instruction.
    let bad_target = [0x02 | 3 << 2, 0x2b, 0xff, 0x2a];
    assert!(verify(&bad_target, false, &sites).is_err());
    // Falls off the end.
    assert!(verify(&[0x02 | 1 << 2, 0x00], false, &sites).is_err());
    // Declared max stack too small: fat header declaring 0.
    let mut fat = Vec::new();
    fat.extend((0x3u16 | 3 << 12).to_le_bytes());
    fat.extend(0u16.to_le_bytes());
    fat.extend(2u32.to_le_bytes());
    fat.extend(0u32.to_le_bytes());
    fat.extend([0x16, 0x2a]);
    assert!(verify(&fat, true, &sites)
        .unwrap_err()
        .to_string()
        .contains("max stack"));
    // Overlapping, non-nested clauses.
    let mut body = MethodBody::parse(&fat_with_eh()).unwrap();
    let labels: Vec<Label> = body.instructions().iter().map(|i| i.label).collect();
    body.clauses[0].try_start = labels[0];
    body.clauses[0].try_end = labels[2];
    body.clauses[1].try_start = labels[1];
    let w = body.write().unwrap();
    assert!(verify(&w.bytes, true, &sites).is_err());
    // Outer clause listed before inner.
    let mut body = MethodBody::parse(&fat_with_eh()).unwrap();
    body.clauses.swap(0, 1);
    let w = body.write().unwrap();
    assert!(verify(&w.bytes, true, &sites)
        .unwrap_err()
        .to_string()
        .contains("listed after"));
    // br out of a try.
    let mut body = MethodBody::parse(&fat_with_eh()).unwrap();
    let k = body
        .instructions()
        .iter()
        .position(|i| i.opcode == OpCode::LEAVE_S)
        .unwrap();
    let target = match &body.instructions()[k].operand {
        Operand::Target(l) => *l,
        _ => unreachable!(),
    };
    body.replace(k, OpCode::BR_S, Operand::Target(target))
        .unwrap();
    let w = body.write().unwrap();
    assert!(verify(&w.bytes, true, &sites).is_err());
}

#[test]
fn parser_rejects_malformed_input() {
    for bad in [
        &[][..],
        &[0x01],                                     // unknown header format
        &[0x02 | 4 << 2, 0x00],                      // code runs past the end
        &[0x02 | 1 << 2, 0x24],                      // unknown opcode
        &[0x02 | 2 << 2, 0xfe, 0x08],                // unknown two-byte opcode
        &[0x02 | 2 << 2, 0x1f],                      // truncated operand
        &[0x03, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // fat header size 8
    ] {
        assert!(MethodBody::parse(bad).is_err(), "{bad:?}");
    }
    // Extra section claimed but missing.
    let mut fat = Vec::new();
    fat.extend((0x3u16 | 0x8 | 3 << 12).to_le_bytes());
    fat.extend(8u16.to_le_bytes());
    fat.extend(1u32.to_le_bytes());
    fat.extend(0u32.to_le_bytes());
    fat.push(0x2a);
    assert!(MethodBody::parse(&fat).is_err());
}

#[test]
fn every_opcode_round_trips() {
    for op in OpCode::all() {
        let operand = match op.operand() {
            OperandKind::None => Operand::None,
            OperandKind::ShortInt => Operand::Int(-5),
            OperandKind::Int => Operand::Int(-123456),
            OperandKind::Long => Operand::Long(-1 << 40),
            OperandKind::ShortFloat => Operand::Float32(1.5f32.to_bits()),
            OperandKind::Float => Operand::Float64(2.25f64.to_bits()),
            OperandKind::ShortVar => Operand::Var(200),
            OperandKind::Var => Operand::Var(40000),
            OperandKind::ShortBranchTarget | OperandKind::BranchTarget | OperandKind::Switch => {
                continue
            }
            _ => Operand::Token(MdToken(0x0a00_0010)),
        };
        let mut body = MethodBody::new();
        body.push(op, operand.clone());
        let w = body.write().unwrap();
        let again = MethodBody::parse(&w.bytes).unwrap();
        assert_eq!(again.instructions().len(), 1, "{op}");
        assert_eq!(again.instructions()[0].opcode, op);
        assert_eq!(again.instructions()[0].operand, operand, "{op}");
        assert_eq!(w.code_size as usize, again.instructions()[0].size(), "{op}");
    }
}

/// parse(write(parse(x))) == parse(x), and write never fails on a parsed body.
pub(crate) fn round_trip_holds(bytes: &[u8]) -> std::result::Result<(), String> {
    let Ok(first) = MethodBody::parse(bytes) else {
        return Ok(());
    };
    let written = first
        .write()
        .map_err(|e| format!("write failed on a parsed body: {e}"))?;
    let second = MethodBody::parse(&written.bytes).map_err(|e| format!("re-parse failed: {e}"))?;
    if first != second {
        return Err(format!("round trip differs:\n{first:?}\n{second:?}"));
    }
    Ok(())
}

/// Generates structurally plausible bodies: random instructions with
/// in-range branches and random clauses, encoded by the writer, then
/// mutated byte-wise.
fn arb_body() -> impl Strategy<Value = Vec<u8>> {
    let ops: Vec<OpCode> = OpCode::all().collect();
    (
        prop::collection::vec((0..ops.len(), any::<i64>(), any::<u16>()), 1..60),
        prop::collection::vec(
            (
                0u8..4,
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
                any::<u16>(),
            ),
            0..4,
        ),
        any::<bool>(),
        prop::collection::vec((any::<u16>(), any::<u8>()), 0..4),
    )
        .prop_map(move |(code, clauses, fat, mutations)| {
            let mut body = MethodBody::new();
            if fat {
                body.format = HeaderFormat::Fat;
                body.max_stack = 16;
            }
            let n = code.len();
            let labels: Vec<Label> = (0..n).map(|_| body.new_label()).collect();
            for (k, (op, v, pick)) in code.into_iter().enumerate() {
                let op = ops[op];
                let target = labels[pick as usize % n];
                let operand = match op.operand() {
                    OperandKind::None => Operand::None,
                    OperandKind::ShortInt => Operand::Int(v as i8 as i32),
                    OperandKind::Int => Operand::Int(v as i32),
                    OperandKind::Long => Operand::Long(v),
                    OperandKind::ShortFloat => Operand::Float32(v as u32),
                    OperandKind::Float => Operand::Float64(v as u64),
                    OperandKind::ShortVar => Operand::Var(v as u8 as u16),
                    OperandKind::Var => Operand::Var(v as u16),
                    OperandKind::ShortBranchTarget | OperandKind::BranchTarget => {
                        Operand::Target(target)
                    }
                    OperandKind::Switch => Operand::Switch(
                        (0..(v as usize % 4))
                            .map(|j| labels[(pick as usize + j) % n])
                            .collect(),
                    ),
                    _ => Operand::Token(MdToken(v as u32)),
                };
                body.insert(k, &[(op, operand)]).unwrap();
                let last = body.instructions().len() - 1;
                body.instructions_mut()[last].label = labels[k];
            }
            for (kind, a, b, c, d) in clauses {
                let pick = |x: u16| labels[x as usize % n];
                let end = |x: u16| {
                    if x as usize % (n + 1) == n {
                        Label::END
                    } else {
                        labels[x as usize % n]
                    }
                };
                body.clauses.push(ExceptionClause {
                    kind: match kind {
                        0 => ClauseKind::Catch(MdToken(0x0100_0001)),
                        1 => ClauseKind::Filter(pick(a ^ d)),
                        2 => ClauseKind::Finally,
                        _ => ClauseKind::Fault,
                    },
                    try_start: pick(a),
                    try_end: end(b),
                    handler_start: pick(c),
                    handler_end: end(d),
                });
            }
            let mut bytes = match body.write() {
                Ok(w) => w.bytes,
                // Regions ending before they start: keep the code only.
                Err(_) => {
                    body.clauses.clear();
                    body.write().map(|w| w.bytes).unwrap_or_default()
                }
            };
            for (at, x) in mutations {
                if !bytes.is_empty() {
                    let k = at as usize % bytes.len();
                    bytes[k] ^= x;
                }
            }
            bytes
        })
}

proptest! {
    // Deterministic in CI: a fixed seed and ChaCha; the long, random runs
    // are the cargo-fuzz ones (clrprof/fuzz).
    #![proptest_config(ProptestConfig {
        cases: 400,
        rng_algorithm: prop::test_runner::RngAlgorithm::ChaCha,
        rng_seed: prop::test_runner::RngSeed::Fixed(0x11_2026),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn round_trip_on_generated_bodies(bytes in arb_body()) {
        prop_assert_eq!(round_trip_holds(&bytes), Ok(()));
    }

    #[test]
    fn round_trip_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(round_trip_holds(&bytes), Ok(()));
        // The verifier never panics either.
        let _ = verify(&bytes, true, &no_calls());
    }
}

/// The corpus kept from the cargo-fuzz runs (`clrprof/fuzz/corpus/`): every
/// file must keep the round-trip property.
#[test]
fn fuzz_corpus_round_trips() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/il_body");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let bytes = std::fs::read(e.path()).unwrap();
        if let Err(msg) = round_trip_holds(&bytes) {
            panic!("{}: {msg}", e.path().display());
        }
        n += 1;
    }
    eprintln!("{n} corpus files");
}
