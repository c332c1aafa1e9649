//! Values of runtimes newer than the `corprof.idl` the bindings were
//! generated from (see `corprof.rs`'s header), written by hand: no
//! `corprof.idl` readable here defines them yet. Each says how its value
//! was established; `cargo xtask gen-sys` from an idl that has them makes
//! the entry here a duplicate (a compile error), to be removed then.

use crate::COR_PRF_HIGH_MONITOR;

/// `COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC`, a value of
/// `COR_PRF_HIGH_MONITOR` added by dotnet/runtime PR 123177 (January 2026,
/// .NET 11): with `COR_PRF_MONITOR_GC`, no `ObjectsAllocatedByClass`
/// callbacks (the runtime checks it at the start of each collection).
///
/// Established inside the .NET 11.0.0 runtime (the scenario "conformance
/// gc/gcskipobjectsallocatedbyclasscallback"): `SetEventMask2` accepts and
/// stores every high bit, known or not, on every runtime from .NET Core
/// 3.1.3 to 11.0.0, so acceptance says nothing; of the bits above
/// `COR_PRF_HIGH_MONITOR_PINNEDOBJECT_ALLOCATED` (`0x100`), each offered
/// alone beside `COR_PRF_MONITOR_GC` on 11.0.0, only `0x200` stops
/// `ObjectsAllocatedByClass` while every `GarbageCollectionStarted` and
/// `Finished` still arrives. Runtimes before .NET 11 accept it and ignore
/// it.
pub const COR_PRF_HIGH_MONITOR_GC_SKIP_ALLOCATED_BY_CLASS_STATISTIC: COR_PRF_HIGH_MONITOR =
    0x0000_0200;
