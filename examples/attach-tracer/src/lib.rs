//! attach-tracer: a profiler made to be attached to a running process.
//!
//! Load it with `clrprof attach --pid PID --profiler libattach_tracer.so
//! [--client-data "detach_after_ms=500"]`. Client data is `key=value;...`:
//! - `output=PATH`: append the records to PATH (the CLI passes its
//!   `CLRPROF_OUTPUT` this way); default: `$CLRPROF_OUTPUT` of the target,
//!   else stderr;
//! - `detach_after_ms=N`: request detach N ms after attaching, from a
//!   profiler thread started with `clrprof::thread::spawn`;
//! - `gc=1`: also monitor garbage collections. Asked for in
//!   `InitializeForAttach`, which is the one place the runtime accepts
//!   `COR_PRF_MONITOR_GC` after attach: on that thread it turns concurrent
//!   GC off for the profiler; later requests fail with
//!   `CORPROF_E_CONCURRENT_GC_NOT_PROFILABLE`;
//! - `disable=inlining,optimizations` (either or both): also ask for
//!   `COR_PRF_DISABLE_INLINING` / `COR_PRF_DISABLE_OPTIMIZATIONS` in
//!   `InitializeForAttach`. .NET 10 and later allow them after attach; on
//!   older runtimes the SDK refuses the mask before calling the runtime
//!   (`Error::RuntimeVersion`, in the log), so the attach fails with
//!   `CORPROF_E_UNSUPPORTED_FOR_ATTACHING_PROFILER`;
//! - `inlining=1`: record each method JIT-compiled while attached
//!   (`{"event":"compiled","name":NAME}`, not dynamic methods) and each
//!   inlining the JIT asks about (`{"event":"inlining","caller":NAME,
//!   "callee":NAME}`, `JITInlining`).
//!
//! Records (JSON Lines), per attach:
//! `{"event":"runtime",...}`, `{"event":"attached","client_data":TEXT}`;
//! at `ProfilerAttachComplete` one `{"event":"module","name":PATH}` per module
//! loaded (the catch-up enumeration and racing load callbacks, de-duplicated)
//! and `{"event":"attach_complete","modules":N,"functions":F,"mask":M}`, `F`
//! being the functions JIT-compiled before the attach (`EnumJITedFunctions`),
//! `M` the low event mask the runtime holds (`GetEventMask`); with `detach_after_ms`,
//! `{"event":"detach_requested","jit":N}` and finally
//! `{"event":"detached","jit":N,"dynamic_jit":M,"gc":G}` from
//! `ProfilerDetachSucceeded`: `N` JIT compilations of methods
//! (`JITCompilationFinished`) and `M` of dynamic methods
//! (`DynamicMethodJITCompilationFinished`, e.g. `DynamicMethod`s) seen while
//! attached, and `G` garbage collections (with `gc=1`).
//!
//! Loaded at startup instead (`clrprof run`, or a diagnostic port's
//! `StartupProfiler`), it writes the runtime record, `{"event":"startup"}`,
//! a module record per load and, when it finishes (shutdown, or process exit
//! when the runtime is not shut down), `{"event":"shutdown","jit":N,"dynamic_jit":M}`.

use clrprof::attach::{CatchUp, CatchUpHandler, ClientData, Found};
use clrprof::gc::{GcReason, GenerationSet};
use clrprof::output::push_json_string;
use clrprof::thread::ProfilerThread;
use clrprof::{
    profiler, AttachEventMask, AttachEventMasks, EventMask, EventMasks, FunctionId, ModuleId,
    Profiler, ProfilerInfo, Result, RuntimeType, HRESULT,
};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Where records go: a file, or stderr until one is chosen.
#[derive(Default)]
struct Sink {
    file: Mutex<Option<BufWriter<File>>>,
}

impl Sink {
    fn open(&self, path: Option<&str>) {
        let file = path.and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        if let Ok(mut f) = self.file.lock() {
            *f = file.map(BufWriter::new);
        }
    }

    fn line(&self, line: &str) {
        match self.file.lock() {
            Ok(mut guard) => match guard.as_mut() {
                Some(f) => {
                    let _ = writeln!(f, "{line}");
                }
                None => eprintln!("{line}"),
            },
            Err(_) => eprintln!("{line}"),
        }
    }

    fn flush(&self) {
        if let Ok(mut guard) = self.file.lock() {
            if let Some(f) = guard.as_mut() {
                let _ = f.flush();
            }
        }
    }
}

/// One JSON Lines record being built.
struct Line(String);

