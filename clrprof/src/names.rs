//! Names of functions and classes, and a cache that resolves each once.
//!
//! Names follow the form used across clrprof's tools: methods as
//! `Namespace.Type+Nested::Method`, types as `Namespace.Type+Nested`, with
//! the generic arity as metadata stores it (``List`1``). A dynamic method
//! (a `DynamicMethod`, a compiled expression tree, an IL stub) has no
//! metadata; it is named by the runtime's name for it
//! (`GetDynamicFunctionInfo`), e.g. the `DynamicMethod`'s own name or
//! `IL_STUB_PInvoke`.

use crate::error::Result;
use crate::ids::{ClassId, FunctionId, RawClassId, RawFunctionId};
use crate::info::{MetaDataOpen, ProfilerInfo};
use crate::runtimes::RuntimeSlot;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

impl<'s> ProfilerInfo<'s> {
    /// `Namespace.Type+Nested::Method` of a function, or the runtime's name
    /// of a dynamic method.
    ///
    /// On runtimes with `ICorProfilerInfo8` (both .NET Core 3.1 and .NET 8
    /// have it) the function is first asked `IsFunctionDynamic`: a dynamic method has no
    /// metadata token of its own, and reading one for it would name some
    /// unrelated method of its module. Older runtimes answer for metadata.
    pub fn function_name(&self, function: FunctionId<'_>) -> Result<String> {
        if self
            .raw_info8("ICorProfilerInfo8::IsFunctionDynamic")
            .is_ok()
            && self.is_function_dynamic(function)?
        {
            return Ok(self.dynamic_function_info(function)?.name);
        }
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

impl<K: Hash + Eq + Copy> Default for ShardedNames<K> {
    fn default() -> Self {
        Self::new()
    }
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
///
/// Make one (`NameCache::default()`, e.g. as a field of the profiler) and
/// [`register`](NameCache::register) it in `Initialize`; until it is
/// registered with a runtime, asking it a name for that runtime is an
/// [`Error::NotRegistered`](crate::error::Error::NotRegistered).
#[derive(Default)]
pub struct NameCache {
    inner: Arc<Names>,
}

/// The cache's maps, shared with its component.
#[derive(Default)]
struct Names {
    functions: ShardedNames<RawFunctionId>,
    classes: ShardedNames<RawClassId>,
    /// Bit `n`: registered with the runtime in slot `n` (slots >= 64: all
    /// registrations of such runtimes share bit 63 and are checked by list).
    registered: AtomicU64,
    registered_high: Mutex<Vec<RuntimeSlot>>,
}

// provenance: name-cache-runtime
impl NameCache {
    /// An empty cache, not registered with any runtime yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the cache with the runtime of `info` as an SDK component
    /// (see [`crate::component`]), during `Initialize`: it adds
    /// `MONITOR_MODULE_LOADS` and, on runtimes with `ICorProfilerCallback9`
    /// (.NET Core 3.0 and later; the SDK checks for `ICorProfilerInfo10`,
    /// which arrived in the same release), `HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS`
    /// to the event mask. Fails with [`crate::error::Error::NotInInitialize`]
    /// elsewhere. Registering twice with one runtime is harmless.
    pub fn register(&self, info: &ProfilerInfo) -> Result<()> {
        if self.is_registered(info.runtime_slot()) {
            return Ok(());
        }
        let dynamic_unloads = info.raw_info10("ICorProfilerInfo10").is_ok();
        info.register(Arc::new(NameCacheComponent {
            names: self.inner.clone(),
            dynamic_unloads,
        }))?;
        let slot = info.runtime_slot();
        if slot.0 < 63 {
            self.inner
                .registered
                .fetch_or(1 << slot.0, Ordering::SeqCst);
        } else {
            lock(&self.inner.registered_high).push(slot);
            self.inner.registered.fetch_or(1 << 63, Ordering::SeqCst);
        }
        Ok(())
    }

    fn is_registered(&self, slot: RuntimeSlot) -> bool {
        let bits = self.inner.registered.load(Ordering::Relaxed);
        if slot.0 < 63 {
            bits & (1 << slot.0) != 0
        } else {
            bits & (1 << 63) != 0 && lock(&self.inner.registered_high).contains(&slot)
        }
    }

    fn check(&self, info: &ProfilerInfo) -> Result<()> {
        if self.is_registered(info.runtime_slot()) {
            Ok(())
        } else {
            Err(crate::error::Error::NotRegistered {
                what: "NameCache (call NameCache::register in Initialize)",
            })
        }
    }

    /// A cache registered with the fake runtime's slot, for tests and
    /// benchmarks against the fake (which has no unloads to deliver).
    #[cfg(any(test, feature = "fake-runtime"))]
    pub fn for_fake_runtime() -> Self {
        let cache = Self::default();
        // The fake's handles keep the unset slot (`u32::MAX`).
        lock(&cache.inner.registered_high).push(RuntimeSlot(u32::MAX));
        cache.inner.registered.store(1 << 63, Ordering::SeqCst);
        cache
    }

    /// The function's name ([`ProfilerInfo::function_name`]: metadata, or
    /// the runtime's name of a dynamic method), asking the runtime the first
    /// time only. A dynamic method's `FunctionID` that the runtime recycles
    /// after `DynamicMethodUnloaded` is named afresh.
    pub fn function_name(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> Result<Arc<str>> {
        self.check(info)?;
        let key = function.to_raw();
        if let Some(name) = self.inner.functions.get(&key) {
            return Ok(name);
        }
        let name: Arc<str> = info.function_name(function)?.into();
        Ok(self.inner.functions.insert(key, name))
    }

    /// The class's name, asking the runtime the first time only.
    pub fn class_name(&self, info: &ProfilerInfo, class: ClassId<'_>) -> Result<Arc<str>> {
        self.check(info)?;
        let key = class.to_raw();
        if let Some(name) = self.inner.classes.get(&key) {
            return Ok(name);
        }
        let name: Arc<str> = info.class_name(class)?.into();
        Ok(self.inner.classes.insert(key, name))
    }

    /// A cached function name, without any runtime call (usable with raw IDs,
    /// e.g. after resuming from a sample).
    pub fn cached_function_name(&self, function: RawFunctionId) -> Option<Arc<str>> {
        self.inner.functions.get(&function)
    }

    /// Records a name obtained elsewhere.
    pub fn insert_function_name(&self, function: RawFunctionId, name: &str) -> Arc<str> {
        self.inner.functions.insert(function, name.into())
    }

    /// Forgets a class (the SDK does this at `ClassUnloadStarted`).
    pub fn forget_class(&self, class: RawClassId) {
        self.inner.classes.remove(&class);
    }

    /// Forgets a function (the SDK does this at `DynamicMethodUnloaded`).
    pub fn forget_function(&self, function: RawFunctionId) {
        self.inner.functions.remove(&function);
    }

    /// Number of cached function names.
    pub fn function_count(&self) -> usize {
        self.inner.functions.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The SDK component behind [`NameCache::register`].
struct NameCacheComponent {
    names: Arc<Names>,
    dynamic_unloads: bool,
}

impl crate::component::Component for NameCacheComponent {
    fn name(&self) -> &'static str {
        "name-cache"
    }

    fn masks(&self) -> crate::event_mask::EventMasks {
        crate::event_mask::EventMasks {
            low: crate::event_mask::EventMask::MONITOR_MODULE_LOADS,
            high: if self.dynamic_unloads {
                crate::event_mask::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS
            } else {
                crate::event_mask::HighEventMask::empty()
            },
        }
    }

    fn module_unload_started(&self, _info: &ProfilerInfo, _module: crate::ids::ModuleId<'_>) {
        self.names.functions.clear();
        self.names.classes.clear();
    }

    fn class_unload_started(&self, _info: &ProfilerInfo, class: ClassId<'_>) {
        self.names.classes.remove(&class.to_raw());
    }

    fn dynamic_method_unloaded(&self, _info: &ProfilerInfo, function: RawFunctionId) {
        self.names.functions.remove(&function);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeDynamic, FakeFunction, FakeRuntime};

    fn lcg(name: &str) -> FakeFunction {
        FakeFunction {
            module: 0x2000,
            dynamic: Some(FakeDynamic {
                name: name.into(),
                signature: Arc::from(&[0u8, 0, 1][..]),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn dynamic_methods_are_named_by_the_runtime_and_a_recycled_id_afresh() {
        let fake = FakeRuntime::with_info_version(11);
        fake.state().functions.insert(0x20, lcg("First"));
        let cache = NameCache::new();
        let components = fake.initialize_components(false, |info| cache.register(info).unwrap());
        assert!(components
            .masks()
            .high
            .contains(crate::event_mask::HighEventMask::MONITOR_DYNAMIC_FUNCTION_UNLOADS));
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(0x20));
        assert_eq!(&*cache.function_name(&info, f).unwrap(), "First");
        assert_eq!(fake.call_count("GetTokenAndMetaDataFromFunction"), 0);
        // The runtime collects the method and gives its ID to another one.
        fake.state().functions.insert(0x20, lcg("Second"));
        assert_eq!(
            &*cache.function_name(&info, f).unwrap(),
            "First",
            "without the unload, the cache cannot know"
        );
        components.each("test", |c| c.dynamic_method_unloaded(&info, f.to_raw()));
        assert_eq!(&*cache.function_name(&info, f).unwrap(), "Second");
    }

    #[test]
    fn cache_answers_without_runtime_after_insert() {
        let cache = NameCache::for_fake_runtime();
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
        let cache = Arc::new(NameCache::for_fake_runtime());
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
