// The trace-context benchmark's workload: execution-context switches with
// an activity current, in a tight loop on one thread, timed by the app
// itself (Stopwatch; start-up and JIT excluded).
//
// An activity of the app's own ActivitySource (its listener samples it) is
// current while the app captures the execution context; then the main
// context clears Activity.Current. Each round is one
// `ExecutionContext.Run(captured, ...)`: the captured context is switched
// in (Activity.Current becomes the activity) and out again (it becomes
// null), two switches, the same switches an `await` makes on the thread
// that resumes a request and on the thread it leaves. With clrprof's
// startup hook loaded, each switch runs its AsyncLocal value-changed
// handler, which writes the thread's trace-context record.
// Prints "elapsed_ns <ns> switches <n> seen <n>".
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Bench
{
    public static class Switches
    {
        static int seen;
        static Activity expected;
        static readonly ContextCallback Body = _ => { if (Activity.Current == expected) seen++; };

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Run(ExecutionContext captured, int rounds)
        {
            for (int i = 0; i < rounds; i++)
                ExecutionContext.Run(captured, Body, null);
        }

        public static int Main(string[] args)
        {
            int rounds = int.Parse(args[0], CultureInfo.InvariantCulture);
            var listener = new ActivityListener
            {
                ShouldListenTo = s => s.Name == "Bench",
                Sample = (ref ActivityCreationOptions<ActivityContext> o) => ActivitySamplingResult.AllDataAndRecorded,
            };
            ActivitySource.AddActivityListener(listener);
            var source = new ActivitySource("Bench");
            expected = source.StartActivity("request");
            ExecutionContext captured = ExecutionContext.Capture();
            Activity.Current = null;
            // JIT-compile and warm up: the handler and the loop reach their
            // final (tier-1) code well before the timed part.
            for (int i = 0; i < 20; i++)
            {
                Run(captured, 10000);
                Thread.Sleep(10);
            }
            seen = 0;
            var watch = Stopwatch.StartNew();
            Run(captured, rounds);
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " switches " + 2L * rounds + " seen " + seen);
            return seen == rounds ? 0 : 1;
        }
    }
}
