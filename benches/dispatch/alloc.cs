// The allocation workload of the dispatch, mux and memory benchmarks: one
// tight loop of small allocations (one ObjectAllocated callback each under a
// profiler that asks for them), timed by the app itself (Stopwatch; JIT and
// startup excluded).
// Prints "elapsed_ns <ns> allocations <n>".
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace Bench
{
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
            long sum = Run(count, ring);
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " allocations " + count + " sum " + sum);
            return 0;
        }
    }
}
