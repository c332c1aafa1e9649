// Scenario "il": methods of different IL shapes, each counting its own calls
// in a static field, so a profiler that injects an entry probe can be checked
// against the known counts. Runs three phases; the il-rewriter's ReJIT mode
// re-JITs at Rejit.Begin and reverts at Rejit.End, so only phase 2 is
// counted there. Prints "calls <method> <total>" and
// "rejit-calls <method> <phase 2>" for every method, and, under the
// rewriter's managed probe only, "hits <method> <n>" for what it counted.
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Il
{
    public static class Rejit
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Begin() { }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void End() { }
    }

    // The managed probe the il-rewriter's managed mode calls at the entry
    // of every instrumented method (through a MemberRef it defines, with
    // the method's name as a user string it defines). Never called by the
    // app itself, so without that profiler it prints nothing.
    public static class Probe
    {
        static readonly Dictionary<string, int> hits = new Dictionary<string, int>();

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Hit(string method)
        {
            lock (hits)
            {
                int n;
                hits.TryGetValue(method, out n);
                hits[method] = n + 1;
            }
        }

        public static void Print()
        {
            lock (hits)
            {
                var names = new List<string>(hits.Keys);
                names.Sort(StringComparer.Ordinal);
                foreach (var name in names)
                    Console.WriteLine("hits " + name + " " + hits[name]);
            }
        }
    }

    public class Shapes
    {
        public static int FibCalls, TinyCalls, GuardedCalls, SwitchCalls, LongCalls, InstanceCalls;

        // Recursive: the number of calls of Fib(n) is known (2*Fib(n+1)-1).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Fib(int n)
        {
            FibCalls++;
            if (n < 2) return n;
            return Fib(n - 1) + Fib(n - 2);
        }

        // A tiny header that the probe pushes past 63 bytes.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Tiny(int x)
        {
            TinyCalls++;
            return x * 7 + (x >> 1) - (x & 3) + (x ^ 5) + (x | 9) - x / 3 + x % 5 + (x << 2);
        }

        // try/catch/finally with a loop: exception clauses and branches.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Guarded(int n)
        {
            GuardedCalls++;
            int total = 0;
            try
            {
                for (int i = 0; i < n; i++)
                {
                    try
                    {
                        // Never thrown (the Wine .NET 8 leg hangs on a second exception);
                        // the clause is what matters to the rewriter.
                        if (i == n + 1000) throw new InvalidOperationException("never");
                        total += i;
                    }
                    catch (InvalidOperationException)
                    {
                        total += 100;
                    }
                }
            }
            finally
            {
                total += 1000;
            }
            return total;
        }

        // A switch: a jump table of targets to keep.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static string Switch(int x)
        {
            SwitchCalls++;
            switch (x % 6)
            {
                case 0: return "zero";
                case 1: return "one";
                case 2: return "two";
                case 3: return "three";
                case 4: return "four";
                default: return "many";
            }
        }

        // Short branches over a long body: promoted to long by the rewriter
        // only if they must be; the loop back-edge spans the whole body.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Long(int n)
        {
            LongCalls++;
            long a = 1, b = 2, c = 3;
            for (int i = 0; i < n; i++)
            {
                a = a * 31 + i; b = b ^ (a << 3); c = c + (b >> 2);
                a = a - c; b = b + 17; c = c * 3;
                if ((a & 1) == 0) { b++; } else { c--; }
            }
            return a + b + c;
        }

        // The IL offset the runtime reports for a frame of this method: with
        // the profiler's old-to-new IL map (SetILInstrumentedCodeMap) it is
        // an offset of the original IL, the same with or without the probe.
        // NoOptimization: optimized code reports only coarse offsets, which
        // differ once the probe's call is in the method.
        [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.NoOptimization)]
        public static int Where()
        {
            var frame = new System.Diagnostics.StackFrame(0, false);
            return frame.GetILOffset();
        }

        private int field = 1;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Instance(int x)
        {
            InstanceCalls++;
            field += x;
            return field;
        }
    }

    public static class Program
    {
        static int[] Snapshot()
        {
            return new int[] { Shapes.FibCalls, Shapes.TinyCalls, Shapes.GuardedCalls, Shapes.SwitchCalls, Shapes.LongCalls, Shapes.InstanceCalls };
        }

        static readonly string[] Names = {
            "Il.Shapes::Fib", "Il.Shapes::Tiny", "Il.Shapes::Guarded", "Il.Shapes::Switch", "Il.Shapes::Long", "Il.Shapes::Instance"
        };

        static long Phase(int rounds, Shapes s)
        {
            long check = 0;
            for (int r = 0; r < rounds; r++)
            {
                check += Shapes.Fib(12);
                check += Shapes.Tiny(r);
                check += Shapes.Guarded(5);
                check += Shapes.Switch(r).Length;
                check += Shapes.Long(50);
                check += s.Instance(r);
            }
            return check;
        }

        public static int Main(string[] args)
        {
            var s = new Shapes();
            long check = Phase(40, s);
            // Give tiered compilation time to re-JIT hot methods at tier 1.
            Thread.Sleep(300);
            check += Phase(40, s);
            // And to finish the tier-1 compilations the calls above queued.
            Thread.Sleep(300);
            int[] before = Snapshot();
            Rejit.Begin();
            check += Phase(25, s);
            Rejit.End();
            int[] after = Snapshot();
            check += Phase(10, s);
            int[] total = Snapshot();
            Console.WriteLine("check " + check);
            Console.WriteLine("il-offset " + Shapes.Where());
            for (int i = 0; i < Names.Length; i++)
            {
                Console.WriteLine("calls " + Names[i] + " " + total[i]);
                Console.WriteLine("rejit-calls " + Names[i] + " " + (after[i] - before[i]));
            }
            Probe.Print();
            return 0;
        }
    }
}
