//! The size of an object of any size (`ICorProfilerInfo4`).

use crate::error::{check, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;

impl<'s> ProfilerInfo<'s> {
    /// `GetObjectSize2` (Info4): the size of `object` in bytes, as a
    /// `usize`: unlike `GetObjectSize` ([`object_size`](Self::object_size)),
    /// it reports objects of 4 GiB and more (large arrays) instead of
    /// failing with `COR_E_OVERFLOW`. An [`ObjectId`] only exists in a scope
    /// where no garbage collection can move the object, which the runtime
    /// requires for this call.
    pub fn object_size2(&self, object: ObjectId<'_>) -> Result<usize> {
        const CALL: &str = "ICorProfilerInfo4::GetObjectSize2";
        self.require_objects_readable(CALL)?;
        let i4 = self.raw_info4(CALL)?;
        let mut size = 0usize;
        check(
            // SAFETY: [object-no-gc, plain-call] `object` is valid for this scope (typed ID: no GC can
            // run); valid out pointer.
            unsafe { i4.GetObjectSize2(object.as_sys(), &mut size) },
            CALL,
        )?;
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::testing::fake::{fake_ids, FakeObject, FakeRuntime};

    #[test]
    fn size_as_usize_and_unknown_objects() {
        let fake = FakeRuntime::with_info_version(4);
        fake.state().objects.insert(
            0x40,
            FakeObject {
                class: 0x3000,
                size: 48,
                array: None,
            },
        );
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info_no_gc() };
        fake_ids!(fake; o = object_id(0x40), gone = object_id(0x80));
        assert_eq!(info.object_size2(o).unwrap(), 48);
        assert_eq!(
            info.object_size2(gone).unwrap_err().name(),
            Some("E_INVALIDARG")
        );
        let old = FakeRuntime::new();
        // SAFETY: [test-fake] as above.
        let info = unsafe { old.profiler_info_no_gc() };
        fake_ids!(old; o = object_id(0x40));
        assert!(matches!(
            info.object_size2(o),
            Err(Error::Unsupported {
                needs: 4,
                has: 3,
                ..
            })
        ));
    }
}
