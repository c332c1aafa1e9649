// Scenario "profiles": allocations, lock contention and exceptions of known
// counts, each in a method of its own, with the ground truth printed:
//   alloc Profiles.Program::AllocSmall Profiles.Small <objects> <bytes>
//   alloc Profiles.Program::AllocArrays System.Byte[] <objects> <bytes>
//   contended Profiles.Program::Contend <count> (each waited for a holder that keeps the lock 50 ms)
//   thrown Profiles.Program::ThrowA System.InvalidOperationException <count>
//   thrown Profiles.Program::ThrowB Profiles.Oops <count>
// The bytes are what GC.GetAllocatedBytesForCurrentThread grew by around
// each allocation loop (the loop allocates nothing else).
// Arguments: [scale (default 1): multiplies the allocation counts] [parts (default "alloc,lock,exception")];
// or `bench <scale>`: the two allocation loops only, then `elapsed_ns T` (their wall time).
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Profiles
{
    public sealed class Small
    {
        public long A, B, C, D;
    }

    public sealed class Oops : Exception
    {
        public Oops(string m) : base(m) { }
    }

    public static class Program
    {
        static readonly object[] keep = new object[64];
        static readonly object gate = new object();

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long AllocSmall(int n)
        {
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < n; i++)
            {
                var s = new Small();
                s.A = i;
                keep[i & 63] = s;
            }
            return GC.GetAllocatedBytesForCurrentThread() - before;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long AllocArrays(int n)
        {
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < n; i++)
            {
                var a = new byte[4000];
                a[0] = (byte)i;
                keep[i & 63] = a;
            }
            return GC.GetAllocatedBytesForCurrentThread() - before;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Contend()
        {
            lock (gate)
            {
                keep[0] = null;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void ThrowA(int i)
        {
            throw new InvalidOperationException("a" + i);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void ThrowB(int i)
        {
            throw new Oops("b" + i);
        }

        public static int Main(string[] args)
        {
            if (args.Length > 1 && args[0] == "bench")
            {
                int n = int.Parse(args[1]);
                AllocSmall(1000);
                AllocArrays(100);
                var clock = Stopwatch.StartNew();
                AllocSmall(2000000 * n);
                AllocArrays(50000 * n);
                long ns = (long)(clock.ElapsedTicks * (1e9 / Stopwatch.Frequency));
                Console.WriteLine("elapsed_ns " + ns);
                return 0;
            }
            int scale = args.Length > 0 ? int.Parse(args[0]) : 1;
            string parts = args.Length > 1 ? args[1] : "alloc,lock,exception";
            if (parts.Contains("alloc"))
            {
                int small = 2000000 * scale, arrays = 50000 * scale;
                long smallBytes = AllocSmall(small);
                long arrayBytes = AllocArrays(arrays);
                Console.WriteLine("alloc Profiles.Program::AllocSmall Profiles.Small " + small + " " + smallBytes);
                Console.WriteLine("alloc Profiles.Program::AllocArrays System.Byte[] " + arrays + " " + arrayBytes);
            }
            if (parts.Contains("lock"))
            {
                const int rounds = 8;
                var go = new AutoResetEvent(false);
                var held = new AutoResetEvent(false);
                var holder = new Thread(() =>
                {
                    for (int i = 0; i < rounds; i++)
                    {
                        go.WaitOne();
                        lock (gate)
                        {
                            held.Set();
                            Thread.Sleep(50);
                        }
                    }
                });
                holder.Name = "holder";
                holder.Start();
                for (int i = 0; i < rounds; i++)
                {
                    go.Set();
                    held.WaitOne();
                    Contend();
                }
                holder.Join();
                Console.WriteLine("contended Profiles.Program::Contend " + rounds);
            }
            if (parts.Contains("exception"))
            {
                int a = 0, b = 0;
                for (int i = 0; i < 30; i++)
                {
                    try { ThrowA(i); } catch (InvalidOperationException) { a++; }
                }
                for (int i = 0; i < 20; i++)
                {
                    try { ThrowB(i); } catch (Oops) { b++; }
                }
                Console.WriteLine("thrown Profiles.Program::ThrowA System.InvalidOperationException " + a);
                Console.WriteLine("thrown Profiles.Program::ThrowB Profiles.Oops " + b);
            }
            return 0;
        }
    }
}
