// Scenario "hot": one method takes about 80 % of the CPU time, another
// about 20 %. Prints its own ground truth: how long it ran and the share of
// time each method got, measured with a Stopwatch.
// Arguments: [seconds (default 2)] [threads (default 1)].
// Benchmark mode: `work N [threads] [idle]` does a fixed amount of work (N
// rounds of the loop in Spin, per thread), beside `idle` threads (default
// 0) that wait on one event the whole time, and prints `elapsed_ns T` (wall
// time) and, on Linux, `cpu_ns C` (CPU time of the whole process, every
// thread, over the same part).
// Switch mode: `switch S` runs Spin only for S/2 seconds, then Cold only for
// S/2 seconds (the hot method changes halfway), and prints
// `switch_unix_ms T` (when it changed, Unix time in ms).
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Hot
{
    public static class Program
    {
        static long sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Spin(Stopwatch clock, long ticks)
        {
            long end = clock.ElapsedTicks + ticks;
            long x = 1;
            while (clock.ElapsedTicks < end)
            {
                for (int i = 0; i < 1000; i++) x = x * 31 + i;
            }
            Interlocked.Add(ref sink, x);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Cold(Stopwatch clock, long ticks)
        {
            long end = clock.ElapsedTicks + ticks;
            long x = 7;
            while (clock.ElapsedTicks < end)
            {
                for (int i = 0; i < 1000; i++) x = x * 17 + i;
            }
            Interlocked.Add(ref sink, x);
        }

        // Runs Spin 4 ms and Cold 1 ms, over and over, for `seconds`.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Work(double seconds, long[] spent)
        {
            var clock = Stopwatch.StartNew();
            long ms = Stopwatch.Frequency / 1000;
            long stop = (long)(seconds * Stopwatch.Frequency);
            while (clock.ElapsedTicks < stop)
            {
                long t0 = clock.ElapsedTicks;
                Spin(clock, 4 * ms);
                long t1 = clock.ElapsedTicks;
                Cold(clock, ms);
                long t2 = clock.ElapsedTicks;
                spent[0] += t1 - t0;
                spent[1] += t2 - t1;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long FixedWork(long rounds)
        {
            long x = 1;
            for (long r = 0; r < rounds; r++)
            {
                for (int i = 0; i < 1000; i++) x = x * 31 + i;
            }
            return x;
        }

        // Runs `f` in 4 ms slices for `seconds`.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Phase(double seconds, bool hot)
        {
            var clock = Stopwatch.StartNew();
            long ms = Stopwatch.Frequency / 1000;
            long stop = (long)(seconds * Stopwatch.Frequency);
            while (clock.ElapsedTicks < stop)
            {
                if (hot) Spin(clock, 4 * ms); else Cold(clock, 4 * ms);
            }
        }

        static int Switch(string[] args)
        {
            double seconds = double.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture);
            Phase(seconds / 2, true);
            long at = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds();
            Phase(seconds / 2, false);
            Console.WriteLine("switch_unix_ms " + at);
            return 0;
        }

        [StructLayout(LayoutKind.Sequential)]
        struct Timespec { public long Seconds; public long Nanoseconds; }

        [DllImport("libc", EntryPoint = "clock_gettime")]
        static extern int ClockGetTime(int clock, out Timespec time);

        // CPU time of the process (CLOCK_PROCESS_CPUTIME_ID, Linux's value 2),
        // -1 off Unix.
        static long ProcessCpuNs()
        {
            if (Environment.OSVersion.Platform != PlatformID.Unix) return -1;
            try
            {
                Timespec t;
                if (ClockGetTime(2, out t) != 0) return -1;
                return t.Seconds * 1000000000L + t.Nanoseconds;
            }
            catch (Exception)
            {
                return -1; // no such library or entry point here
            }
        }

        static int Bench(string[] args)
        {
            long rounds = long.Parse(args[1]);
            int threads = args.Length > 2 ? int.Parse(args[2]) : 1;
            int idle = args.Length > 3 ? int.Parse(args[3]) : 0;
            var gate = new ManualResetEvent(false);
            var idlers = new Thread[idle];
            using var started = new CountdownEvent(idle);
            for (int t = 0; t < idle; t++)
            {
                idlers[t] = new Thread(() => { started.Signal(); gate.WaitOne(); }) { IsBackground = true };
                idlers[t].Start();
            }
            started.Wait();
            FixedWork(1000);
            ProcessCpuNs();
            long cpu0 = ProcessCpuNs();
            var clock = Stopwatch.StartNew();
            var workers = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                workers[t] = new Thread(() => Interlocked.Add(ref sink, FixedWork(rounds)));
                workers[t].Start();
            }
            foreach (var w in workers) w.Join();
            long ns = (long)(clock.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            long cpu1 = ProcessCpuNs();
            Console.WriteLine("elapsed_ns " + ns);
            if (cpu0 >= 0 && cpu1 >= 0) Console.WriteLine("cpu_ns " + (cpu1 - cpu0));
            gate.Set();
            foreach (var t in idlers) t.Join();
            return 0;
        }

        public static int Main(string[] args)
        {
            if (args.Length > 1 && args[0] == "work") return Bench(args);
            if (args.Length > 1 && args[0] == "switch") return Switch(args);
            double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 2.0;
            int threads = args.Length > 1 ? int.Parse(args[1]) : 1;
            var spent = new long[threads][];
            var workers = new Thread[threads];
            for (int t = 1; t < threads; t++)
            {
                int id = t;
                spent[id] = new long[2];
                workers[id] = new Thread(() => Work(seconds, spent[id]));
                workers[id].Start();
            }
            spent[0] = new long[2];
            Work(seconds, spent[0]);
            for (int t = 1; t < threads; t++) workers[t].Join();
            long hot = 0, cold = 0;
            foreach (var s in spent) { hot += s[0]; cold += s[1]; }
            double share = (double)hot / (hot + cold);
            Console.WriteLine("threads " + threads);
            Console.WriteLine("hot Hot.Program::Spin " + share.ToString("F2", System.Globalization.CultureInfo.InvariantCulture));
            Console.WriteLine("cold Hot.Program::Cold " + (1 - share).ToString("F2", System.Globalization.CultureInfo.InvariantCulture));
            return 0;
        }
    }
}
