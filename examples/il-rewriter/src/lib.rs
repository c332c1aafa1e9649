//! il-rewriter: counts calls of managed methods by rewriting their IL.
//!
//! At the entry of every method of the application's own code — methods of
//! modules outside the runtime's shared framework folder (the folder holding
//! `System.Private.CoreLib.dll`) — or, with `CLRPROF_IL_FILTER` set, of every
//! method whose name (`Namespace.Type::Method`) starts with that prefix, it injects
//!
//! ```text
//! ldc.i4  <method number>
//! ldc.i8  <address of probe>
//! conv.i
//! calli   unmanaged stdcall void(int32)
//! ```
//!
//! a call through a function pointer to [`probe`], a native function that
//! bumps the method's counter. When the profiler finishes (shutdown, or
//! process exit when there is none) it writes one
//! `{"event":"il_calls","method":NAME,"count":N}` per instrumented method
//! (to `CLRPROF_OUTPUT`, or stderr).
//!
//! `CLRPROF_IL_MODE` chooses how the new IL is installed:
//! - `jit` (default): `SetILFunctionBody` in `JITCompilationStarted`, with
//!   the body allocated by the module's `IMethodMalloc`, and
//!   `SetILInstrumentedCodeMap` so IL offsets keep their original meaning.
//!   Later compilations of the same method (tier 1, OSR) compile the body
//!   already set, so each method is rewritten once (and reported as
//!   `{"event":"il_recompiled","method":..}`);
//! - `rejit`: methods are only noted when first compiled. When the method
//!   `<namespace>.Rejit::Begin` is compiled, every noted method is re-JITted
//!   (`RequestReJIT` on the SDK's ReJIT thread; the rewritten IL is given in
//!   `GetReJITParameters`), and when `<namespace>.Rejit::End` is compiled they
//!   are reverted (`RequestRevert`). The app calls `Begin` and `End` around
//!   the phase whose calls it expects counted.
//!
//! With `CLRPROF_IL_PROBE=managed` the probe is managed instead: `ldstr
//! "<method name>"; call <namespace>.Probe::Hit(string)` (the namespace of
//! the instrumented method), a method of the app
//! found by name and signature and called through a MemberRef; the method
//! name is a user string defined in the module's metadata. The app counts
//! the hits itself (no `il_calls` records then).
//!
//! With `CLRPROF_IL_DUMP=1` it also writes every rewritten body as
//! `{"event":"il_body","method":..,"returns":bool,"hex":..,"sites":{..}}`
//! (the call sites its calls use) so tests can verify them independently.
//! Every body is checked with [`clrprof::il::verify`] before it is
//! installed; a body that fails is not installed and reported as
//! `{"event":"il_error",...}`.

