//! Managed exceptions thrown and caught, without a profiler: the app's output
//! must be exactly its known account on every leg that supports it.

use clrprof_testing::harness::Scenario;

/// Leg left out of scenarios that throw more than one managed exception.
pub const WINE_NET8_LEG: &str = "win-x64-8.0";
/// Why (RUNTIMES.md): Wine 8 with .NET 8.0.4 hangs on the second managed exception.
pub const WINE_NET8_REASON: &str =
    "Wine 8 + .NET 8.0.4 hang on the second managed exception of a process (RUNTIMES.md); \
     Windows exception paths are covered by win-x64-3.1";

fn expected_stdout() -> String {
    let mut s = String::new();
    for i in 0..6 {
        let line = match i % 3 {
            0 => format!("caught System.InvalidOperationException: op {i}\n"),
            1 => format!("caught System.ArgumentException: arg {i}\n"),
            _ => format!("caught Exceptions.AppException: app {i}\n"),
        };
        s.push_str(&line);
    }
    s.push_str("exceptions caught = 6\n");
    s
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new("exceptions are thrown, caught and counted", |case| {
            let app = case.app("exceptions")?;
            let outcome = case.run(case.spec(&app))?;
            outcome.check()?;
            if outcome.stdout != expected_stdout() {
                return Err(format!(
                    "stdout {:?}, expected {:?}",
                    outcome.stdout,
                    expected_stdout()
                )
                .into());
            }
            Ok(())
        })
        .exclude_leg(WINE_NET8_LEG, WINE_NET8_REASON),
    ]
}
