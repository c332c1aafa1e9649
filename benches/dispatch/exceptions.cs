// Dispatch benchmark, ExceptionThrown: N exceptions thrown two frames deep
// and caught, timed by the app itself (the first 100 warm up, untimed).
// Prints "elapsed_ns <ns> exceptions <n> caught <c>" (c counts the catches:
// n + 100 with the warm-up).
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace Bench
{
    public static class Exceptions
    {
        static readonly InvalidOperationException Shared = new InvalidOperationException("bench");
        static long caught;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Thrower(int i)
        {
            if (i >= 0) throw Shared;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Middle(int i)
        {
            Thrower(i);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Run(int count)
        {
            for (int i = 0; i < count; i++)
            {
                try
                {
                    Middle(i);
                }
                catch (InvalidOperationException)
                {
                    caught++;
                }
            }
        }

        public static int Main(string[] args)
        {
            int count = int.Parse(args[0], CultureInfo.InvariantCulture);
            Run(100); // JIT-compile and warm up
            var watch = Stopwatch.StartNew();
            Run(count);
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " exceptions " + count + " caught " + caught);
            return 0;
        }
    }
}
