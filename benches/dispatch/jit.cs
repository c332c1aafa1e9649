// Dispatch benchmark, JITCompilationStarted: N distinct instantiations of
// one generic method over value types (each is compiled on its own, value
// types share no code), called once each through reflection, timed by the
// app itself. The type arguments are 16 value types and the ValueTuples of
// two and of three of them (16 + 256 + 4096 instantiations at most).
// Prints "elapsed_ns <ns> methods <n> sum <s>".
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Reflection;
using System.Runtime.CompilerServices;

namespace Bench
{
    public static class Compilations
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Probe<T>() where T : struct
        {
            T[] one = new T[1];
            return one.Length;
        }

        static readonly Type[] Leaves =
        {
            typeof(byte), typeof(sbyte), typeof(short), typeof(ushort), typeof(int), typeof(uint),
            typeof(long), typeof(ulong), typeof(float), typeof(double), typeof(char), typeof(bool),
            typeof(decimal), typeof(DateTime), typeof(Guid), typeof(TimeSpan),
        };

        static List<Type> TypeArguments(int count)
        {
            var all = new List<Type>(Leaves);
            foreach (var a in Leaves)
                foreach (var b in Leaves)
                    all.Add(typeof(ValueTuple<,>).MakeGenericType(a, b));
            foreach (var a in Leaves)
                foreach (var b in Leaves)
                    foreach (var c in Leaves)
                        all.Add(typeof(ValueTuple<,,>).MakeGenericType(a, b, c));
            if (count > all.Count) throw new ArgumentException("at most " + all.Count + " methods");
            return all.GetRange(all.Count - count, count);
        }

        public static int Main(string[] args)
        {
            int count = int.Parse(args[0], CultureInfo.InvariantCulture);
            MethodInfo probe = typeof(Compilations).GetMethod("Probe");
            var types = TypeArguments(count + 1);
            // Warm up reflection with the first (untimed) instantiation.
            long sum = (int)probe.MakeGenericMethod(types[0]).Invoke(null, null);
            var watch = Stopwatch.StartNew();
            for (int i = 1; i <= count; i++)
                sum += (int)probe.MakeGenericMethod(types[i]).Invoke(null, null);
            watch.Stop();
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " methods " + count + " sum " + sum);
            return 0;
        }
    }
}
