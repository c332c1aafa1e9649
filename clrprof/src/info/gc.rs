//! The GC heap: generations and frozen objects (`ICorProfilerInfo2`).

use crate::buffer::fill;
use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::enums::{object_enum, ObjectEnum};
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// A GC generation (`COR_PRF_GC_GENERATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Generation {
    /// Generation 0.
    Gen0,
    /// Generation 1.
    Gen1,
    /// Generation 2.
    Gen2,
    /// The large-object heap.
    LargeObjectHeap,
    /// The pinned-object heap (.NET 5+).
    PinnedObjectHeap,
    /// A value the SDK does not know.
    Unknown(u32),
}

impl Generation {
    fn from_sys(v: u32) -> Self {
        match v {
            sys::COR_PRF_GC_GEN_0 => Generation::Gen0,
            sys::COR_PRF_GC_GEN_1 => Generation::Gen1,
            sys::COR_PRF_GC_GEN_2 => Generation::Gen2,
            sys::COR_PRF_GC_LARGE_OBJECT_HEAP => Generation::LargeObjectHeap,
            sys::COR_PRF_GC_PINNED_OBJECT_HEAP => Generation::PinnedObjectHeap,
            o => Generation::Unknown(o),
        }
    }
}

/// One address range of a generation (`COR_PRF_GC_GENERATION_RANGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GenerationRange {
    /// The generation.
    pub generation: Generation,
    /// First address of the range.
    pub start: RawObjectId,
    /// Bytes in use.
    pub len: usize,
    /// Bytes reserved.
    pub reserved_len: usize,
}

impl GenerationRange {
    fn from_sys(r: sys::COR_PRF_GC_GENERATION_RANGE) -> Self {
        GenerationRange {
            generation: Generation::from_sys(r.generation),
            start: RawObjectId(r.rangeStart),
            len: r.rangeLength,
            reserved_len: r.rangeLengthReserved,
        }
    }

    /// `true` if `object` lies in the used part of the range.
    pub fn contains(&self, object: RawObjectId) -> bool {
        object.0.wrapping_sub(self.start.0) < self.len
    }
}

