//! Where the runtime lives in this process: its library's path and the
//! product version that path names.
//!
//! `GetRuntimeInformation` reports the version of the runtime *engine*. CoreCLR
//! before .NET 5 (.NET Core 1.0–3.1) reports 4.0.30319, the .NET Framework
//! compatible number, not its product version (3.1.23 for .NET Core 3.1.23);
//! .NET 5 and later report their product version. The shared framework
//! installs the runtime library in a folder named after the product version
//! (`shared/Microsoft.NETCore.App/3.1.23/libcoreclr.so`), so the folder name is
//! the product version.

/// File name of the runtime library on this platform.
#[cfg(windows)]
const CORECLR: &str = "coreclr.dll";
#[cfg(target_os = "macos")]
const CORECLR: &str = "libcoreclr.dylib";
#[cfg(all(unix, not(target_os = "macos")))]
const CORECLR: &str = "libcoreclr.so";

/// Paths of every CoreCLR library loaded in this process.
#[cfg(all(unix, not(target_os = "macos")))]
pub fn coreclr_paths() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut paths: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.ends_with(&format!("/{CORECLR}")))
        .map(str::to_owned)
        .collect();
    paths.dedup();
    paths
}

/// Paths of every CoreCLR library loaded in this process.
#[cfg(windows)]
pub fn coreclr_paths() -> Vec<String> {
    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleW(name: *const u16) -> *mut core::ffi::c_void;
        fn GetModuleFileNameW(module: *mut core::ffi::c_void, buf: *mut u16, len: u32) -> u32;
    }
    let name: Vec<u16> = CORECLR.encode_utf16().chain(Some(0)).collect();
    // SAFETY: [os-api, nul-terminated] NUL-terminated module name; no reference is taken.
    let module = unsafe { GetModuleHandleW(name.as_ptr()) };
    if module.is_null() {
        return Vec::new();
    }
    let mut buf = vec![0u16; 1024];
    // SAFETY: [os-api, buffer-protocol] `buf` has `buf.len()` writable units.
    let n = unsafe { GetModuleFileNameW(module, buf.as_mut_ptr(), buf.len() as u32) } as usize;
    if n == 0 || n >= buf.len() {
        return Vec::new();
    }
    String::from_utf16(&buf[..n])
        .map(|s| vec![s])
        .unwrap_or_default()
}

/// Paths of every CoreCLR library loaded in this process.
#[cfg(not(any(windows, unix)))]
pub fn coreclr_paths() -> Vec<String> {
    Vec::new()
}

/// The product version named by a runtime library path, e.g. `3.1.23` for
/// `.../Microsoft.NETCore.App/3.1.23/libcoreclr.so`.
pub fn version_from_path(path: &str) -> Option<String> {
    let mut parts = path.rsplit(['/', '\\']);
    parts.next()?; // the file name
    let dir = parts.next()?;
    let numeric = dir.split('.').count() >= 3
        && dir
            .split(['.', '-'])
            .take(3)
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    numeric.then(|| dir.to_string())
}

/// The product version of a pre-.NET 5 CoreCLR loaded in this process (the
/// first one whose folder names a major version below 5), if any.
pub fn legacy_coreclr_product_version() -> Option<String> {
    coreclr_paths()
        .iter()
        .filter_map(|p| version_from_path(p))
        .find(|v| {
            v.split('.')
                .next()
                .and_then(|m| m.parse::<u32>().ok())
                .is_some_and(|m| m < 5)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_from_framework_paths() {
        assert_eq!(
            version_from_path("/x/shared/Microsoft.NETCore.App/3.1.23/libcoreclr.so").as_deref(),
            Some("3.1.23")
        );
        assert_eq!(
            version_from_path(r"Z:\x\shared\Microsoft.NETCore.App\8.0.4\coreclr.dll").as_deref(),
            Some("8.0.4")
        );
        assert_eq!(version_from_path("/usr/lib/libcoreclr.so"), None);
        assert_eq!(version_from_path("libcoreclr.so"), None);
    }
}
