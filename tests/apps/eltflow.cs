// Scenario "eltflow": control flow that ELT hooks must follow, by mode:
//   exceptions  exceptions thrown through several hooked frames, caught at
//               different depths, through finally blocks and a rethrow;
//   stress      8 threads calling recursive methods at the same time;
//   tailcall    explicit `tail.` calls, emitted with Reflection.Emit (C#
//               cannot emit the prefix), from a method of a dynamic module
//               to a method of this assembly.
// Every counted method counts its own calls; "count <method> <n>" lines
// give the exact numbers a profiler must see.
using System;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Flow
{
    public class FlowException : Exception
    {
        public FlowException(string m) : base(m) { }
    }

    public static class Program
    {
        static int thrower, middle, outer, withFinally, rethrower, finallies;
        static int work, leaf, target;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Thrower(int depth, int n)
        {
            Interlocked.Increment(ref thrower);
            if (depth == 0) throw new FlowException("e" + n);
            return Thrower(depth - 1, n) + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int WithFinally(int depth, int n)
        {
            Interlocked.Increment(ref withFinally);
            try
            {
                return Thrower(depth, n);
            }
            finally
            {
                finallies++;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Rethrower(int depth, int n)
        {
            Interlocked.Increment(ref rethrower);
            try
            {
                return WithFinally(depth, n);
            }
            catch (FlowException)
            {
                throw;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Middle(int depth, int n)
        {
            Interlocked.Increment(ref middle);
            return Rethrower(depth, n) * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Outer(int n)
        {
            Interlocked.Increment(ref outer);
            try
            {
                return Middle(n % 4, n);
            }
            catch (FlowException e)
            {
                return e.Message.Length;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Leaf(long x)
        {
            Interlocked.Increment(ref leaf);
            return x * 3 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Work(int depth, long x)
        {
            Interlocked.Increment(ref work);
            if (depth == 0) return Leaf(x);
            return Work(depth - 1, x + depth) + Leaf(x);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Target(int x)
        {
            Interlocked.Increment(ref target);
            return x + 1;
        }

        static void Exceptions(int count)
        {
            int sum = 0;
            for (int n = 0; n < count; n++) sum += Outer(n);
            Console.WriteLine("result exceptions " + sum + " finallies " + finallies);
            Console.WriteLine("count Flow.Program::Outer " + outer);
            Console.WriteLine("count Flow.Program::Middle " + middle);
            Console.WriteLine("count Flow.Program::Rethrower " + rethrower);
            Console.WriteLine("count Flow.Program::WithFinally " + withFinally);
            Console.WriteLine("count Flow.Program::Thrower " + thrower);
        }

        static void Stress(int threads, int rounds)
        {
            var all = new Thread[threads];
            long[] results = new long[threads];
            for (int t = 0; t < threads; t++)
            {
                int id = t;
                all[t] = new Thread(() =>
                {
                    long acc = 0;
                    for (int r = 0; r < rounds; r++) acc += Work(r % 12, id);
                    results[id] = acc;
                });
            }
            foreach (var t in all) t.Start();
            foreach (var t in all) t.Join();
            long total = 0;
            foreach (var r in results) total += r;
            Console.WriteLine("result stress " + total);
            Console.WriteLine("count Flow.Program::Work " + work);
            Console.WriteLine("count Flow.Program::Leaf " + leaf);
        }

        static void TailCalls(int count)
        {
            var name = new AssemblyName("FlowTail");
            var assembly = AssemblyBuilder.DefineDynamicAssembly(name, AssemblyBuilderAccess.Run);
            var module = assembly.DefineDynamicModule("FlowTail");
            var type = module.DefineType("FlowTail.Gen", TypeAttributes.Public | TypeAttributes.Class);
            var caller = type.DefineMethod("Caller", MethodAttributes.Public | MethodAttributes.Static,
                typeof(int), new[] { typeof(int) });
            var il = caller.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Tailcall);
            il.Emit(OpCodes.Call, typeof(Program).GetMethod("Target"));
            il.Emit(OpCodes.Ret);
            var built = type.CreateType();
            var f = (Func<int, int>)Delegate.CreateDelegate(typeof(Func<int, int>), built.GetMethod("Caller"));
            long sum = 0;
            for (int i = 0; i < count; i++) sum += f(i);
            Console.WriteLine("result tailcall " + sum);
            Console.WriteLine("count Flow.Program::Target " + target);
            Console.WriteLine("count FlowTail.Gen::Caller " + count);
        }

        public static int Main(string[] args)
        {
            switch (args.Length > 0 ? args[0] : "")
            {
                case "exceptions": Exceptions(args.Length > 1 ? int.Parse(args[1]) : 12); break;
                case "stress": Stress(8, args.Length > 1 ? int.Parse(args[1]) : 2000); break;
                case "tailcall": TailCalls(args.Length > 1 ? int.Parse(args[1]) : 1000); break;
                default: Console.WriteLine("modes: exceptions | stress | tailcall"); return 2;
            }
            return 0;
        }
    }
}