impl<'s> ProfilerInfo<'s> {
    /// `GetGenerationBounds` (Info2): the address ranges of every generation,
    /// as of the last GC. Only available once a GC has happened and when GC
    /// events are monitored (`E_FAIL` otherwise).
    pub fn generation_bounds(&self) -> Result<Vec<GenerationRange>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetGenerationBounds")?;
        let mut ranges: Vec<sys::COR_PRF_GC_GENERATION_RANGE> = Vec::new();
        fill::<sys::COR_PRF_GC_GENERATION_RANGE, 16>(
            "ICorProfilerInfo2::GetGenerationBounds",
            &mut ranges,
            |cap, needed, buf| {
                // SAFETY: [buffer-protocol] `buf` has `cap` slots.
                unsafe { i2.GetGenerationBounds(cap, needed, buf) }
            },
        )?;
        Ok(ranges.into_iter().map(GenerationRange::from_sys).collect())
    }

    /// `GetObjectGeneration` (Info2): the generation range holding `object`
    /// (`E_FAIL` when it is in none, e.g. a frozen object).
    pub fn object_generation(&self, object: ObjectId<'_>) -> Result<GenerationRange> {
        self.require_objects_readable("ICorProfilerInfo2::GetObjectGeneration")?;
        let i2 = self.raw_info2("ICorProfilerInfo2::GetObjectGeneration")?;
        let mut range = sys::COR_PRF_GC_GENERATION_RANGE::default();
        check(
            // SAFETY: [object-no-gc, plain-call] `object` is valid (typed ID); valid out pointer.
            unsafe { i2.GetObjectGeneration(object.as_sys(), &mut range) },
            "ICorProfilerInfo2::GetObjectGeneration",
        )?;
        Ok(GenerationRange::from_sys(range))
    }

    /// `EnumModuleFrozenObjects` (Info2): the objects of `module`'s frozen
    /// (read-only, preinitialised) segment. CoreCLR has none and returns an
    /// empty enumerator.
    pub fn enum_module_frozen_objects<'a>(&self, module: ModuleId<'a>) -> Result<ObjectEnum<'a>> {
        let i2 = self.raw_info2("ICorProfilerInfo2::EnumModuleFrozenObjects")?;
        let mut e: Option<sys::ICorProfilerObjectEnum> = None;
        check(
            // SAFETY: [id-scope, com-ownership] `module` is valid; `e` receives an owned reference.
            unsafe { i2.EnumModuleFrozenObjects(module.as_sys(), &mut e) },
            "ICorProfilerInfo2::EnumModuleFrozenObjects",
        )?;
        let e = e.ok_or(Error::runtime(
            sys::HRESULT(KnownHresult::E_POINTER as i32),
            "ICorProfilerInfo2::EnumModuleFrozenObjects",
        ))?;
        // SAFETY: [module-lifetime, object-no-gc] frozen objects never move and live as long as their module ('a).
        Ok(unsafe { object_enum(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeModule, FakeRuntime};

    fn range(generation: u32, start: usize, len: usize) -> sys::COR_PRF_GC_GENERATION_RANGE {
        sys::COR_PRF_GC_GENERATION_RANGE {
            generation,
            rangeStart: start,
            rangeLength: len,
            rangeLengthReserved: len * 2,
        }
    }

    #[test]
    fn generation_bounds_decode_and_follow_growth() {
        let fake = FakeRuntime::new();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        // No GC yet.
        assert_eq!(info.generation_bounds().unwrap_err().name(), Some("E_FAIL"));
        fake.state().generation_bounds = vec![
            range(0, 0x1000, 0x100),
            range(2, 0x8000, 0x800),
            range(4, 0xF000, 0x10),
        ];
        let b = info.generation_bounds().unwrap();
        assert_eq!(
            b[0],
            GenerationRange {
                generation: Generation::Gen0,
                start: RawObjectId(0x1000),
                len: 0x100,
                reserved_len: 0x200
            }
        );
        assert_eq!(b[2].generation, Generation::PinnedObjectHeap);
        assert!(b[1].contains(RawObjectId(0x87ff)) && !b[1].contains(RawObjectId(0x8800)));

        // Server GC: more ranges than the stack buffer, and one more appears.
        fake.state().generation_bounds = (0..20)
            .map(|i| range(i % 4, 0x10_0000 * (i as usize + 1), 0x100))
            .collect();
        let mut n = 0;
        fake.on_call(move |st, m| {
            if m == "GetGenerationBounds" {
                n += 1;
                if n == 2 {
                    st.generation_bounds.push(range(9, 1, 1));
                }
            }
        });
        let b = info.generation_bounds().unwrap();
        assert_eq!(b.len(), 21);
        assert_eq!(b[20].generation, Generation::Unknown(9));
        assert_eq!(fake.call_count("GetGenerationBounds"), 2 + 3);
    }

    #[test]
    fn object_generation_finds_the_range() {
        let fake = FakeRuntime::new();
        fake.state().generation_bounds = vec![range(1, 0x1000, 0x100)];
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; inside = object_id(0x1010), outside = object_id(0x5000));
        assert_eq!(
            info.object_generation(inside).unwrap().generation,
            Generation::Gen1
        );
        assert_eq!(
            info.object_generation(outside).unwrap_err().name(),
            Some("E_FAIL")
        );
    }

    #[test]
    fn frozen_objects_are_enumerated() {
        let fake = FakeRuntime::new();
        fake.state().modules.insert(
            0x2000,
            FakeModule {
                frozen_objects: vec![0xA0, 0xB0, 0xC0],
                ..Default::default()
            },
        );
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(0x2000), none = module_id(0x2100));
        let mut e = info.enum_module_frozen_objects(m).unwrap();
        e.skip_elements(1).unwrap();
        let rest: Vec<usize> = e.map(|o| o.unwrap().as_sys()).collect();
        assert_eq!(rest, vec![0xB0, 0xC0]);
        assert!(info.enum_module_frozen_objects(none).is_err());
    }
}
