//! The multiplexer's configuration: which child profilers to load, and what
//! each of them sees of the environment.
//!
//! # The profiler list
//! `CLRPROF_MUX_PROFILERS` names the children in the syntax of the runtime's
//! own list of notification profilers (`CORECLR_NOTIFICATION_PROFILERS`):
//! `path={CLSID};path={CLSID};...`. Each entry is a library path and the
//! CLSID of the profiler class to create from it; the path ends at the last
//! `=` of the entry (a CLSID has none), so paths may contain `=`, and
//! Windows paths (`Z:\dir\p.dll`) need no escaping. Children are numbered
//! from 1 in list order, the order in which they are initialized and in
//! which every callback reaches them.
//!
//! # Per-child variables
//! `CLRPROF_MUX_<n>_<NAME>=value` sets `NAME=value` for child `n` only:
//! the multiplexer puts it into the process environment while it creates
//! child `n` (`DllGetClassObject`, `CreateInstance`) and while the child's
//! `Initialize` runs, and again while its `Shutdown` runs, and restores the
//! previous value afterwards. That is how each child gets its own
//! `CLRPROF_OUTPUT`, or two copies of one tracer get different filters. A
//! child that reads its environment at another time (a callback, or its
//! finish at process exit when the host never shuts the runtime down) sees
//! the process's own values: read what you need in `initialize`.
//! `CLRPROF_MUX_<n>_CLIENT_DATA` is not an environment variable: it is the
//! client data child `n` receives in `InitializeForAttach`.
//!
//! # Attach
//! A process that is already running has no such variables; the
//! multiplexer's attach client data carries them instead, one `NAME=value`
//! per line (`\n`), the same names as above.

use windows_core::GUID;

/// The variable naming the child profilers.
pub const PROFILERS_VAR: &str = "CLRPROF_MUX_PROFILERS";

/// The file of the multiplexer's own records (default: the process's
/// `CLRPROF_OUTPUT`). `clrprof run --output-dir DIR` sets it to
/// `DIR/clrprof-mux.jsonl` and leaves `CLRPROF_OUTPUT` alone, so that no
/// child, reading `CLRPROF_OUTPUT` whenever it likes, can take the
/// multiplexer's file for its own.
pub const OUTPUT_VAR: &str = "CLRPROF_MUX_OUTPUT";

/// The prefix of the per-child variables (`CLRPROF_MUX_<n>_<NAME>`).
pub const CHILD_PREFIX: &str = "CLRPROF_MUX_";

/// The per-child name whose value is the child's attach client data.
pub const CLIENT_DATA: &str = "CLIENT_DATA";

/// One child profiler to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSpec {
    /// Position in the list, from 1.
    pub index: usize,
    /// The library, as the runtime's loader takes it (a Windows path on Windows).
    pub path: String,
    /// The profiler class to create.
    pub clsid: GUID,
    /// Variables set for this child while it is created and initialized.
    pub env: Vec<(String, String)>,
    /// The client data for `InitializeForAttach` (empty when none is given).
    pub client_data: Vec<u8>,
}

impl ChildSpec {
    /// The library's file name without its extension (`libjit_tracer`,
    /// `jit_tracer`), for logs and records.
    pub fn stem(&self) -> &str {
        let name = self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path);
        match name.rfind('.') {
            Some(dot) if dot > 0 => &name[..dot],
            _ => name,
        }
    }
}

/// A mistake in the configuration, with the text it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Parses a CLSID: 32 hex digits as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`,
/// braces optional.
pub fn parse_clsid(text: &str) -> Option<GUID> {
    let s = text.trim();
    let s = s
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(s);
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    if groups.len() != 5
        || groups
            .iter()
            .zip(lens)
            .any(|(g, l)| g.len() != l || !g.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return None;
    }
    u128::from_str_radix(&groups.concat(), 16)
        .ok()
        .map(GUID::from_u128)
}

