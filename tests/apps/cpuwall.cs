// Scenario "cpuwall": one thread spins, one sleeps, for the same time.
// A CPU profile must give the spinner's method (Cpuwall.Program::Burn)
// nearly all the CPU time and the sleeper's (Cpuwall.Program::Doze) next to
// none; a wall-time profile sees both threads the whole time.
// The threads are named "spinner" and "sleeper".
// The spinner reads its own CPU clock (Linux: CLOCK_THREAD_CPUTIME_ID;
// Windows: GetThreadTimes of the current thread) and the app prints "burn cpu ms N" before "done": on a loaded machine the
// spinner gets less than its seconds of CPU, and a CPU profile must say so.
// Arguments: [seconds (default 2)].
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Cpuwall
{
    public static class Program
    {
        static long sink;
        static long burnCpuNs = -1;

        [StructLayout(LayoutKind.Sequential)]
        struct Timespec { public long Sec; public long Nsec; }

        [DllImport("libc", EntryPoint = "clock_gettime")]
        static extern int ClockGettime(int clock, out Timespec ts);

        [DllImport("kernel32")]
        static extern IntPtr GetCurrentThread();

        [DllImport("kernel32")]
        static extern bool GetThreadTimes(IntPtr thread, out long creation, out long exit, out long kernel, out long user);

        // This thread's CPU time in ns, or -1 where there is no such clock.
        static long ThreadCpuNs()
        {
            if (RuntimeInformation.IsOSPlatform(OSPlatform.Windows))
                // 100 ns units, advanced at clock interrupts.
                return GetThreadTimes(GetCurrentThread(), out _, out _, out long k, out long u) ? (k + u) * 100 : -1;
            if (!RuntimeInformation.IsOSPlatform(OSPlatform.Linux)) return -1;
            // CLOCK_THREAD_CPUTIME_ID
            return ClockGettime(3, out Timespec ts) == 0 ? ts.Sec * 1000000000L + ts.Nsec : -1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Burn(double seconds)
        {
            long cpu0 = ThreadCpuNs();
            var clock = Stopwatch.StartNew();
            long stop = (long)(seconds * Stopwatch.Frequency);
            long x = 1;
            while (clock.ElapsedTicks < stop)
            {
                for (int i = 0; i < 1000; i++) x = x * 31 + i;
            }
            Interlocked.Add(ref sink, x);
            long cpu1 = ThreadCpuNs();
            if (cpu0 >= 0 && cpu1 >= 0) burnCpuNs = cpu1 - cpu0;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Doze(double seconds)
        {
            var clock = Stopwatch.StartNew();
            long stop = (long)(seconds * Stopwatch.Frequency);
            while (clock.ElapsedTicks < stop)
            {
                Thread.Sleep(50);
            }
        }

        public static int Main(string[] args)
        {
            double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 2.0;
            var spinner = new Thread(() => Burn(seconds));
            spinner.Name = "spinner";
            var sleeper = new Thread(() => Doze(seconds));
            sleeper.Name = "sleeper";
            spinner.Start();
            sleeper.Start();
            spinner.Join();
            sleeper.Join();
            if (burnCpuNs >= 0) Console.WriteLine("burn cpu ms " + burnCpuNs / 1000000);
            Console.WriteLine("done " + Interlocked.Read(ref sink));
            return 0;
        }
    }
}
