//! CPU time of another thread of this process, by its OS thread ID.

/// CPU time (user + kernel) the OS thread `os_thread_id` of this process has
/// used so far, in nanoseconds; `None` if the platform does not tell or the
/// thread is gone.
///
/// Linux: the thread's CPU-time clock (`clock_gettime` on the clock ID
/// `pthread_getcpuclockid` would give, built from the kernel thread ID as
/// the kernel defines it: `(~tid << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED`),
/// the scheduler's runtime of the thread, to the nanosecond; the kernel
/// answers only for threads of the calling process (`lookup_task` in
/// kernel/time/posix-cpu-timers.c refuses a thread outside the caller's
/// thread group). Windows: `GetThreadTimes`, in 100 ns units, which the
/// kernel advances at clock interrupts (about every 15.6 ms unless a timer
/// resolution was asked for), of the thread `OpenThread` opens for the ID
/// only if it belongs to this process (`GetProcessIdOfThread`): a thread ID
/// is unique among the threads that exist in every process, so the ID of a
/// thread that ended may name a thread of another process, whose time must
/// not be added to this process's stacks (review 4, route 8). Within this
/// process an ID reused between a sample and this read gives another of
/// its threads' clock, once (the sampler's difference of two readings).
pub(crate) fn os_thread_cpu_ns(os_thread_id: u32) -> Option<u64> {
    if os_thread_id == 0 {
        return None;
    }
    imp::cpu_ns(os_thread_id)
}

#[cfg(target_os = "linux")]
mod imp {
    pub(super) fn cpu_ns(tid: u32) -> Option<u64> {
        let tid = libc::pid_t::try_from(tid).ok()?;
        // CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2), Linux's
        // include/linux/posix-timers.h, the encoding glibc's
        // pthread_getcpuclockid uses.
        let clock: libc::clockid_t = ((!tid) << 3) | 6;
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: [os-api] a valid out pointer, a local; the kernel checks the
        // clock ID (EINVAL for a thread that is not ours or is gone).
        if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
            return None;
        }
        Some((t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64)
    }
}

#[cfg(windows)]
mod imp {
    use core::ffi::c_void;

    #[repr(C)]
    #[derive(Default)]
    struct FileTime {
        low: u32,
        high: u32,
    }

    impl FileTime {
        fn nanos(&self) -> u64 {
            ((u64::from(self.high) << 32) | u64::from(self.low)).saturating_mul(100)
        }
    }

    #[link(name = "kernel32")]
    extern "system" {
        fn OpenThread(access: u32, inherit: i32, thread_id: u32) -> *mut c_void;
        fn CloseHandle(handle: *mut c_void) -> i32;
        fn GetProcessIdOfThread(thread: *mut c_void) -> u32;
        fn GetCurrentProcessId() -> u32;
        fn GetThreadTimes(
            thread: *mut c_void,
            creation: *mut FileTime,
            exit: *mut FileTime,
            kernel: *mut FileTime,
            user: *mut FileTime,
        ) -> i32;
    }

    const THREAD_QUERY_LIMITED_INFORMATION: u32 = 0x0800;

    pub(super) fn cpu_ns(tid: u32) -> Option<u64> {
        // SAFETY: [os-api] plain arguments; the handle is closed below, once.
        let h = unsafe { OpenThread(THREAD_QUERY_LIMITED_INFORMATION, 0, tid) };
        if h.is_null() {
            return None;
        }
        // SAFETY: [os-api] an open thread handle with
        // THREAD_QUERY_LIMITED_INFORMATION, which GetProcessIdOfThread needs;
        // GetCurrentProcessId takes nothing and cannot fail.
        let ours = unsafe { GetProcessIdOfThread(h) == GetCurrentProcessId() };
        let (mut c, mut e, mut k, mut u) = Default::default();
        // SAFETY: [os-api] an open thread handle and four local out structs of
        // FILETIME's layout (two u32s).
        let ok = ours && unsafe { GetThreadTimes(h, &mut c, &mut e, &mut k, &mut u) } != 0;
        // SAFETY: [os-api] the handle from OpenThread above, closed once.
        unsafe { CloseHandle(h) };
        ok.then(|| k.nanos().saturating_add(u.nanos()))
    }
}

