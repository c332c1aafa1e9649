// The ELT benchmark's workload: one tight loop of calls to a small method
// that is never inlined, timed by the app itself (Stopwatch, JIT and
// startup excluded). Prints "elapsed_ns <ns> calls <n>".
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Bench
{
    // `cargo xtask bench gate` counts instructions under callgrind only
    // between these two calls (valgrind --instr-atstart=no, and the client
    // requests of benches/callgrind/marker.c); CLRPROF_CALLGRIND_MARKER=1
    // says the marker library is on the library path. Stop is called once
    // before the measured part, so its P/Invoke stub is not made inside it.
    static class Callgrind
    {
        public static readonly bool On =
            Environment.GetEnvironmentVariable("CLRPROF_CALLGRIND_MARKER") == "1";

        [DllImport("clrprof_callgrind_marker")]
        public static extern void clrprof_callgrind_start();

        [DllImport("clrprof_callgrind_marker")]
        public static extern void clrprof_callgrind_stop();
    }

    public static class Workload
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Step(long acc, int i)
        {
            return acc + (i ^ (acc >> 3));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long Run(int calls)
        {
            long acc = 1;
            for (int i = 0; i < calls; i++)
            {
                acc = Step(acc, i);
            }
            return acc;
        }

        public static int Main(string[] args)
        {
            int calls = int.Parse(args[0], CultureInfo.InvariantCulture);
            Run(1000); // JIT-compile and warm up
            var watch = Stopwatch.StartNew();
            // Only the loop: the Stopwatch's first call is compiled here.
            if (Callgrind.On)
            {
                Callgrind.clrprof_callgrind_stop();
                Callgrind.clrprof_callgrind_start();
            }
            long acc = Run(calls);
            if (Callgrind.On) Callgrind.clrprof_callgrind_stop();
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " calls " + calls + " acc " + acc);
            return 0;
        }
    }
}
