// Scenario "trace context, end to end": an ASP.NET Core service whose
// requests are traced by the OpenTelemetry .NET SDK (NuGet packages,
// exporting its spans over OTLP/HTTP protobuf, configured by the OTEL_*
// environment as its documentation shows).
//
// Usage: traceweb <port file>   (binds 127.0.0.1 on a port the system picks)
//   TRACEWEB_TRUTH     = a file for the ground truth below (written at exit)
//
// Endpoints (every answer depends on n alone):
//   GET /light?n=N   1 unit of CPU work per step
//   GET /medium?n=N  2 units per step
//   GET /heavy?n=N   4 units per step
//   GET /shutdown    stops the service
// Every request runs four steps of fixed work (a unit is a fixed number of
// iterations of an integer recurrence), each in a frame of its own:
//   TraceWeb.Steps::BeforeAwait  on the thread that runs the handler;
//   TraceWeb.Steps::AfterYield   after `await Task.Yield()` (a pool thread);
//   TraceWeb.Steps::InTaskRun    inside `await Task.Run(..)`, in a child
//                                activity "compute" of the app's source;
//   TraceWeb.Steps::AfterTimer   after `await Task.Delay(2)` (a timer).
//
// Ground truth, one line per step in TRACEWEB_TRUTH:
//   step <endpoint> <n> <step 1-4> <trace id> <span id> <start> <end> <cpu>
// (Activity.Current's ids during the step; start and end in Unix ns of the
// realtime clock; cpu: the thread's own CPU time for the step's work, ns,
// from the thread's CPU clock), one line per request:
//   request <endpoint> <n> <trace id> <root span id>
// one line per activity Activity.Current moved away from, with the last
// time it did (the app's Activity.CurrentChanged handler, which runs after
// the trace-context hook's: an activity stamps its end before its stop
// callbacks run and before Activity.Current moves to its parent):
//   left <span id> <time>
// Stdout is the same in every run: the requests served per endpoint and
// whether every step saw the activity it should (Activity.Current is the
// server activity in steps 1, 2 and 4, the child in step 3).
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using OpenTelemetry.Trace;

namespace TraceWeb
{
    static class Clock
    {
        [StructLayout(LayoutKind.Sequential)]
        struct Timespec
        {
            public long Sec;
            public long Nsec;
        }

        [DllImport("libc", EntryPoint = "clock_gettime")]
        static extern int ClockGetTime(int clock, out Timespec t);

        const int Realtime = 0, ThreadCpu = 3;

        static long Read(int clock)
        {
            ClockGetTime(clock, out Timespec t);
            return t.Sec * 1000000000L + t.Nsec;
        }

        public static long UnixNs() => Read(Realtime);
        public static long ThreadCpuNs() => Read(ThreadCpu);
    }

    public static class Steps
    {
        // One unit of work: iterations of a 64-bit recurrence.
        public const int UnitIterations = 900000;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static ulong Burn(ulong seed, int units)
        {
            ulong h = seed;
            for (int u = 0; u < units; u++)
                for (int i = 0; i < UnitIterations; i++)
                    h = h * 6364136223846793005ul + 1442695040888963407ul;
            return h;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong BeforeAwait(ulong seed, int units) => Burn(seed, units);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong AfterYield(ulong seed, int units) => Burn(seed, units);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong InTaskRun(ulong seed, int units) => Burn(seed, units);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong AfterTimer(ulong seed, int units) => Burn(seed, units);
    }

    public static class Service
    {
        public static readonly string[] Names = { "light", "medium", "heavy" };
        static readonly int[] Units = { 1, 2, 4 };
        static readonly long[] Served = new long[3];
        static readonly ActivitySource Source = new ActivitySource("TraceWeb");
        static readonly ConcurrentQueue<string> Truth = new ConcurrentQueue<string>();
        static readonly ConcurrentDictionary<string, long> Left = new ConcurrentDictionary<string, long>();
        static long bad;

        static string Hex(Activity a) => a == null ? "- -" : a.TraceId.ToHexString() + " " + a.SpanId.ToHexString();

