//! The client data an attach trigger hands to `InitializeForAttach`.

use core::str::Utf8Error;

/// The client data bytes of `InitializeForAttach` (`pvClientData`,
/// `cbClientData`): opaque to the runtime, whatever the trigger sent.
///
/// clrprof's own tools send UTF-8 text of the form `key=value;key=value`
/// (e.g. `output=/tmp/out.jsonl;detach_after_ms=500`); [`ClientData::get`]
/// and [`ClientData::pairs`] read that form. A trailing NUL (sent by C
/// triggers that include the terminator) is not part of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientData<'a> {
    bytes: &'a [u8],
}

impl<'a> ClientData<'a> {
    /// Wraps the bytes `initialize_for_attach` received.
    pub fn new(bytes: &'a [u8]) -> Self {
        ClientData { bytes }
    }

    /// The raw bytes, exactly as sent.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes as UTF-8 text, without one trailing NUL.
    pub fn text(&self) -> Result<&'a str, Utf8Error> {
        let b = self.bytes.strip_suffix(&[0]).unwrap_or(self.bytes);
        core::str::from_utf8(b)
    }

    /// The `key=value` pairs of the text, in order. Entries are separated by
    /// `;`; keys and values are trimmed of surrounding whitespace; an entry
    /// without `=` is a key with an empty value; empty entries are skipped.
    /// Not UTF-8 means no pairs.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.text()
            .unwrap_or("")
            .split(';')
            .filter(|entry| !entry.trim().is_empty())
            .map(|entry| match entry.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (entry.trim(), ""),
            })
    }

    /// The value of the first pair named `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The value of `key` parsed as `T`; `None` when absent or unparsable.
    pub fn parse<T: core::str::FromStr>(&self, key: &str) -> Option<T> {
        self.get(key).and_then(|v| v.parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_key_value_pairs() {
        let d = ClientData::new(b" output = /tmp/a b.jsonl ;detach_after_ms=250;;flag\0");
        assert_eq!(
            d.text().unwrap(),
            " output = /tmp/a b.jsonl ;detach_after_ms=250;;flag"
        );
        assert_eq!(
            d.pairs().collect::<Vec<_>>(),
            vec![
                ("output", "/tmp/a b.jsonl"),
                ("detach_after_ms", "250"),
                ("flag", "")
            ]
        );
        assert_eq!(d.get("output"), Some("/tmp/a b.jsonl"));
        assert_eq!(d.parse::<u64>("detach_after_ms"), Some(250));
        assert_eq!(d.parse::<u64>("output"), None);
        assert_eq!(d.get("missing"), None);
    }

    #[test]
    fn value_may_contain_equals_and_invalid_utf8_gives_no_pairs() {
        let d = ClientData::new(b"expr=a=b");
        assert_eq!(d.get("expr"), Some("a=b"));
        let bad = ClientData::new(&[0xff, b'=', b'1']);
        assert!(bad.text().is_err());
        assert_eq!(bad.pairs().count(), 0);
        assert_eq!(ClientData::new(b"").pairs().count(), 0);
    }
}
