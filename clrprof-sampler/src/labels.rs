//! Trace-context labels: which request each sample was taken for.
//!
//! Every sampling source takes the sampled thread's trace context with its
//! stack ([`clrprof::context`]; the `SuspendRuntime` source reads the
//! walked thread's record while the runtime is suspended), and the profile
//! keeps samples of different contexts apart. In pprof each labelled
//! sample carries four string labels, and in OTLP the same four attributes
//! plus a link to its trace and span:
//!
//! | label | value |
//! |---|---|
//! | `trace_id` | the W3C trace id, 32 lowercase hex digits |
//! | `span_id` | the span the thread worked for, 16 hex digits (Pyroscope's span-profile label) |
//! | `local_root_span_id` | that span's local root (the request's server span), 16 hex digits |
//! | `trace_endpoint` | the root span's route (`http.route`) or name, where known |
//!
//! A sample without a context has none of them. The endpoint is looked up
//! when the profile is encoded (the route of a request is known only when
//! its root span ends, after most of its samples were taken); a request
//! still running when its period is encoded has no endpoint label yet.

use clrprof::context::{self, TraceContext};
use std::collections::HashMap;
use std::sync::Arc;

/// The trace id label.
pub const TRACE_ID: &str = "trace_id";
/// The span id label (Pyroscope's name for it).
pub const SPAN_ID: &str = "span_id";
/// The local root span id label.
pub const LOCAL_ROOT_SPAN_ID: &str = "local_root_span_id";
/// The endpoint label.
pub const TRACE_ENDPOINT: &str = "trace_endpoint";

/// The distinct trace contexts of one profile (period), each named by a
/// tag: 1 and up, 0 meaning "no context".
#[derive(Clone, Debug, Default)]
pub(crate) struct Contexts {
    list: Vec<(TraceContext, Option<Arc<str>>)>,
    index: HashMap<TraceContext, u32>,
}

impl Contexts {
    /// The tag of `context` (0 for none), added if new.
    #[inline]
    pub(crate) fn tag(&mut self, context: Option<&TraceContext>) -> u32 {
        let Some(c) = context else {
            return 0;
        };
        if let Some(&t) = self.index.get(c) {
            return t;
        }
        self.list.push((*c, None));
        let t = self.list.len() as u32;
        self.index.insert(*c, t);
        t
    }

    /// The tag of `context`, if it is held.
    pub(crate) fn find(&self, context: &TraceContext) -> Option<u32> {
        self.index.get(context).copied()
    }

    /// The context of `tag`.
    pub(crate) fn get(&self, tag: u32) -> Option<&TraceContext> {
        let i = (tag as usize).checked_sub(1)?;
        self.list.get(i).map(|(c, _)| c)
    }

    /// Gives `tag`'s context the endpoint `name` (read back from a file).
    pub(crate) fn set_endpoint(&mut self, tag: u32, name: &str) {
        if let Some(i) = (tag as usize).checked_sub(1) {
            if let Some(e) = self.list.get_mut(i) {
                e.1 = Some(name.into());
            }
        }
    }

    /// The endpoint of `tag`'s context: the one it was given, else the
    /// process's endpoint table's ([`context::resolve_endpoint`]; takes that
    /// table's lock).
    pub(crate) fn endpoint(&self, tag: u32) -> Option<Arc<str>> {
        let i = (tag as usize).checked_sub(1)?;
        let (c, name) = self.list.get(i)?;
        name.clone().or_else(|| context::resolve_endpoint(c))
    }

    /// Distinct contexts held.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}

/// The labels of a sample in context `c` with endpoint `endpoint`: key and
/// value, in the order the table above lists them.
pub fn labels(c: &TraceContext, endpoint: Option<&str>) -> Vec<(&'static str, String)> {
    let mut l = vec![
        (TRACE_ID, c.trace_id_hex()),
        (SPAN_ID, c.span_id_hex()),
        (LOCAL_ROOT_SPAN_ID, c.local_root_span_id_hex()),
    ];
    if let Some(e) = endpoint {
        l.push((TRACE_ENDPOINT, e.to_string()));
    }
    l
}

/// Parses the hex digits of an id label into `out`; `false` if they are
/// not exactly `2 × out.len()` hex digits.
pub(crate) fn parse_hex(text: &str, out: &mut [u8]) -> bool {
    let t = text.as_bytes();
    if t.len() != out.len() * 2 {
        return false;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    for (i, o) in out.iter_mut().enumerate() {
        match (digit(t[2 * i]), digit(t[2 * i + 1])) {
            (Some(h), Some(l)) => *o = h << 4 | l,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_per_distinct_context_and_0_is_none() {
        let mut c = Contexts::default();
        let a = TraceContext {
            trace_id: [1; 16],
            span_id: [2; 8],
            local_root_span_id: [3; 8],
            endpoint: 0,
        };
        let b = TraceContext {
            span_id: [4; 8],
            ..a
        };
        assert_eq!(c.tag(None), 0);
        assert_eq!(c.tag(Some(&a)), 1);
        assert_eq!(c.tag(Some(&b)), 2);
        assert_eq!(c.tag(Some(&a)), 1);
        assert_eq!(c.get(2), Some(&b));
        assert_eq!(c.get(0), None);
        assert_eq!(c.len(), 2);
        c.set_endpoint(1, "GET /x");
        assert_eq!(c.endpoint(1).as_deref(), Some("GET /x"));
        let l = labels(&a, Some("GET /x"));
        assert_eq!(l[0], (TRACE_ID, "01".repeat(16)));
        assert_eq!(l[1], (SPAN_ID, "02".repeat(8)));
        assert_eq!(l[2], (LOCAL_ROOT_SPAN_ID, "03".repeat(8)));
        assert_eq!(l[3], (TRACE_ENDPOINT, "GET /x".to_string()));
        let mut back = [0u8; 8];
        assert!(parse_hex(&l[1].1, &mut back));
        assert_eq!(back, [2; 8]);
        assert!(!parse_hex("0g", &mut [0u8; 1]));
        assert!(!parse_hex("00", &mut [0u8; 2]));
    }
}
