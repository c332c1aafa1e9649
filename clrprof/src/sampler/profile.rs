//! The sampled profile: distinct stacks per thread, with counts.

use crate::ids::RawThreadId;
use crate::output::push_json_string;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::Arc;

/// Distinct stacks (root first, as indices into the frame names) and how
/// often each was seen, per thread.
#[derive(Default, Debug, Clone)]
pub struct Profile {
    names: Vec<Arc<str>>,
    by_name: HashMap<Arc<str>, u32>,
    stacks: HashMap<(RawThreadId, Vec<u32>), u64>,
    samples: u64,
    truncated: u64,
    empty: u64,
}

impl Profile {
    /// An empty profile.
    pub fn new() -> Self {
        Self::default()
    }

    /// The index of frame name `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        let name: Arc<str> = name.into();
        self.names.push(name.clone());
        self.by_name.insert(name, i);
        i
    }

    /// Counts one sample of `thread` with `stack` (root first, interned).
    pub fn add(&mut self, thread: RawThreadId, stack: &[u32], truncated: bool) {
        self.samples += 1;
        if truncated {
            self.truncated += 1;
        }
        if stack.is_empty() {
            self.empty += 1;
        }
        match self.stacks.get_mut(&(thread, stack.to_vec())) {
            Some(n) => *n += 1,
            None => {
                self.stacks.insert((thread, stack.to_vec()), 1);
            }
        }
    }

    /// Samples counted.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples whose stack was cut at the depth limit.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Samples with no frame at all (left out of the folded output).
    pub fn empty(&self) -> u64 {
        self.empty
    }

    /// Distinct threads sampled.
    pub fn threads(&self) -> usize {
        let mut t: Vec<RawThreadId> = self.stacks.keys().map(|(t, _)| *t).collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    }

    /// Stacks as frame names joined with `;` (root first), merged over
    /// threads, with counts, sorted by stack text.
    pub fn folded_lines(&self) -> Vec<(String, u64)> {
        let mut merged: BTreeMap<String, u64> = BTreeMap::new();
        for ((_, stack), n) in &self.stacks {
            if stack.is_empty() {
                continue;
            }
            *merged.entry(self.stack_text(stack)).or_default() += n;
        }
        merged.into_iter().collect()
    }

    fn stack_text(&self, stack: &[u32]) -> String {
        let mut line = String::new();
        for (k, &i) in stack.iter().enumerate() {
            if k > 0 {
                line.push(';');
            }
            // Folded format separators must not appear inside a frame.
            let name = self.names.get(i as usize).map(|n| &**n).unwrap_or("?");
            line.extend(name.chars().map(|c| match c {
                ';' => ':',
                '\n' | '\r' => ' ',
                c => c,
            }));
        }
        line
    }

    /// Writes folded stacks: `root;...;leaf N`, one line per distinct stack.
    pub fn write_folded(&self, out: &mut impl Write) -> io::Result<()> {
        for (stack, n) in self.folded_lines() {
            writeln!(out, "{stack} {n}")?;
        }
        Ok(())
    }

    /// Writes a speedscope file (`https://www.speedscope.app/file-format-schema.json`):
    /// one sampled profile per thread, frames shared.
    pub fn write_speedscope(&self, name: &str, out: &mut impl Write) -> io::Result<()> {
        let mut s = String::with_capacity(1024);
        s.push_str("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"clrprof\",\"name\":");
        push_json_string(&mut s, name);
        s.push_str(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
        for (i, n) in self.names.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"name\":");
            push_json_string(&mut s, n);
            s.push('}');
        }
        s.push_str("]},\"profiles\":[");
        let mut by_thread: BTreeMap<RawThreadId, Vec<(&Vec<u32>, u64)>> = BTreeMap::new();
        for ((t, stack), n) in &self.stacks {
            by_thread.entry(*t).or_default().push((stack, *n));
        }
        for (k, (thread, mut stacks)) in by_thread.into_iter().enumerate() {
            stacks.sort();
            if k > 0 {
                s.push(',');
            }
            let total: u64 = stacks.iter().map(|(_, n)| n).sum();
            let _ = write!(
                s,
                "{{\"type\":\"sampled\",\"name\":\"thread {:#x}\",\"unit\":\"none\",\"startValue\":0,\"endValue\":{total},\"samples\":[",
                thread.0
            );
            for (j, (stack, _)) in stacks.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                s.push('[');
                for (m, i) in stack.iter().enumerate() {
                    if m > 0 {
                        s.push(',');
                    }
                    let _ = write!(s, "{i}");
                }
                s.push(']');
            }
            s.push_str("],\"weights\":[");
            for (j, (_, n)) in stacks.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                let _ = write!(s, "{n}");
            }
            s.push_str("]}");
        }
        s.push_str("]}");
        out.write_all(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let mut p = Profile::new();
        let main = p.intern("Hot.Program::Main");
        let spin = p.intern("Hot.Program::Spin");
        let odd = p.intern("A;B\nC");
        let (t1, t2) = (RawThreadId(0x10), RawThreadId(0x20));
        p.add(t1, &[main, spin], false);
        p.add(t1, &[main, spin], false);
        p.add(t2, &[main, spin], true);
        p.add(t2, &[main], false);
        p.add(t2, &[odd], false);
        p
    }

    #[test]
    fn folded_merges_threads_one_line_per_distinct_stack() {
        let p = profile();
        let mut out = Vec::new();
        p.write_folded(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "A:B C 1\nHot.Program::Main 1\nHot.Program::Main;Hot.Program::Spin 3\n"
        );
        assert_eq!((p.samples(), p.truncated(), p.threads()), (5, 1, 2));
    }

    #[test]
    fn speedscope_is_valid_json_with_one_profile_per_thread() {
        let p = profile();
        let mut out = Vec::new();
        p.write_speedscope("test", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Shape checks without a JSON parser in this crate.
        assert!(
            text.starts_with("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"")
        );
        assert_eq!(text.matches("\"type\":\"sampled\"").count(), 2);
        assert!(text.contains("{\"name\":\"A;B\\nC\"}"));
        assert!(text.contains("\"name\":\"thread 0x10\",\"unit\":\"none\",\"startValue\":0,\"endValue\":2,\"samples\":[[0,1]],\"weights\":[2]"));
        assert_eq!(text.matches('{').count(), text.matches('}').count());
        assert_eq!(text.matches('[').count(), text.matches(']').count());
    }
}
