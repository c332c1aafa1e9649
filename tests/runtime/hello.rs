//! The rig's own sanity check: an app runs on every leg and prints exactly
//! its known output.

use clrprof_testing::harness::Scenario;

/// The output `apps/hello.cs` must print, computed independently here.
pub fn expected_hello_stdout() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let text: Vec<String> = (1..=1000u64).map(|i| (i * i).to_string()).collect();
    for b in text.join(",").bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("hello from the clrprof test app\nchecksum {hash:016x}\n")
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "hello runs and prints its ground truth",
        |case| {
            let app = case.app("hello")?;
            let outcome = case.run(case.spec(&app))?;
            outcome.check()?;
            let expected = expected_hello_stdout();
            if outcome.stdout != expected {
                return Err(format!("stdout {:?}, expected {:?}", outcome.stdout, expected).into());
            }
            Ok(())
        },
    )]
}
