//! The environment variables that make CoreCLR load profilers, built in one
//! place.
//!
//! * `CORECLR_ENABLE_PROFILING`, `CORECLR_PROFILER`, `CORECLR_PROFILER_PATH`
//!   (and `_32`/`_64`/`_ARM32`/`_ARM64`): the main profiler.
//! * `CORECLR_ENABLE_NOTIFICATION_PROFILERS` and
//!   `CORECLR_NOTIFICATION_PROFILERS`: notification profilers, a list of
//!   `path={CLSID}` entries each ended by `;`. Runtimes before
//!   dotnet/runtime PR 130584 (merged July 2026) drop the last entry of a
//!   list without a trailing `;`, so [`notification_profilers`] always ends
//!   every entry with one.
//! * .NET 11 and later also read each variable under a `DOTNET_` prefix
//!   (`DOTNET_ENABLE_PROFILING`, `DOTNET_PROFILER`, ...; dotnet/runtime PR
//!   121646); older runtimes only read the `CORECLR_` names, which is why the
//!   SDK sets those.

/// The value of `CORECLR_NOTIFICATION_PROFILERS` for `entries` of
/// `(library path, braced CLSID)`: every entry ends with `;`, the last one
/// too.
pub fn notification_profilers<P: AsRef<str>, C: AsRef<str>>(entries: &[(P, C)]) -> String {
    let mut list = String::new();
    for (path, clsid) in entries {
        list.push_str(path.as_ref());
        list.push('=');
        list.push_str(clsid.as_ref());
        list.push(';');
    }
    list
}

/// The `DOTNET_` name .NET 11 and later also read for a `CORECLR_` profiler
/// variable (`CORECLR_PROFILER` → `DOTNET_PROFILER`); `None` for other names.
pub fn dotnet_name(coreclr_name: &str) -> Option<String> {
    coreclr_name
        .strip_prefix("CORECLR_")
        .map(|rest| format!("DOTNET_{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_ends_with_a_semicolon() {
        let c = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F}";
        assert_eq!(
            notification_profilers(&[("/a.so", c)]),
            format!("/a.so={c};")
        );
        assert_eq!(
            notification_profilers(&[("/a.so", c), ("/b.so", c)]),
            format!("/a.so={c};/b.so={c};")
        );
        assert_eq!(notification_profilers::<&str, &str>(&[]), "");
    }

    #[test]
    fn dotnet_names() {
        assert_eq!(
            dotnet_name("CORECLR_NOTIFICATION_PROFILERS").as_deref(),
            Some("DOTNET_NOTIFICATION_PROFILERS")
        );
        assert_eq!(dotnet_name("COR_PROFILER"), None);
    }
}
