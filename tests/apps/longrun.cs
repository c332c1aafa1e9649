// Scenario "longrun": runs until told to stop, for attach/detach tests.
// Usage: longrun <stop-file> <ready-file> [<probe-file>]
// Writes its process id to <ready-file> once its loop runs, then every ~10 ms
// builds and calls a fresh dynamic method (so the JIT keeps compiling while
// profilers come and go) and adds its result to a sum. When <stop-file>
// exists it prints its own ground truth: the iteration count, the sum and
// whether the sum matches the closed formula. Every 20th iteration it
// induces a garbage collection (for profilers that monitor GCs).
// With <probe-file>: once that file exists, calls Probe once (compiled
// fully optimised at its first call, [AggressiveOptimization], with Twice
// to inline unless a profiler disabled inlining or optimisations) in this
// module, then once in a copy of this assembly loaded then into a new
// AssemblyLoadContext (a module loaded after whatever the profiler set),
// and writes to <probe-file>.done one line per call: the result and the
// method Deep found calling it (Probe when Twice was inlined into Probe,
// else Twice). The output is the same either way.
using System;
using System.IO;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Threading;

namespace LongRun
{
    public static class Program
    {
        // f(i) = 3 * i + 1, emitted anew for every i.
        static Func<long, long> Build(long i)
        {
            var m = new DynamicMethod("step" + i, typeof(long), new[] { typeof(long) }, typeof(Program).Module);
            var il = m.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldc_I8, 3L);
            il.Emit(OpCodes.Mul);
            il.Emit(OpCodes.Ldc_I8, 1L);
            il.Emit(OpCodes.Add);
            il.Emit(OpCodes.Ret);
            return (Func<long, long>)m.CreateDelegate(typeof(Func<long, long>));
        }

        [MethodImpl(MethodImplOptions.AggressiveOptimization | MethodImplOptions.NoInlining)]
        static long Probe(long x)
        {
            return Twice(x) + 1;
        }

        static string deepCaller = "";

        static long Twice(long x)
        {
            return x * 2 + Deep();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long Deep()
        {
            deepCaller = new System.Diagnostics.StackTrace().GetFrame(1).GetMethod().Name;
            return 0;
        }

        static string RunProbe()
        {
            long r = Probe(20);
            return r + " " + deepCaller;
        }

        static string RunProbeInCopy()
        {
            var context = new System.Runtime.Loader.AssemblyLoadContext("probe-copy");
            var copy = context.LoadFromAssemblyPath(typeof(Program).Assembly.Location);
            var run = copy.GetType("LongRun.Program").GetMethod(
                "RunProbe",
                System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Static);
            return (string)run.Invoke(null, null);
        }

        public static int Main(string[] args)
        {
            if (args.Length < 2)
            {
                Console.Error.WriteLine("usage: longrun <stop-file> <ready-file>");
                return 2;
            }
            string stop = args[0];
            string ready = args[1];
            long n = 0;
            long sum = 0;
            bool announced = false;
            string probe = args.Length > 2 ? args[2] : null;
            bool probed = false;
            while (!File.Exists(stop))
            {
                if (probe != null && !probed && File.Exists(probe))
                {
                    string lines = RunProbe() + "\n" + RunProbeInCopy() + "\n";
                    string tmp = probe + ".tmp";
                    File.WriteAllText(tmp, lines);
                    File.Move(tmp, probe + ".done");
                    probed = true;
                }
                sum += Build(n)(n);
                n++;
                if (n % 20 == 0)
                {
                    GC.Collect();
                }
                if (!announced)
                {
                    string tmp = ready + ".tmp";
                    File.WriteAllText(tmp, System.Diagnostics.Process.GetCurrentProcess().Id.ToString());
                    File.Move(tmp, ready);
                    announced = true;
                }
                Thread.Sleep(10);
            }
            long expected = 3 * (n * (n - 1) / 2) + n;
            Console.WriteLine("iterations " + (n > 0 ? "positive" : "zero"));
            Console.WriteLine("sum matches formula " + (sum == expected));
            return sum == expected ? 0 : 1;
        }
    }
}
