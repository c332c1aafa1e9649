//! Counting stacks without allocating: a map from (thread, stack) to a
//! value whose lookups build no key, hashed with a cheap word hasher.

use clrprof::ids::RawThreadId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast, non-cryptographic hasher for the sampler's own keys (frame
/// indices and `FunctionID`s, which come from the runtime, not from an
/// adversary): each 64-bit word is folded in with a rotate, a xor and a
/// multiply by an odd constant; `finish` mixes once more and brings the
/// well-mixed high half down to the low bits the table indexes with.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WordHasher(u64);

/// An odd 64-bit constant with well-spread bits (from the digits of the
/// golden ratio).
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // One more multiply, then the product's high half (where every
        // input bit has an effect) to the low bits.
        (self.0 ^ (self.0 >> 32))
            .wrapping_mul(MULTIPLIER)
            .rotate_left(32)
    }
}

/// The `BuildHasher` of [`WordHasher`].
pub(crate) type WordHash = BuildHasherDefault<WordHasher>;

/// Distinct (thread, tag, stack) triples, each with a value; the tag is a
/// small number the owner gives meaning to (the profile's index of the
/// sample's trace context, 0 for none). The key is stored as one boxed
/// slice, `[thread low 32 bits, thread high 32 bits, tag, frames...]`; a
/// lookup builds it in a reused scratch buffer, so counting a stack seen
/// before allocates nothing, and a new one allocates its key once.
#[derive(Clone, Debug)]
pub(crate) struct StackMap<V> {
    map: HashMap<Box<[u32]>, V, WordHash>,
    scratch: Vec<u32>,
}

impl<V> Default for StackMap<V> {
    fn default() -> Self {
        StackMap {
            map: HashMap::default(),
            scratch: Vec::new(),
        }
    }
}

fn split(key: &[u32]) -> (RawThreadId, u32, &[u32]) {
    let thread = u64::from(key[0]) | (u64::from(key[1]) << 32);
    (RawThreadId(thread as usize), key[2], &key[3..])
}

impl<V: Default> StackMap<V> {
    /// Applies `f` to the value of (`thread`, `stack`), a default one if new.
    #[inline]
    pub(crate) fn update(&mut self, thread: RawThreadId, stack: &[u32], f: impl FnOnce(&mut V)) {
        self.update_tagged(thread, 0, stack, f)
    }

    /// Applies `f` to the value of (`thread`, `tag`, `stack`), a default
    /// one if new.
    #[inline]
    pub(crate) fn update_tagged(
        &mut self,
        thread: RawThreadId,
        tag: u32,
        stack: &[u32],
        f: impl FnOnce(&mut V),
    ) {
        let t = thread.0 as u64;
        self.scratch.clear();
        self.scratch.push(t as u32);
        self.scratch.push((t >> 32) as u32);
        self.scratch.push(tag);
        self.scratch.extend_from_slice(stack);
        if let Some(v) = self.map.get_mut(self.scratch.as_slice()) {
            f(v);
            return;
        }
        let mut v = V::default();
        f(&mut v);
        self.map.insert(self.scratch.as_slice().into(), v);
    }
}

impl<V> StackMap<V> {
    /// Distinct pairs held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// (thread, root-first stack, value) of every entry, in no order (an
    /// entry per tag: a stack seen with two tags comes twice).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (RawThreadId, &[u32], &V)> {
        self.map.iter().map(|(k, v)| {
            let (t, _, s) = split(k);
            (t, s, v)
        })
    }

    /// (thread, tag, root-first stack, value) of every entry, in no order.
    pub(crate) fn iter_tagged(&self) -> impl Iterator<Item = (RawThreadId, u32, &[u32], &V)> {
        self.map.iter().map(|(k, v)| {
            let (t, tag, s) = split(k);
            (t, tag, s, v)
        })
    }

    /// Takes every pair out, leaving the map empty (its scratch kept).
    pub(crate) fn take(&mut self) -> StackMap<V> {
        StackMap {
            map: std::mem::take(&mut self.map),
            scratch: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn counts_per_thread_and_stack() {
        let mut m: StackMap<u64> = StackMap::default();
        let big = RawThreadId(0x7f00_0000_1234);
        m.update(big, &[1, 2, 3], |c| *c += 1);
        m.update(big, &[1, 2, 3], |c| *c += 1);
        m.update(RawThreadId(0x1234), &[1, 2, 3], |c| *c += 5);
        m.update(big, &[1, 2], |c| *c += 1);
        m.update(big, &[], |c| *c += 1);
        assert_eq!(m.len(), 4);
        let mut all: Vec<_> = m.iter().map(|(t, s, n)| (t, s.to_vec(), *n)).collect();
        all.sort();
        assert_eq!(
            all,
            vec![
                (RawThreadId(0x1234), vec![1, 2, 3], 5),
                (big, vec![], 1),
                (big, vec![1, 2], 1),
                (big, vec![1, 2, 3], 2),
            ]
        );
        let taken = m.take();
        assert_eq!((taken.len(), m.len()), (4, 0));
    }

    #[test]
    fn tags_keep_entries_apart() {
        let mut m: StackMap<u64> = StackMap::default();
        let t = RawThreadId(0x10);
        m.update_tagged(t, 0, &[1, 2], |c| *c += 1);
        m.update_tagged(t, 7, &[1, 2], |c| *c += 1);
        m.update_tagged(t, 7, &[1, 2], |c| *c += 1);
        let mut all: Vec<_> = m
            .iter_tagged()
            .map(|(t, tag, s, n)| (t, tag, s.to_vec(), *n))
            .collect();
        all.sort();
        assert_eq!(all, vec![(t, 0, vec![1, 2], 1), (t, 7, vec![1, 2], 2)]);
        // Untagged iteration sees both entries.
        assert_eq!(m.iter().count(), 2);
    }

    #[test]
    fn aligned_ids_spread_over_low_bits() {
        // FunctionIDs are 8-byte aligned pointers: the low bits the table
        // indexes with must still differ.
        let h = WordHash::default();
        let mut low: Vec<u64> = (0..64u64)
            .map(|i| h.hash_one(0x7f12_3456_0000usize + (i as usize) * 8) & 63)
            .collect();
        low.sort_unstable();
        low.dedup();
        // 64 random keys fill about 40 of 64 buckets.
        assert!(low.len() >= 34, "only {} distinct buckets of 64", low.len());
    }
}
