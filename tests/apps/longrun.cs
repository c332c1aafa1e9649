// Scenario "longrun": runs until told to stop, for attach/detach tests.
// Usage: longrun <stop-file> <ready-file>
// Writes its process id to <ready-file> once its loop runs, then every ~10 ms
// builds and calls a fresh dynamic method (so the JIT keeps compiling while
// profilers come and go) and adds its result to a sum. When <stop-file>
// exists it prints its own ground truth: the iteration count, the sum and
// whether the sum matches the closed formula. Every 20th iteration it
// induces a garbage collection (for profilers that monitor GCs).
using System;
using System.IO;
using System.Reflection.Emit;
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
            while (!File.Exists(stop))
            {
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