        // One step: its work in the frame `step` names, timed and accounted.
        static ulong Step(int endpoint, int n, int k, Activity expected, ulong seed)
        {
            int units = Units[endpoint];
            Activity current = Activity.Current;
            if (expected == null || current != expected)
                Interlocked.Increment(ref bad);
            long t0 = Clock.UnixNs();
            long c0 = Clock.ThreadCpuNs();
            ulong h;
            switch (k)
            {
                case 1: h = Steps.BeforeAwait(seed, units); break;
                case 2: h = Steps.AfterYield(seed, units); break;
                case 3: h = Steps.InTaskRun(seed, units); break;
                default: h = Steps.AfterTimer(seed, units); break;
            }
            long c1 = Clock.ThreadCpuNs();
            long t1 = Clock.UnixNs();
            Truth.Enqueue("step " + Names[endpoint] + " " + n + " " + k + " " + Hex(current) + " " + t0 + " " + t1 + " " + (c1 - c0));
            return h;
        }

        static async Task<IResult> Handle(int endpoint, int n)
        {
            Interlocked.Increment(ref Served[endpoint]);
            Activity root = Activity.Current;
            Truth.Enqueue("request " + Names[endpoint] + " " + n + " " + Hex(root));
            ulong h = Step(endpoint, n, 1, root, (ulong)n + 1);
            await Task.Yield();
            h = Step(endpoint, n, 2, root, h);
            h = await Task.Run(() =>
            {
                using (Activity child = Source.StartActivity("compute"))
                    return Step(endpoint, n, 3, child, h);
            });
            await Task.Delay(2);
            h = Step(endpoint, n, 4, root, h);
            if (Activity.Current != root)
                Interlocked.Increment(ref bad);
            return Results.Text(Names[endpoint] + " " + n + " " + h + "\n");
        }

        public static Task<IResult> Light(int n) => Handle(0, n);
        public static Task<IResult> Medium(int n) => Handle(1, n);
        public static Task<IResult> Heavy(int n) => Handle(2, n);

        public static IResult Shutdown(IHostApplicationLifetime lifetime)
        {
            lifetime.StopApplication();
            return Results.Text("stopping\n");
        }

        // The OpenTelemetry .NET SDK, configured as its documentation shows;
        // the exporter reads OTEL_EXPORTER_OTLP_* from the environment.
        static void AddOpenTelemetry(IServiceCollection services)
        {
            services.AddOpenTelemetry()
                .WithTracing(t => t.AddAspNetCoreInstrumentation().AddSource("TraceWeb").AddOtlpExporter());
        }

        public static async Task<int> Main(string[] args)
        {
            if (args.Length < 1)
            {
                Console.Error.WriteLine("usage: traceweb <port file>");
                return 2;
            }
            Activity.CurrentChanged += (sender, e) =>
            {
                if (e.Previous != null && e.Previous != e.Current)
                {
                    long now = Clock.UnixNs();
                    Left.AddOrUpdate(e.Previous.SpanId.ToHexString(), now, (_, old) => Math.Max(old, now));
                }
            };
            var builder = WebApplication.CreateBuilder(new WebApplicationOptions { Args = new string[0] });
            builder.Logging.ClearProviders();
            builder.WebHost.UseUrls("http://127.0.0.1:0");
            AddOpenTelemetry(builder.Services);
            var app = builder.Build();
            app.MapGet("/light", (Func<int, Task<IResult>>)Light);
            app.MapGet("/medium", (Func<int, Task<IResult>>)Medium);
            app.MapGet("/heavy", (Func<int, Task<IResult>>)Heavy);
            app.MapGet("/shutdown", (Func<IHostApplicationLifetime, IResult>)Shutdown);
            await app.StartAsync();
            string url = app.Urls.First();
            string port = url.Substring(url.LastIndexOf(':') + 1).TrimEnd('/');
            File.WriteAllText(args[0] + ".tmp", port + "\n");
            File.Move(args[0] + ".tmp", args[0]);
            await app.WaitForShutdownAsync();
            // Disposing the host flushes the SDK's exporter.
            await app.DisposeAsync();
            string truth = Environment.GetEnvironmentVariable("TRACEWEB_TRUTH");
            if (truth != null)
                File.WriteAllLines(truth, Truth.Concat(Left.Select(l => "left " + l.Key + " " + l.Value)));
            Console.WriteLine("served light " + Served[0] + " medium " + Served[1] + " heavy " + Served[2]
                + (Interlocked.Read(ref bad) == 0 ? ", every step in its activity" : ", " + bad + " steps outside their activity"));
            return 0;
        }
    }
}
