//! Reading the CLSIDs a `#[profiler]` library declares, from the file bytes.
//!
//! The `#[profiler]` macro embeds, once per profiler class, the ASCII marker
//! `CLRPROF_CLSID:{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}` (uppercase hex,
//! braced). Scanning for it works the same for ELF `.so` and PE `.dll` files
//! and never loads the library (loading would run its initialisers).

use crate::{Error, Result};
use std::path::Path;

/// The marker prefix the `#[profiler]` macro embeds before each CLSID.
pub const CLSID_MARKER: &str = "CLRPROF_CLSID:";

/// Length of a braced GUID: `{` + 36 + `}`.
const BRACED_GUID_LEN: usize = 38;

/// Whether `s` is a braced, uppercase GUID `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}`.
pub fn is_braced_guid(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != BRACED_GUID_LEN || b[0] != b'{' || b[BRACED_GUID_LEN - 1] != b'}' {
        return false;
    }
    b[1..BRACED_GUID_LEN - 1]
        .iter()
        .enumerate()
        .all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'A'..=b'F').contains(&c),
        })
}

/// Normalises a user-given CLSID (with or without braces, any case) to the
/// braced uppercase form the runtime's `CORECLR_PROFILER` accepts.
pub fn normalize_clsid(s: &str) -> Result<String> {
    let trimmed = s.trim();
    let inner = trimmed
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(trimmed);
    let braced = format!("{{{}}}", inner.to_ascii_uppercase());
    if is_braced_guid(&braced) {
        Ok(braced)
    } else {
        Err(Error::new(format!(
            "`{s}` is not a CLSID (expected XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX, hex)"
        )))
    }
}

/// Every CLSID marked in `bytes`, in order of first appearance, de-duplicated.
/// A marker not followed by a well-formed braced GUID is ignored.
pub fn scan_clsids(bytes: &[u8]) -> Vec<String> {
    let marker = CLSID_MARKER.as_bytes();
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i + marker.len() <= bytes.len() {
        if &bytes[i..i + marker.len()] == marker {
            let start = i + marker.len();
            if let Some(candidate) = bytes.get(start..start + BRACED_GUID_LEN) {
                if let Ok(text) = std::str::from_utf8(candidate) {
                    if is_braced_guid(text) && !found.iter().any(|f| f == text) {
                        found.push(text.to_string());
                    }
                }
            }
            i = start;
        } else {
            i += 1;
        }
    }
    found
}

/// The CLSIDs marked in the library at `path` (see [`scan_clsids`]); an error
/// when the file cannot be read or holds no marker.
pub fn clsids_in_file(path: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
    let found = scan_clsids(&bytes);
    if found.is_empty() {
        return Err(Error::new(format!(
            "{} holds no `{CLSID_MARKER}` marker: not a library built with #[profiler]",
            path.display()
        )));
    }
    Ok(found)
}

/// The single CLSID of a library with exactly one profiler class.
pub fn single_clsid(path: &Path) -> Result<String> {
    let mut found = clsids_in_file(path)?;
    if found.len() == 1 {
        Ok(found.remove(0))
    } else {
        Err(Error::new(format!(
            "{} declares {} profiler classes ({}); choose one with --clsid",
            path.display(),
            found.len(),
            found.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9}";
    const B: &str = "{FFFFFFFF-0000-1111-2222-333333333333}";

    #[test]
    fn finds_markers_in_binary_noise_in_order_without_duplicates() {
        let mut bytes = vec![0u8, 0x7f, b'E', b'L', b'F'];
        bytes.extend_from_slice(format!("{CLSID_MARKER}{B}").as_bytes());
        bytes.extend_from_slice(&[0, 1, 2, 3]);
        bytes.extend_from_slice(format!("{CLSID_MARKER}{A}\0").as_bytes());
        bytes.extend_from_slice(format!("xx{CLSID_MARKER}{B}").as_bytes());
        assert_eq!(scan_clsids(&bytes), vec![B.to_string(), A.to_string()]);
    }

    #[test]
    fn rejects_malformed_guids_after_the_marker() {
        let lower = A.to_ascii_lowercase();
        let bad = [
            format!("{CLSID_MARKER}{lower}"), // lowercase
            format!("{CLSID_MARKER}0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9"), // no braces
            format!("{CLSID_MARKER}{{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F}}"), // short
            format!("{CLSID_MARKER}{{0A1B2C3D+4E5F-6071-8293-A4B5C6D7E8F9}}"), // wrong separator
            format!("{CLSID_MARKER}{{0A1B2C3D-4E5F-6071-8293"), // truncated at end of file
        ];
        for text in bad {
            assert!(scan_clsids(text.as_bytes()).is_empty(), "{text}");
        }
    }

    #[test]
    fn overlapping_marker_text_still_finds_the_real_one() {
        let text = format!("{CLSID_MARKER}{CLSID_MARKER}{A}");
        assert_eq!(scan_clsids(text.as_bytes()), vec![A.to_string()]);
    }

    #[test]
    fn normalizes_user_clsids() {
        assert_eq!(
            normalize_clsid("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9").unwrap(),
            A
        );
        assert_eq!(normalize_clsid(A).unwrap(), A);
        assert!(normalize_clsid("not-a-guid").is_err());
        assert!(normalize_clsid("{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8FG}").is_err());
    }

    #[test]
    fn file_without_marker_is_an_error() {
        let dir = std::env::temp_dir().join(format!("clrprof-clsid-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let none = dir.join("none.so");
        std::fs::write(&none, b"\x7fELF nothing here").unwrap();
        let err = clsids_in_file(&none).unwrap_err().to_string();
        assert!(err.contains("no `CLRPROF_CLSID:` marker"), "{err}");
        let two = dir.join("two.dll");
        std::fs::write(&two, format!("MZ{CLSID_MARKER}{A}..{CLSID_MARKER}{B}")).unwrap();
        assert_eq!(clsids_in_file(&two).unwrap().len(), 2);
        assert!(single_clsid(&two)
            .unwrap_err()
            .to_string()
            .contains("--clsid"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
