// A service that looks like production, for `cargo xtask bench server` and
// the "server" scenarios: ASP.NET Core on Kestrel, bound to 127.0.0.1 only.
//
// Usage: server <port file>
//   Binds 127.0.0.1 on a port the system picks and writes it to <port file>
//   once Kestrel listens. Every endpoint takes `n` (0..) and answers a body
//   that depends on `n` alone, so a load generator can compare every answer
//   with the same request's answer in a run without a profiler:
//     GET /json?n=N       an order of 12-27 lines serialised to JSON (2-5 KB)
//     GET /async?n=N      awaits a 1 ms timer, then a SemaphoreSlim(4)
//     GET /sort?n=N       allocates 12 000 pseudo-random ints, sorts a copy
//     GET /exception?n=N  throws and catches an exception when N % 100 == 0
//     GET /lock?n=N       a computation under one lock all requests share (held
//                         2 ms longer when N % 20 == 0)
//     GET /stats          the service's own account (JSON, below)
//     GET /shutdown       stops the service; it prints its account and exits 0
// Each endpoint checks its own result (the JSON read back equals the order,
// the array is sorted and holds the same sum, the exception was caught on
// exactly the requests that throw): a failed check counts as "bad".
// The account: requests served per endpoint (counted when each request
// enters the middleware), exceptions thrown, bad results, and per endpoint
// the handlers' own time (ns: their work; the lock endpoint's from when it
// holds the lock to before its slow call) and bytes allocated
// (GC.GetAllocatedBytesForCurrentThread around the same parts).
using System;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Text;
using System.Text.Json;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace Shop
{
    public sealed class OrderLine
    {
        public string Sku { get; set; }
        public string Title { get; set; }
        public int Quantity { get; set; }
        public decimal Price { get; set; }
        public string[] Tags { get; set; }
    }

    public sealed class Order
    {
        public long Id { get; set; }
        public string Customer { get; set; }
        public string Email { get; set; }
        public DateTime Placed { get; set; }
        public OrderLine[] Lines { get; set; }
        public decimal Total { get; set; }
        public string Note { get; set; }
    }

    public sealed class CheckoutFailed : Exception
    {
        public CheckoutFailed(string message) : base(message) { }
    }

    /// The service's own account (see the file header).
    public static class Account
    {
        public static readonly string[] Names = { "json", "async", "sort", "exception", "lock", "other" };
        public const int Json = 0, Async = 1, Sort = 2, Exception = 3, Lock = 4, Other = 5;
        public static readonly long[] Requests = new long[Names.Length];
        public static readonly long[] Nanos = new long[Names.Length];
        public static readonly long[] Bytes = new long[Names.Length];
        public static long Thrown, Caught, Bad;

        public static int Of(PathString path)
        {
            string p = path.Value ?? "";
            switch (p)
            {
                case "/json": return Json;
                case "/async": return Async;
                case "/sort": return Sort;
                case "/exception": return Exception;
                case "/lock": return Lock;
                default: return Other;
            }
        }

        public static void Add(int endpoint, long startTicks, long startBytes)
        {
            long ticks = Stopwatch.GetTimestamp() - startTicks;
            Interlocked.Add(ref Nanos[endpoint], (long)(ticks * (1e9 / Stopwatch.Frequency)));
            Interlocked.Add(ref Bytes[endpoint], GC.GetAllocatedBytesForCurrentThread() - startBytes);
        }

        public static string Json_()
        {
            var sb = new StringBuilder();
            sb.Append("{\"requests\":{");
            for (int i = 0; i < Names.Length; i++)
                sb.Append(i == 0 ? "" : ",").Append('"').Append(Names[i]).Append("\":").Append(Interlocked.Read(ref Requests[i]));
            sb.Append("},\"nanos\":{");
            for (int i = 0; i < Names.Length; i++)
                sb.Append(i == 0 ? "" : ",").Append('"').Append(Names[i]).Append("\":").Append(Interlocked.Read(ref Nanos[i]));
            sb.Append("},\"bytes\":{");
            for (int i = 0; i < Names.Length; i++)
                sb.Append(i == 0 ? "" : ",").Append('"').Append(Names[i]).Append("\":").Append(Interlocked.Read(ref Bytes[i]));
            sb.Append("},\"thrown\":").Append(Interlocked.Read(ref Thrown));
            sb.Append(",\"caught\":").Append(Interlocked.Read(ref Caught));
            sb.Append(",\"bad\":").Append(Interlocked.Read(ref Bad));
            sb.Append('}');
            return sb.ToString();
        }
    }

    /// The action methods of the five endpoints.
    public static class Endpoints
    {
        static readonly JsonSerializerOptions options = new JsonSerializerOptions();
        static readonly SemaphoreSlim gate = new SemaphoreSlim(4);
        static readonly object ledgerLock = new object();
        static readonly long[] ledger = new long[64];

        static string[] words = {
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
            "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
        };

        static Order MakeOrder(int n)
        {
            uint seed = (uint)n * 2654435761u + 1;
            int count = 12 + n % 16;
            var lines = new OrderLine[count];
            decimal total = 0;
            for (int i = 0; i < count; i++)
            {
                seed = seed * 1664525u + 1013904223u;
                var line = new OrderLine
                {
                    Sku = "SKU-" + (seed % 100000).ToString("D5"),
                    Title = words[seed % 16] + " " + words[(seed >> 4) % 16] + " " + words[(seed >> 8) % 16] + " edition " + i,
                    Quantity = 1 + (int)(seed % 7),
                    Price = (seed % 100000) / 100m,
                    Tags = new[] { words[(seed >> 12) % 16], words[(seed >> 16) % 16], "n" + n },
                };
                total += line.Price * line.Quantity;
                lines[i] = line;
            }
            return new Order
            {
                Id = 1000000L + n,
                Customer = "customer-" + n,
                Email = "customer" + n + "@example.test",
                Placed = new DateTime(2024, 1, 1, 0, 0, 0, DateTimeKind.Utc).AddMinutes(n),
                Lines = lines,
                Total = total,
                Note = "Leave at the door; ring twice. Order " + n + ".",
            };
        }

        public static IResult Json(int n)
        {
            long t = Stopwatch.GetTimestamp(), b = GC.GetAllocatedBytesForCurrentThread();
            Order order = MakeOrder(n);
            string json = JsonSerializer.Serialize(order, options);
            Order back = JsonSerializer.Deserialize<Order>(json, options);
            if (back == null || back.Id != order.Id || back.Total != order.Total || back.Lines.Length != order.Lines.Length
                || back.Lines[back.Lines.Length - 1].Title != order.Lines[order.Lines.Length - 1].Title)
                Interlocked.Increment(ref Account.Bad);
            Account.Add(Account.Json, t, b);
            return Results.Text(json, "application/json");
        }

        public static async Task<IResult> Async(int n)
        {
            await Task.Delay(1);
            await gate.WaitAsync();
            long value;
            try
            {
                value = (long)n * n + 7;
                await Task.Yield();
            }
            finally
            {
                gate.Release();
            }
            return Results.Text("async " + n + " " + value + "\n");
        }

        public static IResult Sort(int n)
        {
            long t = Stopwatch.GetTimestamp(), b = GC.GetAllocatedBytesForCurrentThread();
            int count = 12000;
            var data = new int[count];
            uint seed = (uint)n + 17;
            long sum = 0;
            for (int i = 0; i < count; i++)
            {
                seed = seed * 1103515245u + 12345u;
                data[i] = (int)(seed >> 8);
                sum += data[i];
            }
            // Sorted as a copy; the input is kept for the check.
            var sorted = (int[])data.Clone();
            Array.Sort(sorted);
            long check = 0;
            bool ordered = true;
            for (int i = 0; i < count; i++)
            {
                check += sorted[i];
                if (i > 0 && sorted[i - 1] > sorted[i]) ordered = false;
            }
            if (!ordered || check != sum || Array.IndexOf(sorted, data[n % count]) < 0)
                Interlocked.Increment(ref Account.Bad);
            string body = "sort " + n + " min " + sorted[0] + " median " + sorted[count / 2] + " max " + sorted[count - 1] + " sum " + sum + "\n";
            Account.Add(Account.Sort, t, b);
            return Results.Text(body);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Checkout(int n)
        {
            if (n % 100 == 0)
            {
                Interlocked.Increment(ref Account.Thrown);
                throw new CheckoutFailed("card declined for order " + n);
            }
            return n * 3 + 1;
        }

        public static IResult Exception(int n)
        {
            long t = Stopwatch.GetTimestamp(), b = GC.GetAllocatedBytesForCurrentThread();
            string body;
            try
            {
                body = "exception " + n + " ok " + Checkout(n) + "\n";
            }
            catch (CheckoutFailed e)
            {
                Interlocked.Increment(ref Account.Caught);
                body = "exception " + n + " caught " + e.Message + "\n";
            }
            if ((n % 100 == 0) != body.Contains(" caught "))
                Interlocked.Increment(ref Account.Bad);
            Account.Add(Account.Exception, t, b);
            return Results.Text(body);
        }

        public static IResult Lock(int n)
        {
            long t, b;
            long value;
            lock (ledgerLock)
            {
                // Timed from here: the work, not the wait for the lock
                // nor the slow call.
                t = Stopwatch.GetTimestamp();
                b = GC.GetAllocatedBytesForCurrentThread();
                // A critical section every request of this kind takes; one
                // in 20 holds the lock across a slow call (2 ms), as a
                // lock held around I/O does.
                ulong h = (ulong)n;
                for (int i = 0; i < 20000; i++)
                    h = h * 6364136223846793005ul + 1442695040888963407ul;
                ledger[n % ledger.Length] += 1;
                value = (long)(h >> 1);
                Account.Add(Account.Lock, t, b);
                if (n % 20 == 0)
                    Thread.Sleep(2);
            }
            return Results.Text("lock " + n + " " + value + "\n");
        }

        public static IResult Stats()
        {
            return Results.Text(Account.Json_(), "application/json");
        }

        public static IResult Shutdown(IHostApplicationLifetime lifetime)
        {
            lifetime.StopApplication();
            return Results.Text("stopping\n");
        }
    }

    namespace Middleware
    {
        /// Counts every request as it enters (the service's own account).
        public sealed class Accounting
        {
            readonly RequestDelegate next;
            public Accounting(RequestDelegate next) { this.next = next; }

            public Task Invoke(HttpContext context)
            {
                Interlocked.Increment(ref Account.Requests[Account.Of(context.Request.Path)]);
                return next(context);
            }
        }

        /// Gives every response a request id header, as services do.
        public sealed class RequestId
        {
            readonly RequestDelegate next;
            static long id;
            public RequestId(RequestDelegate next) { this.next = next; }

            public async Task Invoke(HttpContext context)
            {
                context.Response.Headers["X-Request-Id"] = Interlocked.Increment(ref id).ToString();
                await next(context);
            }
        }
    }

    public static class Program
    {
        public static async Task<int> Main(string[] args)
        {
            if (args.Length < 1)
            {
                Console.Error.WriteLine("usage: server <port file>");
                return 2;
            }
            var builder = WebApplication.CreateBuilder(new WebApplicationOptions { Args = new string[0] });
            builder.Logging.ClearProviders();
            builder.WebHost.UseUrls("http://127.0.0.1:0");
            var app = builder.Build();
            app.UseMiddleware<Middleware.Accounting>();
            app.UseMiddleware<Middleware.RequestId>();
            app.MapGet("/json", (Func<int, IResult>)Endpoints.Json);
            app.MapGet("/async", (Func<int, Task<IResult>>)Endpoints.Async);
            app.MapGet("/sort", (Func<int, IResult>)Endpoints.Sort);
            app.MapGet("/exception", (Func<int, IResult>)Endpoints.Exception);
            app.MapGet("/lock", (Func<int, IResult>)Endpoints.Lock);
            app.MapGet("/stats", (Func<IResult>)Endpoints.Stats);
            app.MapGet("/shutdown", (Func<IHostApplicationLifetime, IResult>)Endpoints.Shutdown);
            await app.StartAsync();
            string url = app.Urls.First();
            string port = url.Substring(url.LastIndexOf(':') + 1).TrimEnd('/');
            string tmp = args[0] + ".tmp";
            File.WriteAllText(tmp, port + "\n");
            File.Move(tmp, args[0]);
            Console.WriteLine("listening " + url);
            await app.WaitForShutdownAsync();
            Console.WriteLine("account " + Account.Json_());
            return 0;
        }
    }
}
