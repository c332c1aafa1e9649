// The allocation workload of the dispatch, mux and memory benchmarks: one
// tight loop of small allocations (one ObjectAllocated callback each under a
// profiler that asks for them), timed by the app itself (Stopwatch; JIT and
// startup excluded).
// Prints "elapsed_ns <ns> allocations <n>".
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

    public sealed class Cell
    {
        public long Value;
    }

    public static class Allocations
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static long Run(int count, Cell[] ring)
        {
            long sum = 0;
            for (int i = 0; i < count; i++)
            {
                var c = new Cell { Value = i };
                ring[i & (ring.Length - 1)] = c;
                sum += c.Value;
            }
            return sum;
        }

        public static int Main(string[] args)
        {
            int count = int.Parse(args[0], CultureInfo.InvariantCulture);
            var ring = new Cell[1024];
            Run(1000, ring); // JIT-compile and warm up
            var watch = Stopwatch.StartNew();
            // Only the loop: the Stopwatch's first call is compiled here.
            if (Callgrind.On)
            {
                Callgrind.clrprof_callgrind_stop();
                Callgrind.clrprof_callgrind_start();
            }
            long sum = Run(count, ring);
            if (Callgrind.On) Callgrind.clrprof_callgrind_stop();
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " allocations " + count + " sum " + sum);
            return 0;
        }
    }
}
