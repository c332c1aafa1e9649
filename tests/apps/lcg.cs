// Scenario "dynamic methods": 300 DynamicMethods (lightweight code
// generation) named Dyn_0 ... Dyn_299, each built, run once and dropped;
// every 10 of them the app collects garbage, so the runtime frees them
// (DynamicMethodUnloaded) and hands their FunctionIDs to later ones. The
// even ones take an int, the odd ones a string, so a recycled ID often
// names a method of another signature. Then one compiled expression tree.
// The app prints each call's argument ("call Dyn_N i4 V" / "call Dyn_N str
// S"), the result sum and the count, so a profiler's names and decoded
// arguments can be checked against it.
using System;
using System.Linq.Expressions;
using System.Reflection.Emit;

namespace LcgApp
{
    public delegate int IntFn(int x);
    public delegate int StrFn(string s);

    public static class Program
    {
        private static int RunOne(int i)
        {
            if (i % 2 == 1)
            {
                var ds = new DynamicMethod("Dyn_" + i, typeof(int), new[] { typeof(string) }, typeof(Program).Module);
                ILGenerator sil = ds.GetILGenerator();
                sil.Emit(OpCodes.Ldarg_0);
                sil.Emit(OpCodes.Callvirt, typeof(string).GetProperty("Length").GetGetMethod());
                sil.Emit(OpCodes.Ldc_I4, i);
                sil.Emit(OpCodes.Add);
                sil.Emit(OpCodes.Ret);
                var sfn = (StrFn)ds.CreateDelegate(typeof(StrFn));
                string text = "text_" + i;
                Console.WriteLine("call Dyn_" + i + " str " + text);
                return sfn(text);
            }
            var dm = new DynamicMethod("Dyn_" + i, typeof(int), new[] { typeof(int) }, typeof(Program).Module);
            ILGenerator il = dm.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldc_I4, i);
            il.Emit(OpCodes.Add);
            il.Emit(OpCodes.Ret);
            var fn = (IntFn)dm.CreateDelegate(typeof(IntFn));
            int arg = 1000 + i;
            Console.WriteLine("call Dyn_" + i + " i4 " + arg);
            return fn(arg);
        }

        public static int Main(string[] args)
        {
            int count = args.Length > 0 ? int.Parse(args[0]) : 300;
            long sum = 0;
            for (int i = 0; i < count; i++)
            {
                sum += RunOne(i);
                if (i % 10 == 9)
                {
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    GC.Collect();
                }
            }
            Console.WriteLine("dynamic methods " + count + " sum " + sum);

            ParameterExpression p = Expression.Parameter(typeof(int), "x");
            var lambda = Expression.Lambda<Func<int, int>>(Expression.Add(p, Expression.Constant(7)), p);
            Func<int, int> compiled = lambda.Compile();
            Console.WriteLine("expression " + compiled(35));
            return 0;
        }
    }
}
