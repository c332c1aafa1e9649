//! Metadata applied at run time, and in-memory symbols (`ICorProfilerInfo7`).
//!
//! `ApplyMetaData` makes the runtime see what a profiler added to a module's
//! metadata with `IMetaDataEmit` (new types, methods, member references,
//! strings) after the module's `ModuleLoadFinished`: corprof.idl asks for
//! it before the new metadata is used, e.g. by IL that calls a method the
//! profiler defined. See [`crate::metadata_emit`].
//!
//! In-memory symbols are the symbol (PDB) bytes a module was loaded with
//! from memory (`AssemblyLoadContext.LoadFromStream(assembly, symbols)`,
//! `Assembly.Load(byte[], byte[])`): the runtime keeps them in a stream the
//! profiler can read. A module loaded from a file has none (length 0).
//! Reflection.Emit modules are refused: corprof.idl documents
//! `CORPROF_E_MODULE_IS_DYNAMIC`, but CoreCLR (3.1.23 and 8.0.4, tested)
//! answers the module flag `COR_PRF_MODULE_DYNAMIC` (4, a *success* code)
//! instead; the SDK turns that answer into the documented error.

use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// `COR_PRF_MODULE_DYNAMIC` returned as an `HRESULT` (see the module docs).
const MODULE_FLAG_DYNAMIC: i32 = sys::COR_PRF_MODULE_DYNAMIC as i32;

/// Checks a symbol call's answer, turning CoreCLR's module-flag answer for
/// a dynamic module into `CORPROF_E_MODULE_IS_DYNAMIC`.
fn check_symbols(hr: sys::HRESULT, call: &'static str) -> Result<()> {
    if hr.0 == MODULE_FLAG_DYNAMIC {
        return Err(Error::runtime(
            sys::HRESULT(KnownHresult::CORPROF_E_MODULE_IS_DYNAMIC as i32),
            call,
        ));
    }
    check(hr, call).map(|_| ())
}

impl<'s> ProfilerInfo<'s> {
    /// `ApplyMetaData` (Info7): makes the metadata added to `module` with
    /// `IMetaDataEmit` since its load visible to the runtime. Call it after
    /// the `Define*` calls and before IL that uses the new tokens is
    /// compiled. Fails with `CORPROF_E_DATAINCOMPLETE` while the module
    /// unloads.
    pub fn apply_metadata(&self, module: ModuleId<'_>) -> Result<()> {
        const CALL: &str = "ICorProfilerInfo7::ApplyMetaData";
        let i7 = self.raw_info7(CALL)?;
        check(
            // SAFETY: [id-scope] `module` is valid (typed ID).
            unsafe { i7.ApplyMetaData(module.as_sys()) },
            CALL,
        )
        .map(|_| ())
    }

    /// `GetInMemorySymbolsLength` (Info7): the size of `module`'s in-memory
    /// symbol stream, 0 when it has none (loaded from a file).
    /// Reflection.Emit modules fail with `CORPROF_E_MODULE_IS_DYNAMIC`.
    pub fn in_memory_symbols_length(&self, module: ModuleId<'_>) -> Result<u32> {
        const CALL: &str = "ICorProfilerInfo7::GetInMemorySymbolsLength";
        let i7 = self.raw_info7(CALL)?;
        let mut len = 0u32;
        check_symbols(
            // SAFETY: [id-scope, plain-call] `module` is valid (typed ID); valid out pointer.
            unsafe { i7.GetInMemorySymbolsLength(module.as_sys(), &mut len) },
            CALL,
        )?;
        Ok(len)
    }

