// Review 36 (provenance): an app with the partners the mismatch attacks
// need, and a checksum of everything it computes, so that a wrong pairing
// shows as changed output or a dead host:
// - Big<T>, a generic class with many virtual slots, and Tiny, a sealed
//   class with few (a method of one instantiated over the other);
// - Constrained<T> where T : struct;
// - statics of every kind in two classes of different layouts;
// - a DynamicMethod called in a loop (LCG);
// - a second thread that allocates strings and a third that collects
//   (collections while the main thread is in callbacks);
// - Program.Trigger, compiled once everything above ran: the probes' cue.
using System;
using System.Collections.Generic;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Review
{
    public class Big<T>
    {
        public T Value;
        public Big(T v) { Value = v; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual T Get() { return Value; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V01() { return 1; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V02() { return 2; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V03() { return 3; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V04() { return 4; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V05() { return 5; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V06() { return 6; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V07() { return 7; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V08() { return 8; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V09() { return 9; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V10() { return 10; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V11() { return 11; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V12() { return 12; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V13() { return 13; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V14() { return 14; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V15() { return 15; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V16() { return 16; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V17() { return 17; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V18() { return 18; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V19() { return 19; }
        [MethodImpl(MethodImplOptions.NoInlining)] public virtual int V20() { return 20; }
        [MethodImpl(MethodImplOptions.NoInlining)] public int Plain() { return 21; }
        [MethodImpl(MethodImplOptions.NoInlining)] public static int Count<U>(U u) { return u.ToString().Length; }
        [MethodImpl(MethodImplOptions.NoInlining)] public static int Touch() { return 22; }
    }

    public sealed class Tiny
    {
        public int X;
        [MethodImpl(MethodImplOptions.NoInlining)] public int Foo() { return X + 1; }
        [MethodImpl(MethodImplOptions.NoInlining)] public static int Touch() { return 23; }
    }

    public struct Pair { public long A; public string B; }

    public class Constrained<T> where T : struct
    {
        public T Value;
        [MethodImpl(MethodImplOptions.NoInlining)] public T Get() { return Value; }
    }

    public static class Statics
    {
        public static string Name = "statics";
        public static int Number = 42;
        public static Pair Boxed = new Pair { A = 7, B = "pair" };
        [ThreadStatic] public static object PerThread;
        [ThreadStatic] public static long PerThreadNumber;
        [MethodImpl(MethodImplOptions.NoInlining)] public static int Touch() { PerThread = "t"; PerThreadNumber = 5; return Name.Length + Number; }
    }

    public static class Statics2
    {
        public static long A1 = 1, A2 = 2, A3 = 3, A4 = 4, A5 = 5, A6 = 6;
        public static string S1 = "s1", S2 = "s2", S3 = "s3", S4 = "s4";
        public static Pair P1 = new Pair { A = 1, B = "p1" }, P2 = new Pair { A = 2, B = "p2" };
        [ThreadStatic] public static string T1;
        [ThreadStatic] public static Pair T2;
        [MethodImpl(MethodImplOptions.NoInlining)] public static long Touch() { T1 = "x"; T2 = new Pair { A = 3, B = "y" }; return A1 + A6 + S4.Length + P2.A; }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)] static T Id<T>(T x) { return x; }
        [MethodImpl(MethodImplOptions.NoInlining)] static void Trigger() { }

        static volatile bool stop;

        static void Churn()
        {
            long n = 0;
            while (!stop)
            {
                var l = new List<string>();
                for (int i = 0; i < 200; i++) l.Add(new string('c', i % 40));
                n += l.Count;
            }
        }

        static void Collect()
        {
            while (!stop)
            {
                GC.Collect(0);
                Thread.Sleep(0);
            }
        }

        public static int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0]) : 300;
            var churn = new Thread(Churn);
            churn.Start();
            var collector = new Thread(Collect);
            collector.Start();
            var add = new DynamicMethod("AddLcg", typeof(int), new[] { typeof(int), typeof(int) });
            var il = add.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldarg_1);
            il.Emit(OpCodes.Add);
            il.Emit(OpCodes.Ret);
            var lcg = (Func<int, int, int>)add.CreateDelegate(typeof(Func<int, int, int>));
            long sum = 0;
            var bi = new Big<int>(3);
            var bs = new Big<string>("big");
            var t = new Tiny { X = 4 };
            var c = new Constrained<int> { Value = 9 };
            sum += bi.Get() + bs.Get().Length + t.Foo() + c.Get() + Big<int>.Count(5) + Big<long>.Touch() + Tiny.Touch();
            sum += bi.V01() + bi.V10() + bi.V20() + bs.V20() + bi.Plain();
            sum += Statics.Touch() + Statics2.Touch() + Id(3) + Id("s").Length;
            Trigger();
            for (int i = 0; i < rounds; i++)
            {
                for (int j = 0; j < 20; j++)
                {
                    sum += bi.Get() + bs.Get().Length + t.Foo() + c.Get() + Big<int>.Count(j) + lcg(i, j);
                    sum += bi.V05() + bs.V15() + Id(j) + Id("x" + j).Length + new Tiny { X = j }.Foo();
                    sum += Statics.Number + Statics.Name.Length + Statics2.A3 + Statics2.S2.Length + Statics.Boxed.A;
                }
                Thread.Sleep(1);
            }
            stop = true;
            churn.Join();
            collector.Join();
            Console.WriteLine("sum " + sum);
            Console.WriteLine("types " + typeof(Program).Assembly.GetTypes().Length);
            return 0;
        }
    }
}
