//! Instrumented-code maps of two rewriters of one method.
//!
//! A rewriter tells the runtime (for debuggers and IL-to-native maps) where
//! each original IL offset went: `SetILInstrumentedCodeMap` with
//! `(oldOffset, newOffset)` entries. When two children rewrite the same
//! method in one `JITCompilationStarted`, the second one's "old" offsets
//! are offsets in the first one's body, so its map alone would be wrong.
//! The multiplexer composes them: an original offset `o` that the first
//! map sends to `m` goes where the second map sends `m`. When the second
//! map has no entry for `m` exactly, the nearest entry below it is used,
//! shifted by the distance, and the entry is marked inexact
//! (`fAccurate = FALSE`).

use clrprof::sys::*;
use std::cell::RefCell;

thread_local! {
    // reentrancy: mux-fan-out
    /// The function whose `JITCompilationStarted` is being delivered on
    /// this thread, and the map given for it so far.
    static CURRENT: RefCell<Option<(FunctionID, Option<Vec<COR_IL_MAP>>)>> =
        const { RefCell::new(None) };
}

/// Marks the `JITCompilationStarted` of `function` on this thread until dropped.
pub(crate) struct Compilation(());

impl Compilation {
    pub(crate) fn begin(function: FunctionID) -> Compilation {
        let _ = CURRENT.try_with(|c| {
            if let Ok(mut c) = c.try_borrow_mut() {
                *c = Some((function, None));
            }
        });
        Compilation(())
    }
}

impl Drop for Compilation {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.try_borrow_mut().map(|mut c| c.take()));
    }
}

/// The map to give the runtime for a child's `SetILInstrumentedCodeMap`:
/// `None` to pass the child's own on (first map of the compilation, or a
/// call outside one), `Some(composed)` otherwise.
pub(crate) fn combine(
    function: FunctionID,
    start_jit: bool,
    entries: &[COR_IL_MAP],
) -> Option<Vec<COR_IL_MAP>> {
    CURRENT
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            let (f, previous) = c.as_mut()?;
            if *f != function || !start_jit {
                return None;
            }
            match previous {
                None => {
                    *previous = Some(entries.to_vec());
                    None
                }
                Some(first) => {
                    let composed = compose(first, entries);
                    *first = composed.clone();
                    Some(composed)
                }
            }
        })
        .ok()
        .flatten()
}

/// `first`: original → intermediate; `second`: intermediate → final.
pub(crate) fn compose(first: &[COR_IL_MAP], second: &[COR_IL_MAP]) -> Vec<COR_IL_MAP> {
    first
        .iter()
        .map(|e| {
            let exact = second.iter().find(|s| s.oldOffset == e.newOffset);
            let (new, accurate) = match exact {
                Some(s) => (s.newOffset, s.fAccurate != 0),
                None => match second
                    .iter()
                    .filter(|s| s.oldOffset <= e.newOffset)
                    .max_by_key(|s| s.oldOffset)
                {
                    Some(s) => (s.newOffset + (e.newOffset - s.oldOffset), false),
                    None => (e.newOffset, false),
                },
            };
            COR_IL_MAP {
                oldOffset: e.oldOffset,
                newOffset: new,
                fAccurate: (accurate && e.fAccurate != 0) as BOOL,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(old: u32, new: u32) -> COR_IL_MAP {
        COR_IL_MAP {
            oldOffset: old,
            newOffset: new,
            fAccurate: 1,
        }
    }

    fn pairs(map: &[COR_IL_MAP]) -> Vec<(u32, u32, bool)> {
        map.iter()
            .map(|e| (e.oldOffset, e.newOffset, e.fAccurate != 0))
            .collect()
    }

    #[test]
    fn two_entry_probes_shift_twice() {
        // Each rewriter inserts a 13-byte probe at entry.
        let first = [m(0, 13), m(5, 18), m(9, 22)];
        let second = [m(0, 13), m(13, 26), m(18, 31), m(22, 35)];
        assert_eq!(
            pairs(&compose(&first, &second)),
            vec![(0, 26, true), (5, 31, true), (9, 35, true)]
        );
    }

    #[test]
    fn missing_entries_are_shifted_and_inexact() {
        let first = [m(0, 10), m(4, 20)];
        let second = [m(0, 5), m(10, 15)];
        assert_eq!(
            pairs(&compose(&first, &second)),
            vec![(0, 15, true), (4, 25, false)]
        );
    }

    #[test]
    fn only_the_second_map_of_one_compilation_is_composed() {
        assert!(
            combine(7, true, &[m(0, 1)]).is_none(),
            "outside a compilation"
        );
        let _c = Compilation::begin(7);
        assert!(combine(8, true, &[m(0, 1)]).is_none(), "another function");
        assert!(combine(7, true, &[m(0, 2)]).is_none(), "the first map");
        let composed = combine(7, true, &[m(2, 5)]).unwrap();
        assert_eq!(pairs(&composed), vec![(0, 5, true)]);
    }
}