/// `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}`, upper case.
pub fn format_clsid(clsid: &GUID) -> String {
    let h = format!("{:032X}", clsid.to_u128());
    format!(
        "{{{}-{}-{}-{}-{}}}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Parses `path={CLSID};path={CLSID}`: empty entries are skipped.
pub fn parse_list(text: &str) -> Result<Vec<(String, GUID)>, ConfigError> {
    text.split(';')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let (path, clsid) = entry.rsplit_once('=').ok_or_else(|| {
                ConfigError(format!(
                    "{PROFILERS_VAR}: entry {entry:?} is not `path={{CLSID}}`"
                ))
            })?;
            let clsid = parse_clsid(clsid).ok_or_else(|| {
                ConfigError(format!(
                    "{PROFILERS_VAR}: {clsid:?} (in {entry:?}) is not a CLSID"
                ))
            })?;
            if path.trim().is_empty() {
                return Err(ConfigError(format!(
                    "{PROFILERS_VAR}: entry {entry:?} has no library path"
                )));
            }
            Ok((path.trim().to_string(), clsid))
        })
        .collect()
}

/// Writes the list syntax [`parse_list`] reads. A path that contains `;`
/// cannot be written (the runtime's syntax has no escape for it).
pub fn format_list(children: &[(String, GUID)]) -> Result<String, ConfigError> {
    let mut out = Vec::new();
    for (path, clsid) in children {
        if path.contains(';') {
            return Err(ConfigError(format!(
                "the library path {path:?} contains `;`, which the profiler list cannot express"
            )));
        }
        out.push(format!("{path}={}", format_clsid(clsid)));
    }
    Ok(out.join(";"))
}

/// The name of child `index`'s variable `name`: `CLRPROF_MUX_<index>_<name>`.
pub fn child_var(index: usize, name: &str) -> String {
    format!("{CHILD_PREFIX}{index}_{name}")
}

/// The children named by `variables` (the process environment, or the
/// attach client data's lines): the list, and each child's own variables.
pub fn children<'a>(
    variables: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<ChildSpec>, ConfigError> {
    let variables: Vec<(&str, &str)> = variables.into_iter().collect();
    let list = variables
        .iter()
        .rev()
        .find(|(k, _)| *k == PROFILERS_VAR)
        .map(|(_, v)| *v)
        .ok_or_else(|| ConfigError(format!("{PROFILERS_VAR} is not set")))?;
    let mut specs: Vec<ChildSpec> = parse_list(list)?
        .into_iter()
        .enumerate()
        .map(|(k, (path, clsid))| ChildSpec {
            index: k + 1,
            path,
            clsid,
            env: Vec::new(),
            client_data: Vec::new(),
        })
        .collect();
    if specs.is_empty() {
        return Err(ConfigError(format!("{PROFILERS_VAR} names no profiler")));
    }
    for (name, value) in &variables {
        let Some(rest) = name.strip_prefix(CHILD_PREFIX) else {
            continue;
        };
        let Some((number, var)) = rest.split_once('_') else {
            continue;
        };
        let Ok(index) = number.parse::<usize>() else {
            continue;
        };
        let Some(spec) = specs.iter_mut().find(|s| s.index == index) else {
            return Err(ConfigError(format!(
                "{name}: there is no child {index} (the list names {})",
                list.split(';').filter(|e| !e.trim().is_empty()).count()
            )));
        };
        if var.is_empty() {
            return Err(ConfigError(format!(
                "{name}: no variable name after the child number"
            )));
        }
        if var == CLIENT_DATA {
            spec.client_data = value.as_bytes().to_vec();
        } else {
            spec.env.retain(|(k, _)| k != var);
            spec.env.push((var.to_string(), value.to_string()));
        }
    }
    Ok(specs)
}

/// The configuration in the process environment.
pub fn from_environment() -> Result<Vec<ChildSpec>, ConfigError> {
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with(CHILD_PREFIX))
        .collect();
    children(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// The configuration in an attach client data: UTF-8 `NAME=value` lines.
pub fn from_client_data(data: &[u8]) -> Result<Vec<ChildSpec>, ConfigError> {
    let text = std::str::from_utf8(data)
        .map_err(|_| ConfigError("the attach client data is not UTF-8".into()))?;
    let lines: Vec<(&str, &str)> = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_once('=').ok_or_else(|| {
                ConfigError(format!("attach client data line {l:?} is not NAME=value"))
            })
        })
        .collect::<Result<_, _>>()?;
    children(lines)
}