use clrprof::il::{
    native_call, recompute_max_stack, verify, CallSite, CallSites, MetaDataCallSites, MethodBody,
    OpCode, Operand, ReJitThread,
};
use clrprof::metadata_emit::{PrimitiveType, SigBuilder, UnmanagedCallConv};
use clrprof::output::JsonLines;
use clrprof::rejit::FunctionControl;
use clrprof::{
    profiler, EventMask, EventMasks, FunctionId, MdMemberRef, MdMethodDef, MdSignature, MdToken,
    ModuleId, Profiler, ProfilerInfo, RawModuleId, Result,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// How many methods can be counted; calls of methods past this are dropped.
const MAX_METHODS: usize = 4096;

static COUNTS: [AtomicU64; MAX_METHODS] = [const { AtomicU64::new(0) }; MAX_METHODS];

/// The native probe the injected IL calls through `calli` with the platform's
/// default unmanaged calling convention (what `extern "system"` is on
/// x86_64 and aarch64, Windows and Unix alike). Never panics: an out-of-range
/// number is ignored.
pub extern "system" fn probe(method: i32) {
    if let Some(c) = usize::try_from(method).ok().and_then(|i| COUNTS.get(i)) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum Mode {
    #[default]
    Jit,
    ReJit,
}

/// Settings read once in `Initialize`.
#[derive(Debug)]
struct Config {
    managed_probe: bool,
    /// A method-name prefix; `None`: the application's own modules.
    filter: Option<String>,
    mode: Mode,
    dump: bool,
}

type MethodKey = (RawModuleId, MdMethodDef);

#[derive(Default)]
struct Methods {
    /// Method number → name.
    names: Vec<String>,
    /// (module, method) → number.
    numbers: HashMap<MethodKey, i32>,
    /// Methods whose IL was replaced (JIT mode): never rewritten twice.
    rewritten: HashSet<MethodKey>,
    /// Methods seen compiled, candidates for ReJIT (ReJIT mode).
    candidates: Vec<MethodKey>,
    /// Methods currently re-JITted (ReJIT mode).
    rejitted: Vec<MethodKey>,
}

/// The profiler.
#[profiler(clsid = "{5B0E7C3A-9D41-4E2F-8A6B-1C2D3E4F5A6B}")]
#[derive(Default)]
pub struct IlRewriter {
    out: JsonLines,
    config: OnceLock<Config>,
    methods: Mutex<Methods>,
    /// Per module: the StandAloneSig token of the probe's calli signature.
    calli_sigs: Mutex<HashMap<RawModuleId, MdSignature>>,
    /// Per module: the MemberRef of the managed probe `<filter>Probe::Hit`.
    managed_probes: Mutex<HashMap<RawModuleId, MdMemberRef>>,
    rejit: OnceLock<ReJitThread>,
    /// Per module: whether it is the application's own (outside the shared framework).
    app_modules: Mutex<HashMap<RawModuleId, bool>>,
}

/// The namespace part of `Namespace.Type::Method` with its trailing dot
/// (empty without a namespace).
fn namespace_prefix(name: &str) -> &str {
    let type_part = name.split("::").next().unwrap_or(name);
    match type_part.rfind('.') {
        Some(i) => &name[..=i],
        None => "",
    }
}

impl IlRewriter {
    fn config(&self) -> &Config {
        self.config.get_or_init(|| Config {
            filter: None,
            managed_probe: false,
            mode: Mode::Jit,
            dump: false,
        })
    }

    /// Whether `function` belongs to the application's own code: a module
    /// with a file outside the folder of `System.Private.CoreLib.dll` (the
    /// runtime's shared framework). Dynamic modules have no file and are left alone.
    fn is_app_code(&self, info: &ProfilerInfo, function: FunctionId<'_>) -> bool {
        let Ok(fi) = info.function_info(function) else {
            return false;
        };
        let key = fi.module.to_raw();
        if let Some(known) = self
            .app_modules
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            return known;
        }
        let app = info.module_info(fi.module).is_ok_and(|m| {
            let path = std::path::Path::new(&m.name);
            path.is_file()
                && path
                    .parent()
                    .is_some_and(|dir| !dir.join("System.Private.CoreLib.dll").is_file())
        });
        if let Ok(mut m) = self.app_modules.lock() {
            m.insert(key, app);
        }
        app
    }

    fn number(&self, key: MethodKey, name: &str) -> Option<i32> {
        let mut m = self.methods.lock().ok()?;
        if let Some(n) = m.numbers.get(&key) {
            return Some(*n);
        }
        if m.names.len() >= MAX_METHODS {
            return None;
        }
        let n = m.names.len() as i32;
        m.names.push(name.to_string());
        m.numbers.insert(key, n);
        Some(n)
    }

    /// The managed probe's MemberRef: `<filter>Probe::Hit(string)` of the
    /// module (found by name and signature, then referenced through a
    /// MemberRef, existing or new).
    fn managed_probe(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method_name: &str,
    ) -> Result<MdMemberRef> {
        let key = module.to_raw();
        if let Some(r) = self
            .managed_probes
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            return Ok(r);
        }
        let emit = info.module_metadata_emit(module)?;
        let type_name = format!("{}Probe", namespace_prefix(method_name));
        let probe_type = emit
            .find_type_def(&type_name, None)?
            .ok_or_else(|| clrprof::Error::Usage(format!("no type {type_name} in the module")))?;
        let sig = SigBuilder::static_method(
            &SigBuilder::primitive(PrimitiveType::Void),
            &[&SigBuilder::primitive(PrimitiveType::String)],
        )?;
        if emit.find_method(probe_type, "Hit", &sig)?.is_none() {
            return Err(clrprof::Error::Usage(format!(
                "no static void {type_name}::Hit(string)"
            )));
        }
        let member_ref = emit.member_ref(MdToken(probe_type.0), "Hit", &sig)?;
        if let Ok(mut m) = self.managed_probes.lock() {
            m.insert(key, member_ref);
        }
        Ok(member_ref)
    }

    fn calli_sig(&self, info: &ProfilerInfo, module: ModuleId<'_>) -> Result<MdSignature> {
        let key = module.to_raw();
        if let Some(s) = self
            .calli_sigs
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            return Ok(s);
        }
        let emit = info.module_metadata_emit(module)?;
        let blob = SigBuilder::unmanaged_calli(
            UnmanagedCallConv::StdCall,
            &SigBuilder::primitive(PrimitiveType::Void),
            &[&SigBuilder::primitive(PrimitiveType::I4)],
        )?;
        let sig = emit.token_from_sig(&blob)?;
        if let Ok(mut m) = self.calli_sigs.lock() {
            m.insert(key, sig);
        }
        Ok(sig)
    }

    /// The rewritten body of `method`: the original IL with the probe call
    /// at entry, max stack recomputed, verified.
    fn rewrite(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method: MdMethodDef,
        name: &str,
    ) -> Result<(clrprof::il::WrittenBody, Vec<clrprof::info::IlMapEntry>)> {
        let number = self
            .number((module.to_raw(), method), name)
            .ok_or(clrprof::Error::InvalidArgument("too many methods to count"))?;
        // ANCHOR: rewrite
        let probe_code = if self.config().managed_probe {
            // ldstr "<method name>"; call <filter>Probe::Hit(string)
            let hit = self.managed_probe(info, module, name)?;
            let name_string = info
                .module_metadata_emit(module)?
                .define_user_string(name)?;
            vec![
                (OpCode::LDSTR, Operand::Token(MdToken(name_string.0))),
                (OpCode::CALL, Operand::Token(MdToken(hit.0))),
            ]
        } else {
            let sig = self.calli_sig(info, module)?;
            native_call(probe as *const () as usize, number, sig)
        };
        let original = info.il_function_body(module, method)?;
        let mut body = MethodBody::parse(original)?;
        body.insert_at_entry(&probe_code)?;

        let emit = info.module_metadata_emit(module)?;
        let import = emit.import();
        let returns =
            CallSite::from_signature(&import.method_props(method)?.signature)?.returns_value;
        let sites = MetaDataCallSites(import);
        recompute_max_stack(&mut body, returns, &sites)?;
        let written = body.write()?;
        verify(&written.bytes, returns, &sites)?;
        // ANCHOR_END: rewrite

        if self.config().dump {
            let mut tokens: Vec<MdToken> = body
                .instructions()
                .iter()
                .filter(|i| {
                    matches!(i.opcode.info().pop, clrprof::il::opcodes::Pop::Signature)
                        && i.opcode != clrprof::il::OpCode::RET
                })
                .filter_map(|i| match i.operand {
                    Operand::Token(t) => Some(t),
                    _ => None,
                })
                .collect();
            tokens.sort_unstable();
            tokens.dedup();
            let mut sites_json = String::from("{");
            for (k, t) in tokens.iter().enumerate() {
                let s = sites.call_site(*t)?;
                if k > 0 {
                    sites_json.push(',');
                }
                sites_json.push_str(&format!(
                    "\"{}\":[{},{},{}]",
                    t.0, s.params, s.has_this, s.returns_value
                ));
            }
            sites_json.push('}');
            let hex: String = written.bytes.iter().map(|b| format!("{b:02x}")).collect();
            self.out
                .record("il_body")
                .str("method", name)
                .bool("returns", returns)
                .str("hex", &hex)
                .raw("sites", &sites_json)
                .num("original_size", original.len() as u64)
                .bool("fat", written.fat)
                .write();
        }
        let map = written.map.clone();
        Ok((written, map))
    }

    fn instrument_at_jit(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        name: &str,
    ) -> Result<()> {
        let fi = info.function_info(function)?;
        let key = (fi.module.to_raw(), fi.token);
        if self
            .methods
            .lock()
            .map(|m| m.rewritten.contains(&key))
            .unwrap_or(true)
        {
            // A later compilation (tier 1, OSR) of a method whose IL was
            // replaced: it compiles the replaced IL, probe included.
            self.out.record("il_recompiled").str("method", name).write();
            return Ok(());
        }
        // ANCHOR: set_body
        let (written, map) = self.rewrite(info, fi.module, fi.token, name)?;
        let allocator = info.il_function_body_allocator(fi.module)?;
        let buffer = allocator.alloc_copy(&written.bytes)?;
        // SAFETY: the body is `rewrite`'s: the method's own IL, unchanged,
        // with one call inserted at entry that leaves the stack as it found
        // it. That call is either `call <App>Probe::Hit(string)` with a
        // string literal of this module (a managed method found by name and
        // signature: type-safe), or `ldc.i4 n; ldc.i8 &probe; conv.i; calli
        // unmanaged stdcall void(int32)`: `probe` is an `extern "system"
        // fn(i32)` of this library, which matches that signature exactly,
        // never panics, touches only its own atomics, and stays loaded as
        // long as the code can run (SetILFunctionBody makes the change
        // irreversible, so the runtime never detaches the profiler and never
        // unloads the library). Max stack was recomputed for the insertion
        // and `verify` checked the result's structure.
        unsafe { info.set_il_function_body(fi.module, fi.token, buffer)? };
        info.set_il_instrumented_code_map(function, true, &map)?;
        // ANCHOR_END: set_body
        if let Ok(mut m) = self.methods.lock() {
            m.rewritten.insert(key);
        }
        self.out
            .record("il_rewritten")
            .str("method", name)
            .num("size", written.bytes.len() as u64)
            .write();
        Ok(())
    }

    fn on_marker(&self, marker: &str) -> Result<()> {
        let Some(rejit) = self.rejit.get() else {
            return Ok(());
        };
        let begin = marker == "Begin";
        let keys: Vec<MethodKey> = {
            let mut m = self
                .methods
                .lock()
                .map_err(|_| clrprof::Error::Usage("lock poisoned".into()))?;
            if begin {
                m.rejitted = m.candidates.clone();
                m.rejitted.clone()
            } else {
                std::mem::take(&mut m.rejitted)
            }
        };
        if keys.is_empty() {
            return Ok(());
        }
        // ANCHOR: request
        // SAFETY: the modules are the app's own, loaded for the process's
        // life (the test app loads no collectible assemblies); the request is
        // waited for below.
        let rx = unsafe {
            if begin {
                rejit.request_rejit_async(keys.clone())?
            } else {
                rejit.request_revert_async(keys.clone())?
            }
        };
        let statuses = rx
            .recv()
            .map_err(|_| clrprof::Error::Usage("ReJIT thread gone".into()))??;
        // ANCHOR_END: request
        self.out
            .record(if begin {
                "il_rejit_requested"
            } else {
                "il_revert_requested"
            })
            .num("methods", keys.len() as u64)
            .num("failed", statuses.iter().filter(|h| h.0 < 0).count() as u64)
            .write();
        Ok(())
    }
}

