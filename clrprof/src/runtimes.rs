//! Side-by-side runtimes: which CLR instances in this process load the
//! profiler, and which of them it profiles.
//!
//! Several runtimes can live in one process (a native host can load the
//! CoreCLR of .NET Core 3.1 and of .NET 8 side by side, and .NET Framework
//! 2.0 and 4.x could be loaded together). Each runtime that loads the profiler
//! calls `DllGetClassObject` + `CreateInstance` itself and gets its own
//! profiler object, its own [`ProfilerInfo`](crate::ProfilerInfo) and its own
//! callbacks: nothing is shared unless the profiler shares it.
//!
//! [`RuntimePolicy`] (from [`Profiler::runtime_policy`](crate::callback::Profiler::runtime_policy))
//! chooses which runtimes are profiled:
//! - [`RuntimePolicy::First`]: the first runtime only; every later
//!   `CreateInstance` fails with `CORPROF_E_PROFILER_CANCEL_ACTIVATION`;
//! - [`RuntimePolicy::Major`] / [`RuntimePolicy::Select`]: the runtimes the
//!   profiler selects; the others' `Initialize` returns
//!   `CORPROF_E_PROFILER_CANCEL_ACTIVATION`, which the runtime records as a
//!   voluntary decline rather than an error;
//! - [`RuntimePolicy::All`]: every runtime.
//!
//! The process-wide [`registry`] lists every runtime that asked, in order,
//! with its [`RuntimeInfo`] and whether it is profiled.
//!
//! # IDs and runtimes
//! IDs from one runtime mean nothing to another. A callback's scoped IDs are
//! only handed the `ProfilerInfo` of the same runtime by the SDK; IDs kept
//! across callbacks should be stored as [`RuntimeTagged`] values, which
//! [`RuntimeHandle::untag`](crate::RuntimeHandle::untag) only gives back to the
//! runtime that tagged them. `GetFunctionFromIP` may be asked of any runtime:
//! it answers only for code of its own runtime (an IP of another runtime's
//! code is "not managed code" to it).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Kind of runtime (`COR_PRF_RUNTIME_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuntimeType {
    /// .NET Framework (`COR_PRF_DESKTOP_CLR`).
    Desktop,
    /// .NET Core / .NET 5+ (`COR_PRF_CORE_CLR`).
    CoreClr,
    /// A value the SDK does not know.
    Unknown(u32),
}

/// `GetRuntimeInformation`: which runtime this is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuntimeInfo {
    /// Instance ID, distinguishes side-by-side runtimes in one process.
    pub clr_instance_id: u16,
    /// Desktop or CoreCLR.
    pub runtime_type: RuntimeType,
    /// Major version (e.g. 8).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// Build number (for .NET Core 3.1.23 / .NET 8.0.4: the patch, 23 / 4).
    pub build: u16,
    /// QFE number.
    pub qfe: u16,
    /// The version string the runtime reports.
    pub version_string: String,
    /// The product version, when it differs from what the runtime reports:
    /// CoreCLR before .NET 5 reports 4.0.30319; its product version (e.g.
    /// 3.1.23) is read from the folder of the loaded runtime library
    /// (see [`crate::host`]).
    pub product_version: Option<String>,
}

impl RuntimeInfo {
    /// The product version as `major.minor.build` (e.g. `3.1.23`, `8.0.4`),
    /// the form the examples' runtime records use.
    pub fn version(&self) -> String {
        match &self.product_version {
            Some(v) => v.clone(),
            None => format!("{}.{}.{}", self.major, self.minor, self.build),
        }
    }
}

/// Which runtimes of the process a profiler class profiles.
#[derive(Clone, Copy, Debug)]
pub enum RuntimePolicy {
    /// Only the first runtime that creates the profiler.
    First,
    /// Only runtimes with this major version (e.g. `8`; CoreCLR before .NET 5
    /// is matched by its product version, e.g. `3`).
    Major(u16),
    /// Runtimes for which the function returns `true`.
    Select(fn(&RuntimeInfo) -> bool),
    /// Every runtime.
    All,
}

impl RuntimePolicy {
    /// Parses `first`, `all` or a major version number (the `CLRPROF_RUNTIMES`
    /// convention of the examples); `None` for anything else.
    pub fn parse(text: &str) -> Option<RuntimePolicy> {
        match text.trim() {
            "first" => Some(RuntimePolicy::First),
            "all" | "" => Some(RuntimePolicy::All),
            n => n.parse().ok().map(RuntimePolicy::Major),
        }
    }

    /// Reads the policy from environment variable `var`; `All` when unset or
    /// not understood (a bad value is logged).
    pub fn from_env(var: &str) -> RuntimePolicy {
        match std::env::var(var) {
            Ok(v) => RuntimePolicy::parse(&v).unwrap_or_else(|| {
                log::warn!(
                    "{var}={v:?} is not first, all or a major version; profiling all runtimes"
                );
                RuntimePolicy::All
            }),
            Err(_) => RuntimePolicy::All,
        }
    }

