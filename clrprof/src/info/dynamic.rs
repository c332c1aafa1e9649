//! Dynamic methods: code without metadata (`ICorProfilerInfo8`).
//!
//! A `System.Reflection.Emit.DynamicMethod` (lightweight code generation,
//! LCG; also what `Expression.Compile` produces) and the runtime's IL stubs
//! (P/Invoke marshalling, delegates) have a `FunctionID` but no metadata
//! token: `GetTokenAndMetaDataFromFunction` cannot name them, and
//! `GetFunctionFromIP`/`GetFunctionFromIP2` do not find them. Info8 adds
//! `IsFunctionDynamic`, `GetDynamicFunctionInfo` (their module, signature
//! and the runtime's name for them) and `GetFunctionFromIP3`
//! ([`RuntimeHandle::function_from_ip3`](crate::RuntimeHandle::function_from_ip3)).
//!
//! A dynamic method is collected when nothing references it any more; the
//! runtime then reports `DynamicMethodUnloaded` (Callback9, with
//! `HIGH_MONITOR_DYNAMIC_FUNCTION_UNLOADS`) and may give its `FunctionID`
//! to the next dynamic method (seen on .NET 8.0.4: 540 `DynamicMethod`s
//! got 5 IDs). [`NameCache`](crate::NameCache) names dynamic methods
//! through `GetDynamicFunctionInfo` and forgets a name at
//! `DynamicMethodUnloaded`, so a recycled ID is never given its old name.

use crate::buffer::fill_string;
use crate::error::{check, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// What `GetDynamicFunctionInfo` tells about a dynamic method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynamicFunctionInfo<'a> {
    /// The module the runtime associates it with (for a `DynamicMethod`,
    /// its owner type's module, or the core library's when it has none).
    pub module: ModuleId<'a>,
    /// Its signature blob (`PCCOR_SIGNATURE`), in runtime memory that lives
    /// as long as the method: a dynamic method's signature is freed with it.
    pub signature: &'a [u8],
    /// The runtime's name for it: a `DynamicMethod`'s name, or the IL
    /// stub's (`IL_STUB_PInvoke`, ...).
    pub name: String,
}

impl<'s> ProfilerInfo<'s> {
    /// `IsFunctionDynamic` (Info8): `true` for a function without metadata
    /// (LCG, compiled expression trees, IL stubs). Callable from any thread
    /// at any time (an asynchronous Info method).
    pub fn is_function_dynamic(&self, function: FunctionId<'_>) -> Result<bool> {
        const CALL: &str = "ICorProfilerInfo8::IsFunctionDynamic";
        let i8 = self.raw_info8(CALL)?;
        let mut dynamic: sys::BOOL = 0;
        check(
            // SAFETY: [id-scope, plain-call] `function` is valid (typed ID); valid out pointer.
            unsafe { i8.IsFunctionDynamic(function.as_sys(), &mut dynamic) },
            CALL,
        )?;
        Ok(dynamic != 0)
    }

    /// `GetDynamicFunctionInfo` (Info8): the module, signature and name of
    /// a dynamic method. A function with metadata is refused by the runtime
    /// with `E_INVALIDARG`; name those with
    /// [`function_name`](Self::function_name), which picks the right way
    /// itself.
    pub fn dynamic_function_info<'a>(
        &self,
        function: FunctionId<'a>,
    ) -> Result<DynamicFunctionInfo<'a>> {
        const CALL: &str = "ICorProfilerInfo8::GetDynamicFunctionInfo";
        let i8 = self.raw_info8(CALL)?;
        let (mut module, mut sig, mut sig_len) = (0usize, core::ptr::null::<u8>(), 0u32);
        let name = fill_string(CALL, |cap, needed, buf| {
            // SAFETY: [id-scope, buffer-protocol, plain-call] `function` is valid (typed ID); out pointers are
            // locals; `buf` has `cap` writable WCHARs.
            unsafe {
                i8.GetDynamicFunctionInfo(
                    function.as_sys(),
                    &mut module,
                    &mut sig,
                    &mut sig_len,
                    cap,
                    needed,
                    buf,
                )
            }
        })?;
        let signature: &'a [u8] = if sig.is_null() || sig_len == 0 {
            &[]
        } else {
            // SAFETY: [module-lifetime] the runtime points into the method's own signature
            // (MethodDesc::GetSig), `sig_len` bytes, which live as long as
            // the method does; the function is valid for 'a.
            unsafe { core::slice::from_raw_parts(sig, sig_len as usize) }
        };
        Ok(DynamicFunctionInfo {
            // SAFETY: [id-derived] a method's module is loaded before it and unloads no
            // earlier (BOTR "Lifetime & Stability").
            module: unsafe { ModuleId::from_sys(module) },
            signature,
            name,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::testing::fake::{fake_ids, FakeDynamic, FakeFunction, FakeModule, FakeRuntime};
    use std::sync::Arc;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::with_info_version(8);
        {
            let mut st = fake.state();
            st.modules.insert(0x2000, FakeModule::default());
            st.functions.insert(
                0x10,
                FakeFunction {
                    module: 0x2000,
                    token: 0x0600_0001,
                    ..Default::default()
                },
            );
            st.functions.insert(
                0x20,
                FakeFunction {
                    module: 0x2000,
                    dynamic: Some(FakeDynamic {
                        name: "N".repeat(300),
                        signature: Arc::from(&[0x00u8, 0x01, 0x08, 0x08][..]),
                    }),
                    ..Default::default()
                },
            );
        }
        fake
    }

    #[test]
    fn dynamic_methods_are_recognised_and_described() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; plain = function_id(0x10), lcg = function_id(0x20));
        assert!(!info.is_function_dynamic(plain).unwrap());
        assert!(info.is_function_dynamic(lcg).unwrap());
        let d = info.dynamic_function_info(lcg).unwrap();
        assert_eq!(d.module.as_sys(), 0x2000);
        assert_eq!(d.signature, &[0x00, 0x01, 0x08, 0x08]);
        assert_eq!(d.name, "N".repeat(300), "longer than the stack buffer");
        assert_eq!(fake.call_count("GetDynamicFunctionInfo"), 2);
        let e = info.dynamic_function_info(plain).unwrap_err();
        assert_eq!(e.name(), Some("E_INVALIDARG"));
    }

    #[test]
    fn runtimes_before_info8_say_so() {
        let fake = FakeRuntime::with_info_version(7);
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; f = function_id(0x10));
        assert_eq!(
            info.is_function_dynamic(f).unwrap_err(),
            Error::Unsupported {
                needs: 8,
                has: 7,
                call: "ICorProfilerInfo8::IsFunctionDynamic"
            }
        );
    }
}
