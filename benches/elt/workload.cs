// The ELT benchmark's workload: one tight loop of calls to a small method
// that is never inlined, timed by the app itself (Stopwatch, JIT and
// startup excluded). Prints "elapsed_ns <ns> calls <n>".
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace Bench
{
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
            long acc = Run(calls);
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " calls " + calls + " acc " + acc);
            return 0;
        }
    }
}