    /// `ReadInMemorySymbols` (Info7): copies symbol bytes of `module` from
    /// `offset` into `buf`; returns how many were copied (fewer than
    /// `buf.len()` at the end of the stream). An `offset` at or past the end
    /// fails with `E_INVALIDARG`.
    pub fn read_in_memory_symbols(
        &self,
        module: ModuleId<'_>,
        offset: u32,
        buf: &mut [u8],
    ) -> Result<usize> {
        const CALL: &str = "ICorProfilerInfo7::ReadInMemorySymbols";
        let i7 = self.raw_info7(CALL)?;
        let cap = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let mut read = 0u32;
        check_symbols(
            // SAFETY: [id-scope, buffer-protocol] `module` is valid; `buf` has at least `cap` writable
            // bytes; the runtime copies at most `cap` of them.
            unsafe {
                i7.ReadInMemorySymbols(module.as_sys(), offset, buf.as_mut_ptr(), cap, &mut read)
            },
            CALL,
        )?;
        // Never trust a count larger than the buffer.
        Ok((read as usize).min(buf.len()))
    }

    /// The whole in-memory symbol stream of `module` (empty when it has
    /// none): [`in_memory_symbols_length`](Self::in_memory_symbols_length),
    /// then [`read_in_memory_symbols`](Self::read_in_memory_symbols) until
    /// that many bytes are read.
    pub fn in_memory_symbols(&self, module: ModuleId<'_>) -> Result<Vec<u8>> {
        let len = self.in_memory_symbols_length(module)? as usize;
        let mut out = vec![0u8; len];
        let mut done = 0usize;
        while done < len {
            let n = self.read_in_memory_symbols(module, done as u32, &mut out[done..])?;
            if n == 0 {
                return Err(Error::InconsistentAnswer {
                    call: "ICorProfilerInfo7::ReadInMemorySymbols",
                });
            }
            done += n;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fake::{fake_ids, FakeModule, FakeRuntime};

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::with_info_version(7);
        {
            let mut st = fake.state();
            st.modules.insert(
                0x2000,
                FakeModule {
                    symbols: Some((0..=255u8).cycle().take(1000).collect()),
                    ..Default::default()
                },
            );
            st.modules.insert(0x2100, FakeModule::default());
            st.modules.insert(
                0x2200,
                FakeModule {
                    flags: sys::COR_PRF_MODULE_DYNAMIC,
                    ..Default::default()
                },
            );
        }
        fake
    }

    #[test]
    fn symbols_are_read_whole_and_in_pieces() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(0x2000), file = module_id(0x2100));
        let all = info.in_memory_symbols(m).unwrap();
        assert_eq!(all.len(), 1000);
        assert_eq!(all[999], (999 % 256) as u8);
        let mut piece = [0u8; 16];
        assert_eq!(info.read_in_memory_symbols(m, 990, &mut piece).unwrap(), 10);
        assert_eq!(piece[0], (990 % 256) as u8);
        assert_eq!(
            info.read_in_memory_symbols(m, 1000, &mut piece)
                .unwrap_err()
                .name(),
            Some("E_INVALIDARG")
        );
        assert_eq!(info.in_memory_symbols_length(file).unwrap(), 0);
        assert_eq!(info.in_memory_symbols(file).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn dynamic_modules_get_the_documented_error() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; emit = module_id(0x2200));
        let e = info.in_memory_symbols(emit).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_MODULE_IS_DYNAMIC"));
        let mut buf = [0u8; 4];
        let e = info.read_in_memory_symbols(emit, 0, &mut buf).unwrap_err();
        assert_eq!(e.name(), Some("CORPROF_E_MODULE_IS_DYNAMIC"));
    }

    #[test]
    fn apply_metadata_passes_the_module() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; m = module_id(0x2000), gone = module_id(0x9999));
        info.apply_metadata(m).unwrap();
        assert_eq!(fake.calls_of("ApplyMetaData")[0].args, vec![0x2000]);
        assert!(info.apply_metadata(gone).is_err());
        let old = FakeRuntime::with_info_version(6);
        // SAFETY: [test-fake] as above.
        let info = unsafe { old.profiler_info() };
        fake_ids!(old; m = module_id(0x2000));
        assert!(matches!(
            info.apply_metadata(m),
            Err(Error::Unsupported {
                needs: 7,
                has: 6,
                ..
            })
        ));
    }
}
