//! Interned names: each distinct string kept once and named by its index,
//! as profiles refer to frames and type labels.

use std::collections::HashMap;
use std::sync::Arc;

/// Distinct strings in the order first seen; a string's index never changes.
#[derive(Default, Debug, Clone)]
pub(crate) struct Names {
    names: Vec<Arc<str>>,
    by_name: HashMap<Arc<str>, u32>,
}

impl Names {
    /// The index of `name`, adding it if new.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(i) = self.find(name) {
            return i;
        }
        let i = self.names.len() as u32;
        let name: Arc<str> = name.into();
        self.names.push(name.clone());
        self.by_name.insert(name, i);
        i
    }

    /// The index of `name`, if it was interned.
    pub(crate) fn find(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The name at `index`, if there is one.
    pub(crate) fn get(&self, index: u32) -> Option<&str> {
        self.names.get(index as usize).map(|n| &**n)
    }

    /// How many distinct names.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// Every name, by index.
    pub(crate) fn as_slice(&self) -> &[Arc<str>] {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use super::Names;

    #[test]
    fn a_name_keeps_its_first_index() {
        let mut names = Names::default();
        assert_eq!(names.intern("a"), 0);
        assert_eq!(names.intern("b"), 1);
        assert_eq!(names.intern("a"), 0);
        assert_eq!(names.len(), 2);
        assert_eq!(names.find("b"), Some(1));
        assert_eq!(names.find("c"), None);
        assert_eq!(names.get(1), Some("b"));
        assert_eq!(names.get(2), None);
        assert_eq!(&*names.as_slice()[0], "a");
    }
}