impl Line {
    fn new(event: &str) -> Line {
        let mut s = String::from("{\"event\":");
        push_json_string(&mut s, event);
        Line(s)
    }
    fn str(mut self, key: &str, value: &str) -> Line {
        self.0.push(',');
        push_json_string(&mut self.0, key);
        self.0.push(':');
        push_json_string(&mut self.0, value);
        self
    }
    fn num(mut self, key: &str, value: u64) -> Line {
        self.0.push(',');
        push_json_string(&mut self.0, key);
        self.0.push_str(&format!(":{value}"));
        self
    }
    fn write(mut self, out: &Sink) {
        self.0.push('}');
        out.line(&self.0);
    }
}

/// What the profiler shares with its detacher thread.
#[derive(Default)]
struct Shared {
    out: Sink,
    jit: AtomicU64,
    dynamic_jit: AtomicU64,
    gc: AtomicU64,
}

impl Shared {
    fn jit(&self) -> u64 {
        self.jit.load(Ordering::Relaxed)
    }
    fn dynamic_jit(&self) -> u64 {
        self.dynamic_jit.load(Ordering::Relaxed)
    }
}

/// A `module` record; `false` while the module is still loading (its
/// `ModuleLoadFinished` reports it then).
fn module_record(out: &Sink, info: &ProfilerInfo, module: ModuleId<'_>) -> bool {
    match info.module_info(module) {
        Ok(m) => {
            Line::new("module").str("name", &m.name).write(out);
            true
        }
        Err(e) if e.is_data_incomplete() => false,
        Err(e) => {
            Line::new("module").str("error", &e.to_string()).write(out);
            true
        }
    }
}

/// After an attach, modules come through the SDK's catch-up: the
/// enumeration at `ProfilerAttachComplete` and the load callbacks racing
/// it, each module once.
struct Reporter(Arc<Shared>);

impl CatchUpHandler for Reporter {
    fn module_loaded(&self, info: &ProfilerInfo, module: ModuleId<'_>, _found: Found) -> bool {
        module_record(&self.0.out, info, module)
    }
}

/// The profiler's state.
#[profiler(clsid = "{2F0B7C43-91A5-4E2D-8C6B-5D7E9A1F3B20}")]
#[derive(Default)]
pub struct AttachTracer {
    shared: Arc<Shared>,
    /// Set when loaded by attach.
    catch_up: OnceLock<Arc<CatchUp>>,
    detach_after_ms: Mutex<Option<u64>>,
    detacher: Mutex<Option<ProfilerThread<()>>>,
    detached: AtomicBool,
    /// `inlining=1`: JIT compilations and inlinings are recorded.
    inlining: AtomicBool,
}

impl AttachTracer {
    fn out(&self) -> &Sink {
        &self.shared.out
    }

    fn runtime_record(&self, info: &ProfilerInfo) -> Result<()> {
        let rt = info.runtime_information()?;
        let kind = match rt.runtime_type {
            RuntimeType::Desktop => "desktop",
            RuntimeType::CoreClr => "coreclr",
            RuntimeType::Unknown(_) => "unknown",
        };
        Line::new("runtime")
            .str("version", &rt.version())
            .str("runtime", kind)
            .num("pid", u64::from(std::process::id()))
            .write(self.out());
        Ok(())
    }
}

impl Profiler for AttachTracer {
    fn initialize(&self, info: &ProfilerInfo) -> Result<EventMasks> {
        self.out()
            .open(std::env::var("CLRPROF_OUTPUT").ok().as_deref());
        self.runtime_record(info)?;
        Line::new("startup").write(self.out());
        self.out().flush();
        Ok((EventMask::MONITOR_MODULE_LOADS | EventMask::MONITOR_JIT_COMPILATION).into())
    }

    // ANCHOR: initialize_for_attach
    fn initialize_for_attach(
        &self,
        info: &ProfilerInfo,
        client_data: &[u8],
    ) -> Result<AttachEventMasks> {
        let data = ClientData::new(client_data);
        let env_output = std::env::var("CLRPROF_OUTPUT").ok();
        self.out()
            .open(data.get("output").or(env_output.as_deref()));
        self.runtime_record(info)?;
        let text = data.text().unwrap_or("<not UTF-8>");
        Line::new("attached")
            .str("client_data", text)
            .write(self.out());
        self.out().flush();
        if let Ok(mut d) = self.detach_after_ms.lock() {
            *d = data.parse("detach_after_ms");
        }
        // The SDK's catch-up: load callbacks from now on, the enumeration in
        // ProfilerAttachComplete (the order the runtime's docs prescribe).
        let catch_up = CatchUp::register(info, Reporter(self.shared.clone()))?;
        let _ = self.catch_up.set(catch_up);
        let mut mask =
            AttachEventMask::MONITOR_MODULE_LOADS | AttachEventMask::MONITOR_JIT_COMPILATION;
        if data.get("gc") == Some("1") {
            mask |= AttachEventMask::MONITOR_GC;
        }
        for flag in data.get("disable").unwrap_or("").split(',') {
            match flag {
                "inlining" => mask |= AttachEventMask::DISABLE_INLINING,
                "optimizations" => mask |= AttachEventMask::DISABLE_OPTIMIZATIONS,
                _ => {}
            }
        }
        self.inlining
            .store(data.get("inlining") == Some("1"), Ordering::Relaxed);
        Ok(mask.into())
    }

