// Scenario "wrap": a method of every shape the method-wrapping layer must
// keep (clrprof::instrumentation, the method-wrapper example), each called
// from code that keeps its own account: a call counted at every call site
// (recursive ones included), an exception counted where it leaves the
// method (a catch right around the call, or a catch-and-rethrow inside the
// caller). The wrapped methods live in Wrap.Target; the bookkeeping outside.
//
// Runs three phases; the wrapper's ReJIT mode wraps at Rejit.Begin and
// unwraps at Rejit.End, so only phase 2 counts there. Prints the results of
// the calls (which a wrapper must not change), then per method
// "account <method> <enter> <return> <exception>" over all phases and
// "rejit-account ..." for phase 2, and "args ..." for the calls of
// Wrap.Target.Args (arguments and return value as the app sees them).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

namespace Wrap
{
    public static class Rejit
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Begin() { }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void End() { }
    }

    public class Oops : Exception
    {
        public Oops(string m) : base(m) { }
    }

    // What Widget's constructor throws: another type than the other shapes'.
    public class SizeError : Oops
    {
        public SizeError(string m) : base(m) { }
    }

    public static class Account
    {
        // method -> [enter, exception]
        static readonly Dictionary<string, long[]> counts = new Dictionary<string, long[]>();
        // "method type" -> exceptions of that type that left the method
        static readonly Dictionary<string, long> types = new Dictionary<string, long>();

        static long[] Of(string m)
        {
            long[] c;
            if (!counts.TryGetValue(m, out c))
            {
                c = new long[2];
                counts[m] = c;
            }
            return c;
        }

        public static void Call(string m) { lock (counts) Of(m)[0]++; }
        public static void Threw(string m, Exception e)
        {
            lock (counts)
            {
                Of(m)[1]++;
                string key = m + " " + e.GetType().FullName;
                long n;
                types.TryGetValue(key, out n);
                types[key] = n + 1;
            }
        }

        // "exception-type <method> <type> <count>" for every exception that
        // left a method, over the whole run.
        public static void PrintTypes()
        {
            lock (counts)
            {
                var keys = new List<string>(types.Keys);
                keys.Sort(StringComparer.Ordinal);
                foreach (var k in keys) Console.WriteLine("exception-type " + k + " " + types[k]);
            }
        }

        public static Dictionary<string, long[]> Snapshot()
        {
            lock (counts)
            {
                var s = new Dictionary<string, long[]>();
                foreach (var kv in counts) s[kv.Key] = (long[])kv.Value.Clone();
                return s;
            }
        }

        public static void Print(string prefix, Dictionary<string, long[]> now, Dictionary<string, long[]> before)
        {
            var names = new List<string>(now.Keys);
            names.Sort(StringComparer.Ordinal);
            foreach (var m in names)
            {
                long[] b;
                if (!before.TryGetValue(m, out b)) b = new long[2];
                long enter = now[m][0] - b[0], exc = now[m][1] - b[1];
                Console.WriteLine(prefix + " " + m + " " + enter + " " + (enter - exc) + " " + exc);
            }
        }
    }
}

namespace Wrap.Target
{
    public struct Pair
    {
        public int A;
        public double B;
    }

    public struct Point
    {
        public int X;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Sum(int k)
        {
            X += k; // changes the caller's copy through the value-type `this`
            return X;
        }
    }

    public class Box<T>
    {
        readonly T v;
        public Box(T v) { this.v = v; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public T Get() { return v; }
    }

    public class Widget
    {
        public readonly int Size;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public Widget(int size) : base()
        {
            if (size < 0) throw new SizeError("negative size");
            Size = size;
        }
    }

    // A constructor is wrapped after its base constructor call: Base's
    // throws for a negative n, before Derived's own body runs, so that is no
    // call of Derived's constructor (neither entry nor exception); Derived's
    // field initializer runs before its base call, outside its wrapper.
    public class Base
    {
        public readonly int N;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public Base(int n)
        {
            if (n < 0) throw new Oops("negative base");
            N = n;
        }
    }

    public class Derived : Base
    {
        readonly int[] init = new int[] { 1, 2, 3 };
        public readonly int Size;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public Derived(int n) : base(n)
        {
            if (n == 1) throw new ArgumentException("one");
            Size = init[n % 3] + N;
        }
    }

    // Small enough to be inlined (no NoInlining): the wrapper either keeps
    // it from being inlined or, by ReJIT with inliners, recompiles its callers.
    public static class Small
    {
        public static int Twice(int x) { return x + x; }
    }

    public static class Args
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Add(int a, int b) { return a + b; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Mix(long l, double d, bool f, char c, float s)
        {
            return l + d + (f ? 1 : 0) + c + s;
        }
    }

