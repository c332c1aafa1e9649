// Dispatch benchmark, ExceptionThrown: N exceptions thrown two frames deep
// and caught, timed by the app itself (the first 100 warm up, untimed).
// Prints "elapsed_ns <ns> exceptions <n> caught <c>" (c counts the catches:
// n + 100 with the warm-up).
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
            // Only the loop: the Stopwatch's first call is compiled here.
            if (Callgrind.On)
            {
                Callgrind.clrprof_callgrind_stop();
                Callgrind.clrprof_callgrind_start();
            }
            Run(count);
            if (Callgrind.On) Callgrind.clrprof_callgrind_stop();
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " exceptions " + count + " caught " + caught);
            return 0;
        }
    }
}
