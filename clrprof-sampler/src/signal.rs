//! The signal source: stacks taken on each thread by `SIGPROF`, without
//! stopping the runtime (Linux, x86-64 and aarch64).
//!
//! Built on [`clrprof::stackwalk::SignalSampling`]. Every registered thread
//! has a CPU-time timer: a thread that runs is interrupted once per
//! [`rate_hz`](crate::SamplerConfig::rate_hz) of *its own CPU time*, a
//! thread that waits never is, so idle threads cost nothing. Each CPU
//! sample carries the CPU time it stands for (the timer's interval times
//! one plus its overruns). For the wall profile, each tick asks
//! [`wall_threads_per_tick`](crate::SamplerConfig::wall_threads_per_tick)
//! threads in turn for a sample; each stands for the tick's period times
//! the number of threads per thread asked, so the wall profile's total is
//! the threads' wall time however many there are. No thread count caps
//! it: a process with 2,000 threads gets every running thread's CPU
//! samples.
//!
//! Where signal sampling cannot start (another handler of `SIGPROF`, another
//! runtime of the process sampling with signals, a platform without it) or
//! stops (another component replaced the handler), the source falls back
//! to the runtime's suspension when the runtime has it, and says why
//! ([`Sampler::method_reason`](crate::Sampler::method_reason)).

use super::{nanos, StackSource, SuspendRuntimeSource, Tick};
use clrprof::error::{Error, Result};
use clrprof::stackwalk::{FrameBuffer, FrameNamer, SamplingThread, SignalSampling, ThreadGate};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Samples with signals; see the [module docs](self).
pub struct SignalSource {
    signals: Arc<SignalSampling>,
    period: Duration,
    /// The suspension source, when the runtime has it: used when signals
    /// cannot serve.
    fallback: Option<SuspendRuntimeSource>,
    /// Whether the fallback runs now.
    falling_back: bool,
    /// Why the method is what it is.
    reason: String,
    /// A switch to report to the sampler at the next tick.
    switched: Option<String>,
}

impl SignalSource {
    /// A source over `signals` at `period` per tick, falling back to
    /// `fallback` where signals cannot serve.
    pub fn new(
        signals: Arc<SignalSampling>,
        period: Duration,
        fallback: Option<SuspendRuntimeSource>,
    ) -> SignalSource {
        SignalSource {
            signals,
            period,
            fallback,
            falling_back: false,
            reason: "SIGPROF handler, per-thread CPU-time timers and wall-time requests".into(),
            switched: None,
        }
    }

    fn fall_back(&mut self, why: String) -> Result<()> {
        self.signals.stop();
        match self.fallback {
            Some(_) => {
                self.falling_back = true;
                self.reason = format!("{why}; the runtime's suspension samples instead");
                self.switched = Some(self.reason.clone());
                Ok(())
            }
            None => {
                self.reason = why.clone();
                Err(Error::Usage(why))
            }
        }
    }
}

impl StackSource for SignalSource {
    fn prepare(&mut self) -> Result<()> {
        match self.signals.start() {
            Ok(()) => Ok(()),
            Err(e) => self.fall_back(format!("signal sampling could not start: {e}")),
        }
    }

    fn take(
        &mut self,
        thread: &mut SamplingThread,
        gate: &ThreadGate,
        buffer: &mut FrameBuffer,
    ) -> Result<Tick> {
        if self.falling_back {
            if let Some(f) = self.fallback.as_mut() {
                let mut tick = f.take(thread, gate, buffer)?;
                tick.switched = self.switched.take();
                return Ok(tick);
            }
        }
        let t0 = Instant::now();
        match self.signals.take(thread, buffer, self.period) {
            Ok(signal) => Ok(Tick {
                signal: Some(signal),
                phases: crate::SamplerPhases {
                    walk_ns: nanos(t0.elapsed()),
                    ..Default::default()
                },
                ..Tick::default()
            }),
            Err(e) => {
                if let Some(why) = self.signals.stop_reason() {
                    self.fall_back(why)?;
                    let mut tick = Tick {
                        switched: self.switched.take(),
                        ..Tick::default()
                    };
                    if let Some(f) = self.fallback.as_mut() {
                        let t = f.take(thread, gate, buffer)?;
                        tick.skipped = t.skipped;
                        tick.refused = t.refused;
                        tick.refusal = t.refusal;
                        tick.phases = t.phases;
                    }
                    return Ok(tick);
                }
                Err(e)
            }
        }
    }

    fn resolving(&mut self, namer: &FrameNamer<'_>) {
        if !self.falling_back {
            self.signals.code_map().update(namer);
        }
    }

    fn finish(&mut self) {
        self.signals.stop();
    }

    fn method(&self) -> &'static str {
        if self.falling_back {
            "suspend-runtime"
        } else {
            "signals"
        }
    }

    fn reason(&self) -> Option<String> {
        Some(self.reason.clone())
    }
}
