// Scenario "interrupts": what a sampling signal may land in.
// Modes (first argument):
//   faults [threads] [each]  - threads that take null-reference and
//                              divide-by-zero faults in a loop (the runtime's
//                              SIGSEGV and SIGFPE handlers turn them into
//                              exceptions), beside a spinning thread; prints
//                              the counts.
//   churn [threads]          - short-lived threads, each burning a little CPU
//                              and ending (their CPU-time timers may fire as
//                              they end); prints how many ran.
//   replace                  - spins, then sets SIGPROF to be ignored (another
//                              component taking the signal over), spins on;
//                              prints what it did.
// Output holds counts only, the same with and without a profiler.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Interrupts
{
    public class Box { public int Value; }

    public static class Program
    {
        [DllImport("libc")]
        static extern IntPtr signal(int sig, IntPtr handler);

        static volatile bool spinning = true;
        static long sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Deref(Box b) => b.Value;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Divide(int a, int b) => a / b;

        static void Spin()
        {
            long x = 1;
            while (spinning)
            {
                for (int i = 0; i < 10000; i++) x = x * 31 + i;
            }
            Interlocked.Add(ref sink, x & 1);
        }

        static int Faults(int threads, int each)
        {
            var spinner = new Thread(Spin);
            spinner.Start();
            long nulls = 0, divides = 0;
            var workers = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                workers[t] = new Thread(() =>
                {
                    long n = 0, d = 0;
                    Box none = null;
                    for (int i = 0; i < each; i++)
                    {
                        try { sink += Deref(none); }
                        catch (NullReferenceException) { n++; }
                        try { sink += Divide(i, 0); }
                        catch (DivideByZeroException) { d++; }
                    }
                    Interlocked.Add(ref nulls, n);
                    Interlocked.Add(ref divides, d);
                });
                workers[t].Start();
            }
            foreach (var w in workers) w.Join();
            spinning = false;
            spinner.Join();
            Console.WriteLine($"null references caught {nulls}");
            Console.WriteLine($"divisions by zero caught {divides}");
            return 0;
        }

        static int Churn(int threads)
        {
            long ran = 0;
            for (int batch = 0; batch < threads / 50; batch++)
            {
                var ts = new Thread[50];
                for (int t = 0; t < ts.Length; t++)
                {
                    ts[t] = new Thread(() =>
                    {
                        long x = 1;
                        var end = DateTime.UtcNow.AddMilliseconds(2);
                        while (DateTime.UtcNow < end)
                        {
                            for (int i = 0; i < 1000; i++) x = x * 17 + i;
                        }
                        Interlocked.Add(ref sink, x & 1);
                        Interlocked.Increment(ref ran);
                    });
                    ts[t].Start();
                }
                foreach (var t in ts) t.Join();
            }
            Console.WriteLine($"threads ran {ran}");
            return 0;
        }

        static int Replace()
        {
            var spinner = new Thread(Spin);
            spinner.Start();
            Thread.Sleep(1000);
            const int SIGPROF = 27;
            signal(SIGPROF, (IntPtr)1 /* SIG_IGN */);
            Console.WriteLine("SIGPROF now ignored");
            Thread.Sleep(1000);
            spinning = false;
            spinner.Join();
            Console.WriteLine("replace done");
            return 0;
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "faults";
            int a = args.Length > 1 ? int.Parse(args[1]) : 4;
            int b = args.Length > 2 ? int.Parse(args[2]) : 20000;
            switch (mode)
            {
                case "faults": return Faults(a, b);
                case "churn": return Churn(a);
                case "replace": return Replace();
                default: Console.WriteLine("unknown mode " + mode); return 2;
            }
        }
    }
}