/// Writes the attach client data [`from_client_data`] reads.
pub fn client_data(
    children: &[(String, GUID)],
    per_child: &[(usize, String, String)],
) -> Result<String, ConfigError> {
    let mut out = format!("{PROFILERS_VAR}={}\n", format_list(children)?);
    for (index, name, value) in per_child {
        if value.contains('\n') {
            return Err(ConfigError(format!(
                "the value of {name} for child {index} contains a line break"
            )));
        }
        out.push_str(&format!("{}={value}\n", child_var(*index, name)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "{0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9}";
    const B: &str = "5A1C0E8E-4D2B-4B7A-9C3E-7F0D1E2A3B4C";

    #[test]
    fn lists_follow_the_runtime_syntax() {
        let list = parse_list(&format!("/opt/p/liba.so={A}; Z:\\dir\\b=c.dll={{{B}}};;")).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].0, "/opt/p/liba.so");
        assert_eq!(format_clsid(&list[0].1), A);
        assert_eq!(list[1].0, "Z:\\dir\\b=c.dll");
        assert_eq!(format_clsid(&list[1].1), format!("{{{B}}}"));
        let again = parse_list(&format_list(&list).unwrap()).unwrap();
        assert_eq!(again, list);
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parse_list("/p/lib.so")
            .unwrap_err()
            .0
            .contains("not `path={CLSID}`"));
        assert!(parse_list("/p/lib.so={nope}")
            .unwrap_err()
            .0
            .contains("is not a CLSID"));
        assert!(parse_list(&format!("={A}"))
            .unwrap_err()
            .0
            .contains("no library path"));
        assert!(format_list(&[("a;b".into(), GUID::zeroed())]).is_err());
        assert!(children([]).unwrap_err().0.contains("is not set"));
        assert!(children([(PROFILERS_VAR, " ; ")])
            .unwrap_err()
            .0
            .contains("names no profiler"));
    }

    #[test]
    fn per_child_variables_reach_only_their_child() {
        let list = format!("/a.so={A};/b.so={A}");
        let specs = children([
            (PROFILERS_VAR, list.as_str()),
            ("CLRPROF_MUX_2_CLRPROF_OUTPUT", "/out/b.jsonl"),
            ("CLRPROF_MUX_1_CLRPROF_CALLS_FILTER", "Calls."),
            ("CLRPROF_MUX_1_CLIENT_DATA", "detach_after_ms=5"),
            ("CLRPROF_MUX_2_CLRPROF_OUTPUT", "/out/b2.jsonl"),
            ("CLRPROF_MUX_LOG", "ignored: no child number"),
        ])
        .unwrap();
        assert_eq!(specs[0].index, 1);
        assert_eq!(
            specs[0].env,
            vec![("CLRPROF_CALLS_FILTER".to_string(), "Calls.".to_string())]
        );
        assert_eq!(specs[0].client_data, b"detach_after_ms=5");
        assert_eq!(
            specs[1].env,
            vec![("CLRPROF_OUTPUT".to_string(), "/out/b2.jsonl".to_string())]
        );
        let e = children([(PROFILERS_VAR, list.as_str()), ("CLRPROF_MUX_3_X", "1")]).unwrap_err();
        assert!(e.0.contains("there is no child 3"), "{e}");
    }

    #[test]
    fn client_data_round_trips() {
        let kids = vec![("/a.so".to_string(), parse_clsid(A).unwrap())];
        let text = client_data(
            &kids,
            &[(
                1,
                "CLIENT_DATA".into(),
                "output=/o;detach_after_ms=1".into(),
            )],
        )
        .unwrap();
        let specs = from_client_data(text.as_bytes()).unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].path, "/a.so");
        assert_eq!(specs[0].client_data, b"output=/o;detach_after_ms=1");
        assert!(from_client_data(b"nonsense").is_err());
    }

    #[test]
    fn stems_drop_the_directory_and_extension() {
        let spec = |p: &str| ChildSpec {
            index: 1,
            path: p.into(),
            clsid: GUID::zeroed(),
            env: vec![],
            client_data: vec![],
        };
        assert_eq!(spec("/x/y/libjit_tracer.so").stem(), "libjit_tracer");
        assert_eq!(spec("Z:\\x\\jit_tracer.dll").stem(), "jit_tracer");
        assert_eq!(spec("plain").stem(), "plain");
    }
}