    /// Whether a runtime with this information is profiled (for `First`, the
    /// decision is made at `CreateInstance` and this returns `true`).
    pub fn admits(&self, runtime: &RuntimeInfo) -> bool {
        match self {
            RuntimePolicy::First | RuntimePolicy::All => true,
            RuntimePolicy::Major(m) => runtime_major(runtime) == *m,
            RuntimePolicy::Select(f) => f(runtime),
        }
    }
}

/// The product major version of a runtime (3 for .NET Core 3.1, which
/// reports 4.0.30319 itself).
pub fn runtime_major(runtime: &RuntimeInfo) -> u16 {
    runtime
        .product_version
        .as_deref()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse().ok())
        .unwrap_or(runtime.major)
}

/// A stable number for each profiler object (one per runtime that created it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuntimeSlot(pub u32);

/// What the registry knows of one runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeEntry {
    /// The slot of its profiler object.
    pub slot: RuntimeSlot,
    /// Its information, once `Initialize` ran.
    pub info: Option<RuntimeInfo>,
    /// Whether the profiler profiles it.
    pub profiled: bool,
}

/// The process-wide list of runtimes that created a profiler object.
pub struct Registry {
    next: AtomicU32,
    entries: Mutex<Vec<RuntimeEntry>>,
}

static REGISTRY: Registry = Registry {
    next: AtomicU32::new(0),
    entries: Mutex::new(Vec::new()),
};

/// The process-wide runtime registry.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

impl Registry {
    /// Registers a new profiler object; `None` when the policy is `First` and
    /// a runtime was already admitted.
    pub(crate) fn create(&self, policy: RuntimePolicy) -> Option<RuntimeSlot> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(policy, RuntimePolicy::First) && entries.iter().any(|e| e.profiled) {
            return None;
        }
        let slot = RuntimeSlot(self.next.fetch_add(1, Ordering::SeqCst));
        entries.push(RuntimeEntry {
            slot,
            info: None,
            profiled: true,
        });
        Some(slot)
    }

    /// Records a runtime's information at `Initialize` and applies the policy.
    pub(crate) fn initialize(
        &self,
        slot: RuntimeSlot,
        info: RuntimeInfo,
        policy: RuntimePolicy,
    ) -> bool {
        let admitted = policy.admits(&info);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.iter_mut().find(|e| e.slot == slot) {
            e.info = Some(info);
            e.profiled = admitted;
        }
        admitted
    }

    /// Forgets a profiler object (released by its runtime).
    pub(crate) fn release(&self, slot: RuntimeSlot) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|e| e.slot != slot);
    }

    /// Every runtime that created a profiler object and was not released, in order.
    pub fn entries(&self) -> Vec<RuntimeEntry> {
        self.entries.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The runtimes being profiled now.
    pub fn profiled(&self) -> Vec<RuntimeInfo> {
        self.entries()
            .into_iter()
            .filter(|e| e.profiled)
            .filter_map(|e| e.info)
            .collect()
    }
}

/// A raw ID (or any value) tagged with the runtime it came from, for storage
/// across callbacks in a profiler that sees several runtimes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuntimeTagged<T> {
    /// The runtime's slot.
    pub slot: RuntimeSlot,
    /// The value.
    pub value: T,
}

#[cfg(test)]
mod tests {
    use super::RuntimeType;
    use super::*;

    fn rt(major: u16, product: Option<&str>) -> RuntimeInfo {
        RuntimeInfo {
            clr_instance_id: 0,
            runtime_type: RuntimeType::CoreClr,
            major,
            minor: 0,
            build: 0,
            qfe: 0,
            version_string: String::new(),
            product_version: product.map(str::to_owned),
        }
    }

    #[test]
    fn policies_parse_and_admit() {
        assert!(matches!(
            RuntimePolicy::parse("first"),
            Some(RuntimePolicy::First)
        ));
        assert!(matches!(
            RuntimePolicy::parse("all"),
            Some(RuntimePolicy::All)
        ));
        assert!(matches!(
            RuntimePolicy::parse("8"),
            Some(RuntimePolicy::Major(8))
        ));
        assert!(RuntimePolicy::parse("eight").is_none());
        assert!(RuntimePolicy::Major(8).admits(&rt(8, None)));
        assert!(!RuntimePolicy::Major(8).admits(&rt(4, Some("3.1.23"))));
        assert!(RuntimePolicy::Major(3).admits(&rt(4, Some("3.1.23"))));
        assert!(RuntimePolicy::Select(|r| r.major > 5).admits(&rt(8, None)));
    }

    #[test]
    fn first_policy_refuses_later_objects() {
        let reg = Registry {
            next: AtomicU32::new(0),
            entries: Mutex::new(Vec::new()),
        };
        let a = reg.create(RuntimePolicy::First).unwrap();
        assert!(reg.create(RuntimePolicy::First).is_none());
        assert!(reg.initialize(a, rt(8, None), RuntimePolicy::First));
        reg.release(a);
        assert!(reg.create(RuntimePolicy::First).is_some());
        let b = reg.create(RuntimePolicy::All).unwrap();
        assert!(!reg.initialize(b, rt(4, Some("3.1.23")), RuntimePolicy::Major(8)));
        assert_eq!(reg.entries().iter().filter(|e| e.profiled).count(), 1);
    }
}