    // ANCHOR_END: initialize_for_attach

    // ANCHOR: attach_complete
    fn profiler_attach_complete(&self, info: &ProfilerInfo) {
        // The catch-up component ran its enumerations just before this.
        let (modules, functions) = self
            .catch_up
            .get()
            .map(|c| c.enumerated())
            .unwrap_or_default();
        let mask = info.event_mask().map(|m| m.low.bits()).unwrap_or(0);
        Line::new("attach_complete")
            .num("modules", modules as u64)
            .num("functions", functions as u64)
            .num("mask", u64::from(mask))
            .write(self.out());
        self.out().flush();
        let Some(ms) = self.detach_after_ms.lock().ok().and_then(|d| *d) else {
            return;
        };
        let runtime = info.handle();
        let shared = self.shared.clone();
        let spawned = clrprof::thread::spawn("attach-tracer-detach", move || {
            std::thread::sleep(Duration::from_millis(ms));
            Line::new("detach_requested")
                .num("jit", shared.jit())
                .write(&shared.out);
            shared.out.flush();
            if let Err(e) = clrprof::detach::request_detach(&runtime, 100) {
                Line::new("detach_failed")
                    .str("error", &e.to_string())
                    .write(&shared.out);
                shared.out.flush();
            }
            // Nothing of the runtime is used after the request.
            drop(runtime);
        });
        match spawned {
            Ok(t) => {
                if let Ok(mut d) = self.detacher.lock() {
                    *d = Some(t);
                }
            }
            Err(e) => Line::new("detach_failed")
                .str("error", &e.to_string())
                .write(self.out()),
        }
    }
    // ANCHOR_END: attach_complete

    fn module_load_finished(&self, info: &ProfilerInfo, module: clrprof::Loaded<ModuleId<'_>>) {
        // After an attach the catch-up reports modules; at startup, do it here.
        if let (Ok(module), None) = (module, self.catch_up.get()) {
            module_record(self.out(), info, module);
        }
    }

    fn jit_compilation_finished(
        &self,
        info: &ProfilerInfo,
        function: FunctionId<'_>,
        _status: HRESULT,
        _safe: bool,
    ) {
        self.shared.jit.fetch_add(1, Ordering::Relaxed);
        if self.inlining.load(Ordering::Relaxed) {
            if let Ok(name) = info.function_name(function) {
                Line::new("compiled").str("name", &name).write(self.out());
                self.out().flush();
            }
        }
    }

    fn jit_inlining(
        &self,
        info: &ProfilerInfo,
        caller: FunctionId<'_>,
        callee: FunctionId<'_>,
    ) -> bool {
        if self.inlining.load(Ordering::Relaxed) {
            let name = |f| info.function_name(f).unwrap_or_else(|e| format!("<{e}>"));
            Line::new("inlining")
                .str("caller", &name(caller))
                .str("callee", &name(callee))
                .write(self.out());
            self.out().flush();
        }
        true
    }

    fn garbage_collection_started(
        &self,
        _info: &ProfilerInfo,
        _generations: GenerationSet,
        _reason: GcReason,
    ) {
        self.shared.gc.fetch_add(1, Ordering::Relaxed);
    }

    fn dynamic_method_jit_compilation_finished(
        &self,
        _info: &ProfilerInfo,
        _function: FunctionId<'_>,
        _status: HRESULT,
        _safe: bool,
    ) {
        self.shared.dynamic_jit.fetch_add(1, Ordering::Relaxed);
    }

    fn profiler_detach_succeeded(&self, _info: &ProfilerInfo) {
        self.detached.store(true, Ordering::SeqCst);
        // The detacher's closure has finished or is finishing: it asked for
        // this detach and writes nothing after asking.
        if let Ok(mut d) = self.detacher.lock() {
            if let Some(t) = d.take() {
                let _ = t.join();
            }
        }
        Line::new("detached")
            .num("jit", self.shared.jit())
            .num("dynamic_jit", self.shared.dynamic_jit())
            .num("gc", self.shared.gc.load(Ordering::Relaxed))
            .write(self.out());
        self.out().flush();
    }

    // At shutdown or process exit, unless the profiler detached (then
    // `profiler_detach_succeeded` wrote its last record and this writes nothing).
    fn finish(&self) {
        if self.detached.load(Ordering::SeqCst) {
            return;
        }
        Line::new("shutdown")
            .num("jit", self.shared.jit())
            .num("dynamic_jit", self.shared.dynamic_jit())
            .write(self.out());
        self.out().flush();
    }
}