#[cfg(not(any(target_os = "linux", windows)))]
mod imp {
    pub(super) fn cpu_ns(_tid: u32) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(target_os = "linux", windows))]
    fn current_tid() -> u32 {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: [os-api] gettid takes no arguments and cannot fail.
            (unsafe { libc::syscall(libc::SYS_gettid) }) as u32
        }
        #[cfg(windows)]
        {
            #[link(name = "kernel32")]
            extern "system" {
                fn GetCurrentThreadId() -> u32;
            }
            // SAFETY: [os-api] no arguments, cannot fail.
            unsafe { GetCurrentThreadId() }
        }
    }

    /// The calling thread's own CPU time, read by another route than
    /// `os_thread_cpu_ns` where the platform has one: Linux's
    /// `CLOCK_THREAD_CPUTIME_ID`.
    #[cfg(any(target_os = "linux", windows))]
    fn own_cpu_ns() -> u64 {
        #[cfg(target_os = "linux")]
        {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: [os-api] a valid out pointer, a local.
            let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            assert_eq!(rc, 0);
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        }
        #[cfg(windows)]
        {
            os_thread_cpu_ns(current_tid()).unwrap()
        }
    }

    /// A spinning thread's clock, read from outside, advances by at least
    /// the CPU time the thread counted itself; a sleeping one's hardly at
    /// all. The spinner spins for CPU time, not for wall time, so a loaded
    /// machine makes it take longer, never fail.
    #[cfg(any(target_os = "linux", windows))]
    #[test]
    fn spinning_thread_uses_cpu_sleeping_thread_does_not() {
        use std::sync::mpsc::channel;
        use std::time::{Duration, Instant};
        const SPIN_CPU_NS: u64 = 150_000_000;
        let measure = |spin: bool| {
            let (tx, rx) = channel();
            let (go_tx, go_rx) = channel::<()>();
            let h = std::thread::spawn(move || {
                tx.send((current_tid(), 0)).unwrap();
                go_rx.recv().unwrap();
                let counted = if spin {
                    let start = own_cpu_ns();
                    let cap = Instant::now() + Duration::from_secs(60);
                    while own_cpu_ns() - start < SPIN_CPU_NS && Instant::now() < cap {
                        std::hint::spin_loop();
                    }
                    own_cpu_ns() - start
                } else {
                    std::thread::sleep(Duration::from_millis(300));
                    0
                };
                tx.send((0, counted)).unwrap();
                go_rx.recv().unwrap();
            });
            let (tid, _) = rx.recv().unwrap();
            let before = os_thread_cpu_ns(tid).unwrap();
            go_tx.send(()).unwrap();
            let (_, counted) = rx.recv().unwrap();
            let after = os_thread_cpu_ns(tid).unwrap();
            go_tx.send(()).unwrap();
            h.join().unwrap();
            (after - before, counted)
        };
        let (spun, counted) = measure(true);
        assert!(
            counted >= SPIN_CPU_NS,
            "the spinner got {counted} ns of CPU in 60 s"
        );
        assert!(
            spun >= counted,
            "read from outside {spun} ns, counted inside {counted} ns"
        );
        let (slept, _) = measure(false);
        assert!(slept < 20_000_000, "sleeping thread used {slept} ns");
        assert_eq!(os_thread_cpu_ns(0), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_of_another_process_has_no_clock() {
        // PID 1 is not a thread of this process: the kernel refuses.
        assert_eq!(os_thread_cpu_ns(1), None);
    }

    /// Set in the helper process of
    /// `a_thread_of_another_process_has_no_clock`.
    #[cfg(windows)]
    const HELPER: &str = "CLRPROF_SAMPLER_CPU_HELPER";

    /// The helper process: prints the ID of a thread that spins for up to
    /// 20 s (the test ends the process sooner). Run only as that test's
    /// child.
    #[cfg(windows)]
    #[test]
    #[ignore = "the helper process of a_thread_of_another_process_has_no_clock"]
    fn helper_spinning_thread() {
        use std::io::Write;
        use std::time::{Duration, Instant};
        if std::env::var_os(HELPER).is_none() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            tx.send(current_tid()).unwrap();
            let end = Instant::now() + Duration::from_secs(20);
            while Instant::now() < end {
                std::hint::spin_loop();
            }
        });
        let tid = rx.recv().unwrap();
        let mut out = std::io::stdout();
        // After libtest's "test ... " on the same line.
        writeln!(out, "helper-tid {tid}").unwrap();
        out.flush().unwrap();
        spinner.join().unwrap();
    }

    /// Windows thread IDs are unique only among the threads that exist, in
    /// every process: once a thread of this process is gone, its ID can
    /// name a thread of another process, and `OpenThread` opens that one
    /// (review 4, route 8). A thread of another process, spinning, must
    /// have no clock here, as on Linux.
    #[cfg(windows)]
    #[test]
    fn a_thread_of_another_process_has_no_clock() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cpu::tests::helper_spinning_thread",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let tid: u32 = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split("helper-tid ").nth(1)?.trim().parse().ok())
            .expect("the helper printed its thread's ID");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let seen = os_thread_cpu_ns(tid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, None, "the clock of thread {tid} of another process");
        // This process's own threads keep theirs.
        assert!(os_thread_cpu_ns(current_tid()).is_some());
    }
}