    public class Shapes
    {
        int bias = 3;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Instance(int x) { return x + bias; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static T Id<T>(T v) { return v; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void OutRef(out int a, ref int b)
        {
            a = b * 2;
            b = b + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Many(int a1, long a2, int a3, double a4, int a5, int a6, short a7, int a8, byte a9, int a10, long a11, int a12)
        {
            return a1 + a2 + a3 + (long)a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Pair MakePair(int n) { return new Pair { A = n, B = n / 4.0 }; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static decimal Dec(decimal d) { return d * 1.5m; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Half(double d) { return d / 2; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static float Third(float f) { return f / 3; }

        // Its own try/catch/finally: the exception is handled inside.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Guarded(int n)
        {
            int r = 0;
            try
            {
                try
                {
                    if (n % 3 == 0) throw new Oops("inner");
                    r = n;
                }
                catch (Oops)
                {
                    r = -n;
                }
                finally
                {
                    r += 100;
                }
            }
            finally
            {
                r *= 2;
            }
            return r;
        }

        // A filter: handles odd numbers, lets even ones leave the method.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Filtered(int n)
        {
            try
            {
                throw new Oops(n.ToString(CultureInfo.InvariantCulture));
            }
            catch (Oops e) when (e.Message.EndsWith("1") || e.Message.EndsWith("3") || e.Message.EndsWith("5") || e.Message.EndsWith("7") || e.Message.EndsWith("9"))
            {
                return n;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int ManyReturns(int n)
        {
            switch (n % 4)
            {
                case 0: return 10;
                case 1: return 11;
                case 2: if (n > 5) return 12; break;
            }
            return 13;
        }

        // Ends in throw: never returns.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Thrower(int n)
        {
            throw new Oops("always " + n);
        }

        // An exception through nested finally blocks that leaves the method.
        public static int FinallyDepth;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int NestedFinally(int n)
        {
            try
            {
                try
                {
                    if (n % 2 == 0) throw new Oops("through finally");
                    return n;
                }
                finally
                {
                    System.Threading.Interlocked.Increment(ref FinallyDepth);
                }
            }
            finally
            {
                System.Threading.Interlocked.Increment(ref FinallyDepth);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Fib(int n)
        {
            if (n < 2) return n;
            Account.Call("Wrap.Target.Shapes::Fib");
            int a = Fib(n - 1);
            Account.Call("Wrap.Target.Shapes::Fib");
            return a + Fib(n - 2);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static IEnumerable<int> Range(int n)
        {
            for (int i = 0; i < n; i++) yield return i;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<int> WorkAsync(int n)
        {
            await Task.Yield();
            return n * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Secret() { return 7; }

        // Its own IL offset, as the runtime maps it for stack traces: under
        // a wrapper it must still be an offset of this original body.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Where()
        {
            return new System.Diagnostics.StackFrame(0, false).GetILOffset();
        }

        // Calls Thrower and lets its exception leave: a catch-and-rethrow
        // in the caller counts the callee's exceptional exit.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Chain(int n)
        {
            try
            {
                Account.Call("Wrap.Target.Shapes::Thrower");
                return Thrower(n);
            }
            catch (Oops e)
            {
                Account.Threw("Wrap.Target.Shapes::Thrower", e);
                throw;
            }
        }
    }
}

namespace Wrap
{
    using Wrap.Target;

    public static class Program
    {
        // WRAP_NO_THROW=1: inputs for which no exception is thrown, and the
        // shapes that always throw left out (for a leg whose runtime hangs
        // on a process's second managed exception).
        static readonly bool NoThrow = Environment.GetEnvironmentVariable("WRAP_NO_THROW") == "1";

        static string S(double d) { return d.ToString("R", CultureInfo.InvariantCulture); }
        static string S(float f) { return f.ToString("R", CultureInfo.InvariantCulture); }

        static long Expect(string m, Func<long> call)
        {
            Account.Call(m);
            try { return call(); }
            catch (Oops e) { Account.Threw(m, e); return -1; }
        }

        static long Round(int k)
        {
            return Round(k, true);
        }

        static long Round(int k, bool print)
        {
            long check = 0;
            var shapes = new Shapes();
            const string T = "Wrap.Target.Shapes::";
            check += Expect(T + "Instance", () => shapes.Instance(k));
            check += Expect("Wrap.Target.Small::Twice", () => Small.Twice(k));
            check += Expect(T + "Id", () => Shapes.Id(k));
            check += Expect(T + "Id", () => Shapes.Id("s" + k).Length);
            check += Expect(T + "Id", () => (long)Shapes.Id(k + 0.5));
            var p = new Point { X = k };
            check += Expect("Wrap.Target.Point::Sum", () => p.Sum(2));
            check += p.X;
            check += Expect("Wrap.Target.Box`1::Get", () => new Box<int>(k).Get());
            check += Expect("Wrap.Target.Box`1::Get", () => new Box<string>("b" + k).Get().Length);
            int a, b = k;
            Account.Call(T + "OutRef");
            Shapes.OutRef(out a, ref b);
            check += a + b;
            check += Expect(T + "Many", () => Shapes.Many(k, 2, 3, 4.5, 5, 6, 7, 8, 9, 10, 11, 12));
            check += Expect(T + "MakePair", () => { var q = Shapes.MakePair(k); return q.A + (long)(q.B * 4); });
            check += Expect(T + "Dec", () => (long)Shapes.Dec(k + 0.5m));
            Account.Call(T + "Half");
            double half = Shapes.Half(k + 0.25);
            if (print) Console.WriteLine("half " + S(half));
            Account.Call(T + "Third");
            float third = Shapes.Third(k + 1.0f);
            if (print) Console.WriteLine("third " + S(third));
            check += Expect(T + "Guarded", () => Shapes.Guarded(NoThrow ? 3 * k + 1 : k));
            if (!NoThrow) check += Expect(T + "Filtered", () => Shapes.Filtered(k));
            check += Expect(T + "ManyReturns", () => Shapes.ManyReturns(k));
            if (!NoThrow) check += Expect(T + "Chain", () => Shapes.Chain(k));
            check += Expect(T + "NestedFinally", () => Shapes.NestedFinally(NoThrow ? 2 * k + 1 : k));
            check += Expect(T + "Fib", () => Shapes.Fib(k % 12));
            Account.Call(T + "Range");
            foreach (int i in Shapes.Range(k % 5)) check += i;
            Account.Call(T + "WorkAsync");
            check += Shapes.WorkAsync(k).Result;
            check += Expect("Wrap.Target.Widget::.ctor", () => new Widget(NoThrow ? k % 4 + 1 : k % 4 - 1).Size);
            int d = NoThrow ? k % 3 + 2 : k % 4 - 1;
            Account.Call("Wrap.Target.Base::.ctor");
            if (d >= 0) Account.Call("Wrap.Target.Derived::.ctor");
            try { check += new Derived(d).Size; }
            catch (Oops e) { Account.Threw("Wrap.Target.Base::.ctor", e); check -= 1; }
            catch (ArgumentException e) { Account.Threw("Wrap.Target.Derived::.ctor", e); check -= 2; }
            Account.Call("Wrap.Target.Args::Add");
            int sum = Args.Add(k, 2 * k);
            check += sum;
            if (print) Console.WriteLine("args Wrap.Target.Args::Add " + k + " " + (2 * k) + " -> " + sum);
            Account.Call("Wrap.Target.Args::Mix");
            double mix = Args.Mix(k, 0.5, k % 2 == 0, 'a', 1.5f);
            check += (long)mix;
            if (print) Console.WriteLine("args Wrap.Target.Args::Mix " + k + " 0.5 " + (k % 2 == 0 ? "true" : "false") + " 97 1.5 -> " + S(mix));
            return check;
        }

        static long Phase(int from, int to)
        {
            long check = 0;
            for (int k = from; k < to; k++) check += Round(k);
            return check;
        }

        // WRAP_THREADS=N: phase 2 also runs N threads of WRAP_ROUNDS quiet
        // rounds each (the wrapper's ReJIT cycles run meanwhile).
        static long Threads()
        {
            int n, rounds;
            if (!int.TryParse(Environment.GetEnvironmentVariable("WRAP_THREADS"), out n)) return 0;
            if (!int.TryParse(Environment.GetEnvironmentVariable("WRAP_ROUNDS"), out rounds)) rounds = 1000;
            var sums = new long[n];
            var threads = new System.Threading.Thread[n];
            for (int t = 0; t < n; t++)
            {
                int me = t;
                threads[t] = new System.Threading.Thread(() =>
                {
                    for (int r = 0; r < rounds; r++) sums[me] += Round(r % 16, false);
                });
                threads[t].Start();
            }
            long total = 0;
            for (int t = 0; t < n; t++)
            {
                threads[t].Join();
                total += sums[t];
            }
            return total;
        }

        public static int Main()
        {
            long check = Phase(0, 6);
            var before = Account.Snapshot();
            Rejit.Begin();
            check += Threads();
            check += Phase(6, 14);
            Rejit.End();
            var after = Account.Snapshot();
            check += Phase(14, 17);
            Account.Call("Wrap.Target.Shapes::Where");
            Console.WriteLine("il-offset " + Shapes.Where());
            Account.Call("Wrap.Target.Shapes::Secret");
            Console.WriteLine("secret " + Shapes.Secret());
            Console.WriteLine("finally-depth " + Shapes.FinallyDepth);
            Console.WriteLine("check " + check);
            var none = new Dictionary<string, long[]>();
            Account.Print("account", Account.Snapshot(), none);
            Account.Print("rejit-account", after, before);
            Account.PrintTypes();
            return 0;
        }
    }
}
