//! Review 42 (the fourth soundness review), route 1, inside real runtimes:
//! a body freed under its reader, under the multiplexer.
//!
//! Two copies of the `review42-mux-profiler` fixture (`#![forbid(unsafe_code)]`)
//! are two children of the multiplexer; each re-JITs `Il.Shapes::Tiny` of
//! the il app and, in `GetReJITParameters`, keeps
//! `before = info.il_function_body(module, method)?`, installs a wrapper
//! with `wrap(..)?.install_in_rejit(control)?`, then reads `before` again.
//! The second child's `before` is the body the first child set, which the
//! multiplexer handed out from its own `GetILFunctionBody`. Before the fix
//! that body was a `Vec` the second child's `SetILFunctionBody` replaced and
//! freed: the second read saw the allocator's bytes, not the body
//! (`same: false`, its first 16 bytes changed, on every Linux leg). Now the
//! multiplexer keeps every body it hands out until the module's
//! `ModuleUnloadFinished`, as the runtime keeps its own answers
//! (clrprof-mux `rejit_requests::HandedOut`).
//!
//! Asserted: the app's output is unchanged; each child read one body and
//! read it back unchanged after its install; the second child read the
//! first one's body (longer than the original, which the first read);
//! both wrappers count every call the app counted (the chained bodies run).

use crate::mux::{library_copy, mux_run, plain_run, Kid, NO_TIERING};
use clrprof_testing::harness::{Case, CaseResult, Scenario};
use serde_json::Value;

const METHOD: &str = "Il.Shapes::Tiny";

fn body_reads_survive_the_next_install(case: &Case<'_>) -> CaseResult {
    let app = case.app("il")?;
    let plain = plain_run(case, &app, &[], &NO_TIERING)?;
    let reader = case.profiler("review42-mux-profiler")?;
    let kids = [
        Kid::new(reader.clone()),
        Kid::new(library_copy(case, &reader, "b")?),
    ];
    let run = mux_run(case, &app, &[], &kids, &NO_TIERING)?;
    let calls: u64 = plain
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("calls {METHOD} ")))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("the app printed no `calls {METHOD}` line: {}", plain.stdout))?;
    let mut wrong = Vec::new();
    if run.outcome.stdout != plain.stdout {
        wrong.push(format!(
            "the app's output changed:\nwithout: {:?}\nwith:    {:?}",
            plain.stdout, run.outcome.stdout
        ));
    }
    let mut bodies: Vec<&Value> = Vec::new();
    for (k, records) in run.children.iter().enumerate() {
        let child = k + 1;
        let of = |event: &str| -> Vec<&Value> {
            records.iter().filter(|r| r["event"] == event).collect()
        };
        for r in of("rejit_refused") {
            wrong.push(format!("child {child}: {r}"));
        }
        match of("body")[..] {
            [body] => {
                if body["same"] != true {
                    wrong.push(format!(
                        "child {child}: the body it read changed under it after its install: {body}"
                    ));
                }
                bodies.push(body);
            }
            ref other => wrong.push(format!("child {child}: body records {other:?}")),
        }
        match of("wrapped")[..] {
            [w] if w["enter"] == calls && w["exit"] == calls => {}
            ref other => wrong.push(format!(
                "child {child}: wrapper counts {other:?}, the app counted {calls} calls"
            )),
        }
    }
    if let [first, second] = bodies[..] {
        // The second child rewrote the first one's body.
        if second["before"] == first["before"] || second["len"].as_u64() <= first["len"].as_u64() {
            wrong.push(format!(
                "the second child did not read the first one's body: {first} / {second}"
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{wrong:#?}").into())
    }
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "review42: a body read during a ReJIT fan-out of the multiplexer outlives the next child's install",
        body_reads_survive_the_next_install,
    )]
}