impl Profiler for IlRewriter {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out.runtime_record(info)?;
        let mode = match std::env::var("CLRPROF_IL_MODE").as_deref() {
            Ok("rejit") => Mode::ReJit,
            _ => Mode::Jit,
        };
        let _ = self.config.set(Config {
            filter: std::env::var("CLRPROF_IL_FILTER")
                .ok()
                .filter(|f| !f.is_empty()),
            mode,
            dump: std::env::var("CLRPROF_IL_DUMP").is_ok_and(|v| v == "1"),
            managed_probe: std::env::var("CLRPROF_IL_PROBE").is_ok_and(|v| v == "managed"),
        });
        let mut mask = EventMask::MONITOR_JIT_COMPILATION | EventMask::DISABLE_INLINING;
        if mode == Mode::ReJit {
            mask |= EventMask::ENABLE_REJIT;
            let _ = self.rejit.set(ReJitThread::spawn(info)?);
        }
        Ok(mask.into())
    }

    fn jit_compilation_started(&self, info: &ProfilerInfo, function: FunctionId<'_>, _safe: bool) {
        let config = self.config();
        let Ok(name) = info.function_name(function) else {
            return;
        };
        let selected = match &config.filter {
            Some(prefix) => name.starts_with(prefix.as_str()),
            None => self.is_app_code(info, function),
        };
        if !selected {
            return;
        }
        let rest = &name[namespace_prefix(&name).len()..];
        if rest.starts_with("Probe::") {
            // The managed probe itself is never instrumented.
            return;
        }
        let result = match config.mode {
            Mode::Jit => self.instrument_at_jit(info, function, &name),
            Mode::ReJit => match rest {
                "Rejit::Begin" => self.on_marker("Begin"),
                "Rejit::End" => self.on_marker("End"),
                _ if rest.starts_with("Rejit::") => Ok(()),
                _ => info.function_info(function).map(|fi| {
                    let key = (fi.module.to_raw(), fi.token);
                    if let Ok(mut m) = self.methods.lock() {
                        if !m.candidates.contains(&key) {
                            m.candidates.push(key);
                        }
                    }
                }),
            },
        };
        if let Err(e) = result {
            self.out
                .record("il_error")
                .str("method", &name)
                .str("error", &e.to_string())
                .write();
        }
    }

    // ANCHOR: rejit_parameters
    fn get_rejit_parameters(
        &self,
        info: &ProfilerInfo,
        module: ModuleId<'_>,
        method: MdMethodDef,
        control: &FunctionControl,
    ) -> Result<()> {
        let name = info
            .module_metadata(module, clrprof::info::MetaDataOpen::Read)
            .and_then(|md| md.method_name(method))
            .unwrap_or_else(|_| format!("{:#x}", method.0));
        let result = self
            .rewrite(info, module, method, &name)
            .and_then(|(written, map)| {
                // SAFETY: the body is `rewrite`'s, as at JIT time (see
                // `instrument_at_jit`): the original IL with a type-safe
                // probe call at entry whose native target (`probe`, an
                // `extern "system" fn(i32)`) matches the `calli` signature.
                // A profiler that uses ReJIT may detach only after reverting
                // every method (RequestRevert); this one never detaches, so
                // the library (and `probe`) outlives the code.
                unsafe { control.set_il_function_body(&written.bytes)? };
                control.set_il_instrumented_code_map(&map)
            });
        match &result {
            Ok(()) => self
                .out
                .record("il_rejit_body")
                .str("method", &name)
                .write(),
            Err(e) => self
                .out
                .record("il_error")
                .str("method", &name)
                .str("error", &e.to_string())
                .write(),
        }
        result
    }
    // ANCHOR_END: rejit_parameters

    fn rejit_error(
        &self,
        _info: &ProfilerInfo,
        _module: ModuleId<'_>,
        method: MdMethodDef,
        _function: FunctionId<'_>,
        status: clrprof::HRESULT,
    ) {
        self.out
            .record("il_error")
            .num("method_token", method.0 as u64)
            .str("error", &format!("ReJITError {:#010x}", status.0 as u32))
            .write();
    }

    fn shutdown(&self, _info: &ProfilerInfo) {
        // Only at an orderly shutdown: at process exit the ReJIT thread may
        // already be gone (Windows ends other threads first), and joining it
        // would wait forever.
        if let Some(r) = self.rejit.get() {
            r.stop();
        }
    }

    // Names were resolved when each method was rewritten: nothing here
    // calls the runtime, which may be gone at process exit.
    fn finish(&self) {
        let names = self
            .methods
            .lock()
            .map(|m| m.names.clone())
            .unwrap_or_default();
        let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
        for (k, n) in names.iter().enumerate() {
            *by_name.entry(n.as_str()).or_default() += COUNTS[k].load(Ordering::Relaxed);
        }
        if self.config().managed_probe {
            // The app counts (and prints) the managed probe's hits.
            by_name.clear();
        }
        for (name, count) in by_name {
            self.out
                .record("il_calls")
                .str("method", name)
                .num("count", count)
                .write();
        }
        self.out.flush();
    }
}
