//! ICorProfilerInfo1–3 inside real runtimes: the info-profiler fixture calls
//! the `ProfilerInfo` wrappers against the `info` app (modules, assemblies,
//! app domains, classes and layouts, generics, arrays, native code and IL,
//! threads, statics, exceptions, GC generations, enumerators, string layout, the
//! methods CoreCLR leaves unimplemented) and reports each check; every check
//! must be present and pass, and the app's output must not change.

use clrprof_testing::harness::Scenario;

const CLSID: &str = "{6B2D1F9F-5E3C-4C8B-AD4F-8011F2B3C4D5}";

/// Every check the fixture writes.
const CHECKS: &[&str] = &[
    "info_version",
    "module_info2",
    "assembly_info",
    "app_domain_info",
    "app_domains_containing_module",
    "frozen_objects",
    "il_body_allocator",
    "class_layout_reference_type",
    "class_layout_value_type",
    "generic_class",
    "function_name",
    "native_code",
    "il",
    "threads",
    "obsolete_methods",
    "generic_function",
    "array_object",
    "statics",
    "exception_clause",
    "generation_bounds",
    "enum_modules",
    "enum_jited_functions",
    "enum_jited_functions_outside_suspensions",
    "string_layout",
];

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "info: ICorProfilerInfo1-3 wrappers in a real runtime",
        |case| {
            let app = case.app("info")?;
            let plain = case.run(case.spec(&app))?;
            plain.check()?;
            let profiler = case.profiler_class("info-profiler", CLSID)?;
            let traced = case.run(case.spec(&app).profiler(profiler))?;
            traced.check()?;
            if traced.stdout != plain.stdout {
                return Err(format!(
                    "app output changed under the profiler:\nwithout: {:?}\nwith:    {:?}",
                    plain.stdout, traced.stdout
                )
                .into());
            }
            let failed: Vec<String> = traced
                .events("check")
                .filter(|r| r["ok"] != true)
                .map(|r| format!("{}: {}", r["name"], r["detail"]))
                .collect();
            if !failed.is_empty() {
                return Err(format!("failed checks:\n{}", failed.join("\n")).into());
            }
            let passed: Vec<&str> = traced
                .events("check")
                .filter_map(|r| r["name"].as_str())
                .collect();
            let missing: Vec<&str> = CHECKS
                .iter()
                .copied()
                .filter(|c| !passed.contains(c))
                .collect();
            if !missing.is_empty() {
                return Err(format!("checks never run: {missing:?}; ran {passed:?}").into());
            }
            Ok(())
        },
    )]
}
