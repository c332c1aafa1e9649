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

impl<'s> ProfilerInfo<'s> {
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

    fn clear(&self) {
        for shard in &self.shards {
            if let Ok(mut map) = shard.write() {
                map.clear();
            }
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
/// Keys are raw IDs: the cache does not keep IDs alive, and the runtime
/// reuses ID values (a dynamic method's `FunctionID` goes to the next
/// dynamic method once the first is collected). So the cache is an SDK
/// component ([`NameCache::register`]) that the SDK itself tells what is
/// gone: `DynamicMethodUnloaded` forgets that function, and any
/// `ModuleUnloadStarted` (a collectible assembly, with every class and
/// function of it and every generic instantiation over its types) empties
/// the cache; `ClassUnloadStarted`, when some other part asks for class
/// loads, forgets the class. A name is never given for an ID that now names
/// something else.
pub struct NameCache {
    functions: ShardedNames<RawFunctionId>,
    classes: ShardedNames<RawClassId>,
}

impl NameCache {
    /// An empty cache that hears of no unloads: for tests and benchmarks
    /// against the fake runtime only. A profiler uses [`NameCache::register`].
    #[cfg(any(test, feature = "fake-runtime"))]
    pub fn unregistered() -> Self {
        NameCache {
            functions: ShardedNames::new(),
            classes: ShardedNames::new(),
        }
    }

    /// A cache for the runtime of `info`, registered as an SDK component
    /// during `Initialize` (see [`crate::component`]): it adds
    /// `MONITOR_MODULE_LOADS` and, on runtimes with `ICorProfilerCallback9`
    /// (.NET Core 3.0 and later; the SDK checks for `ICorProfilerInfo10`,
    /// which arrived in the same release), `HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS`
    /// to the event mask. Fails with [`crate::Error::NotInInitialize`]
    /// elsewhere.
    pub fn register(info: &ProfilerInfo) -> Result<Arc<NameCache>> {
        let cache = Arc::new(NameCache {
            functions: ShardedNames::new(),
            classes: ShardedNames::new(),
        });
        let dynamic_unloads = info.raw_info10("ICorProfilerInfo10").is_ok();
        info.register(Arc::new(NameCacheComponent {
            cache: cache.clone(),
            dynamic_unloads,
        }))?;
        Ok(cache)
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

    /// Forgets a class (the SDK does this at `ClassUnloadStarted`).
    pub fn forget_class(&self, class: RawClassId) {
        self.classes.remove(&class);
    }

    /// Forgets a function (the SDK does this at `DynamicMethodUnloaded`).
    pub fn forget_function(&self, function: RawFunctionId) {
        self.functions.remove(&function);
    }

    /// Number of cached function names.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Forgets every name.
    fn clear(&self) {
        self.functions.clear();
        self.classes.clear();
    }
}

/// The SDK component behind [`NameCache::register`].
struct NameCacheComponent {
    cache: Arc<NameCache>,
    dynamic_unloads: bool,
}

impl crate::component::Component for NameCacheComponent {
    fn name(&self) -> &'static str {
        "name-cache"
    }

    fn masks(&self) -> crate::EventMasks {
        crate::EventMasks {
            low: crate::EventMask::MONITOR_MODULE_LOADS,
            high: if self.dynamic_unloads {
                crate::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS
            } else {
                crate::HighEventMask::empty()
            },
        }
    }

    fn module_unload_started(&self, _info: &ProfilerInfo, _module: crate::ModuleId<'_>) {
        self.cache.clear();
    }

    fn class_unload_started(&self, _info: &ProfilerInfo, class: ClassId<'_>) {
        self.cache.forget_class(class.to_raw());
    }

    fn dynamic_method_unloaded(&self, _info: &ProfilerInfo, function: RawFunctionId) {
        self.cache.forget_function(function);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_answers_without_runtime_after_insert() {
        let cache = NameCache::unregistered();
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
        let cache = Arc::new(NameCache::unregistered());
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
