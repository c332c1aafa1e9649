//! Threads the profiler creates (`ICorProfilerInfo4`).

use crate::error::{check, Result};
use crate::info::RuntimeHandle;

impl RuntimeHandle {
    /// `InitializeCurrentThread` (Info4): sets up the runtime's per-thread
    /// data for the calling thread, a thread the profiler created, so that
    /// later Info calls on it (in particular while the runtime is
    /// suspended, e.g. `SuspendRuntime` and stack walks) need not allocate
    /// it under the runtime's locks, where they could deadlock. corprof.idl
    /// asks a profiler thread to make this its first Info call; the SDK's
    /// sampling and ReJIT threads do ([`crate::stackwalk::spawn_sampling_thread`],
    /// [`crate::il::rejit::ReJitThread`]). Harmless on any other thread.
    pub fn initialize_current_thread(&self) -> Result<()> {
        self.call_live("ICorProfilerInfo4::InitializeCurrentThread", || {
            const CALL: &str = "ICorProfilerInfo4::InitializeCurrentThread";
            let i4 = self.raw_info4(CALL)?;
            // SAFETY: [info-alive, plain-call] no arguments; the runtime initialises the calling thread's
            // own data.
            check(unsafe { i4.InitializeCurrentThread() }, CALL).map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::fake::FakeRuntime;

    #[test]
    fn called_once_per_request() {
        let fake = FakeRuntime::with_info_version(4);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let handle = unsafe { fake.runtime_handle(false) };
        handle.initialize_current_thread().unwrap();
        assert_eq!(fake.call_count("InitializeCurrentThread"), 1);
        let old = FakeRuntime::new();
        // SAFETY: [test-fake] as above.
        let handle = unsafe { old.runtime_handle(false) };
        assert!(handle.initialize_current_thread().is_err());
    }
}
