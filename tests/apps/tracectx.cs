// Scenario "trace context": requests as activities of the app's own
// ActivitySource (a listener the app registers samples them all), each with
// async hops, and pool threads idle between them.
//
// Each request is a root activity "request" with four CPU-burning steps:
//   Step1 on the thread that starts it, before any await;
//   Step2 after `await Task.Yield()` (a thread-pool thread resumes it);
//   Step3 inside `await Task.Run(...)`;
//   Step4 after `await Task.Delay(..)` (a timer), inside a child activity.
// Three loops run requests concurrently for TRACECTX_MS milliseconds (default
// 1000), then every pool thread idles for 400 ms.
//
// Ground truth: with TRACECTX_IDS=<file>, one line per request,
//   "request <trace id> <root span id> <child span id>"
// goes to that file (ids are random, so they stay out of stdout). Stdout is
// the same in every run: "requests ok" and the step counts are checked, not
// printed, so the output does not depend on timing.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace TraceCtx
{
    public static class Work
    {
        static readonly ActivitySource Source = new ActivitySource("TraceCtx");
        static readonly List<string> Ids = new List<string>();
        static long sink;
        static int bad;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Burn(double ms)
        {
            var sw = Stopwatch.StartNew();
            long x = 1;
            while (sw.Elapsed.TotalMilliseconds < ms)
                for (int i = 0; i < 1000; i++)
                    x = x * 31 + i;
            Interlocked.Add(ref sink, x);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Step1(double ms) => Burn(ms);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Step2(double ms) => Burn(ms);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Step3(double ms) => Burn(ms);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Step4(double ms) => Burn(ms);

        static void Check(Activity expected)
        {
            if (Activity.Current != expected)
                Interlocked.Increment(ref bad);
        }

        static async Task Request()
        {
            Activity root;
            Activity c;
            using (root = Source.StartActivity("request"))
            {
                Check(root);
                Step1(3);
                await Task.Yield();
                Check(root);
                Step2(3);
                await Task.Run(() => { Check(root); Step3(3); });
                await Task.Delay(2);
                using (c = Source.StartActivity("child"))
                {
                    Check(c);
                    Step4(3);
                }
                Check(root);
            }
            lock (Ids)
                Ids.Add("request " + root.TraceId.ToHexString() + " " + root.SpanId.ToHexString() + " "
                    + c.SpanId.ToHexString());
        }

        static async Task Loop(Stopwatch clock, int ms)
        {
            while (clock.ElapsedMilliseconds < ms)
                await Request();
        }

        public static void Main()
        {
            var listener = new ActivityListener
            {
                ShouldListenTo = s => s.Name == "TraceCtx",
                Sample = (ref ActivityCreationOptions<ActivityContext> o) => ActivitySamplingResult.AllDataAndRecorded,
            };
            ActivitySource.AddActivityListener(listener);
            int ms = int.TryParse(Environment.GetEnvironmentVariable("TRACECTX_MS"), out int m) ? m : 1000;
            var clock = Stopwatch.StartNew();
            var loops = new List<Task>();
            for (int i = 0; i < 3; i++)
                loops.Add(Task.Run(() => Loop(clock, ms)));
            Task.WaitAll(loops.ToArray());
            // Every pool thread is back in the pool, waiting for work.
            Thread.Sleep(400);
            string path = Environment.GetEnvironmentVariable("TRACECTX_IDS");
            if (path != null)
                File.WriteAllLines(path, Ids);
            Console.WriteLine(bad == 0 && Ids.Count > 0 ? "requests ok" : "requests failed: " + bad + " wrong Activity.Current, " + Ids.Count + " requests");
        }
    }
}
