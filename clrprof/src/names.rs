//! Names of functions and classes, and a cache that resolves each once.
//!
//! Names follow the form used across clrprof's tools: methods as
//! `Namespace.Type+Nested::Method`, types as `Namespace.Type+Nested`, with
//! the generic arity as metadata stores it (``List`1``).

use crate::error::Result;
use crate::ids::{ClassId, FunctionId, RawClassId, RawFunctionId};
use crate::info::{MetaDataOpen, ProfilerInfo};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Arc, RwLock};

impl ProfilerInfo {
    /// `Namespace.Type+Nested::Method` of a function.
    pub fn function_name(&self, function: FunctionId<'_>) -> Result<String> {
        let (metadata, token) = self.token_and_metadata_from_function(function)?;
        metadata.method_name(token)
    }

    /// `Namespace.Type+Nested` of a class (the generic definition's name for
    /// instantiations; arrays and other composite types have no definition
    /// and report the runtime's error).
    pub fn class_name(&self, class: ClassId<'_>) -> Result<String> {
        let info = self.class_info(class)?;
        let metadata = self.module_metadata(info.module, MetaDataOpen::Read)?;
        metadata.type_name(info.type_def)
    }
}

const SHARDS: usize = 16;

/// A concurrent map from a raw ID to its name, sharded so readers on
/// different threads rarely touch the same lock.
struct ShardedNames<K> {
    hasher: RandomState,
    shards: [RwLock<HashMap<K, Arc<str>>>; SHARDS],
}

impl<K: Hash + Eq + Copy> ShardedNames<K> {
    fn new() -> Self {
        ShardedNames {
            hasher: RandomState::new(),
            shards: std::array::from_fn(|_| RwLock::new(HashMap::new())),
        }
    }

    fn shard(&self, key: &K) -> &RwLock<HashMap<K, Arc<str>>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }

    fn get(&self, key: &K) -> Option<Arc<str>> {
        self.shard(key).read().ok()?.get(key).cloned()
    }

    fn insert(&self, key: K, name: Arc<str>) -> Arc<str> {
        if let Ok(mut map) = self.shard(&key).write() {
            return map.entry(key).or_insert(name).clone();
        }
        name
    }

    fn remove(&self, key: &K) {
        if let Ok(mut map) = self.shard(key).write() {
            map.remove(key);
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().map(|m| m.len()).unwrap_or(0))
            .sum()
    }
}

/// Resolves `FunctionId`s and `ClassId`s to names once, then answers from
/// memory without runtime calls.
///
/// Keys are raw IDs: the cache does not keep IDs alive. Remove entries when
/// the runtime says the ID is gone ([`NameCache::forget_class`] from
/// `class_unload_started`), since a later ID can reuse the same value.
pub struct NameCache {
    functions: ShardedNames<RawFunctionId>,
    classes: ShardedNames<RawClassId>,
}

impl Default for NameCache {
    fn default() -> Self {
        Self::new()
    }
}

impl NameCache {
    /// An empty cache.
    pub fn new() -> Self {
        NameCache {
            functions: ShardedNames::new(),
            classes: ShardedNames::new(),
        }
    }

    /// The function's name, asking the runtime the first time only.
    pub fn function_name(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Result<Arc<str>> {
        let key = function.to_raw();
        if let Some(name) = self.functions.get(&key) {
            return Ok(name);
        }
        let name: Arc<str> = info.function_name(function)?.into();
        Ok(self.functions.insert(key, name))
    }

    /// The class's name, asking the runtime the first time only.
    pub fn class_name(&self, info: &ProfilerInfo, class: ClassId<'_>) -> Result<Arc<str>> {
        let key = class.to_raw();
        if let Some(name) = self.classes.get(&key) {
            return Ok(name);
        }
        let name: Arc<str> = info.class_name(class)?.into();
        Ok(self.classes.insert(key, name))
    }

    /// A cached function name, without any runtime call (usable with raw IDs,
    /// e.g. after resuming from a sample).
    pub fn cached_function_name(&self, function: RawFunctionId) -> Option<Arc<str>> {
        self.functions.get(&function)
    }

    /// Records a name obtained elsewhere.
    pub fn insert_function_name(&self, function: RawFunctionId, name: &str) -> Arc<str> {
        self.functions.insert(function, name.into())
    }

    /// Forgets a class (call from `class_unload_started`).
    pub fn forget_class(&self, class: RawClassId) {
        self.classes.remove(&class);
    }

    /// Forgets a function.
    pub fn forget_function(&self, function: RawFunctionId) {
        self.functions.remove(&function);
    }

    /// Number of cached function names.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_answers_without_runtime_after_insert() {
        let cache = NameCache::new();
        let id = RawFunctionId(0x42);
        assert!(cache.cached_function_name(id).is_none());
        cache.insert_function_name(id, "A.B+C::M");
        assert_eq!(cache.cached_function_name(id).as_deref(), Some("A.B+C::M"));
        assert_eq!(cache.function_count(), 1);
        cache.forget_function(id);
        assert!(cache.cached_function_name(id).is_none());
    }

    #[test]
    fn concurrent_readers_and_writers_agree() {
        let cache = Arc::new(NameCache::new());
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let c = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..1000usize {
                        let id = RawFunctionId(i);
                        let n = c.insert_function_name(id, &format!("f{i}"));
                        assert_eq!(&*n, format!("f{i}"));
                        let _ = t;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(cache.function_count(), 1000);
    }
}
