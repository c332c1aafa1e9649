// Scenario "modern": the C# that users write today, each feature in methods
// that count their own calls. Prints "count <Namespace.Type::Method> <n>" for
// every counted method (the ELT call counts must match exactly; inlining is
// off for each of them) and "result <feature> <value>" lines computed by
// the feature, which must be the same with and without a profiler.
//
// Features: async/await state machines, Span<T> and ref structs, generic
// virtual methods, static abstract interface members, default interface
// methods, records (class and struct), lambdas and local functions,
// function pointers, and a collectible AssemblyLoadContext that is
// unloaded. Compiled against .NET 8 and later reference assemblies (static
// abstract members need the .NET 7 runtime). With `-features:runtime-async=on`
// and the .NET 11 reference assemblies, the async methods are runtime-async
// methods: the app's account is the same, the runtime's calls differ.
//
// Arguments: rounds (default 3); "throw" adds a round whose async chain
// and whose lambda throw and are caught (counted as calls all the same).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.Loader;
using System.Threading.Tasks;

namespace Modern
{
    public static class Counter
    {
        static readonly object Gate = new object();
        static readonly SortedDictionary<string, int> Calls = new SortedDictionary<string, int>(StringComparer.Ordinal);

        // The method's own name as the runtime's metadata spells it:
        // Namespace.Outer+Inner::Name (compiler-generated names included).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Hit(MethodBase m)
        {
            string key = m.DeclaringType!.FullName + "::" + m.Name;
            // A generic type's FullName carries its arguments; metadata names
            // the definition.
            int bracket = key.IndexOf('[');
            if (bracket >= 0) key = m.DeclaringType!.GetGenericTypeDefinition().FullName + "::" + m.Name;
            lock (Gate)
            {
                Calls.TryGetValue(key, out int n);
                Calls[key] = n + 1;
            }
        }

        public static void Print()
        {
            lock (Gate)
            {
                foreach (var kv in Calls)
                    Console.WriteLine("count " + kv.Key + " " + kv.Value.ToString(CultureInfo.InvariantCulture));
            }
        }
    }

    // --- async/await ---------------------------------------------------
    public static class Async
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<int> Leaf(int i)
        {
            // (Inside an async method the current method is its state
            // machine's MoveNext: the method is named explicitly.)
            Counter.Hit(typeof(Async).GetMethod(nameof(Leaf))!);
            await Task.Yield();
            return i * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<int> Middle(int i)
        {
            Counter.Hit(typeof(Async).GetMethod(nameof(Middle))!);
            int a = await Leaf(i);
            await Task.Delay(1);
            int b = await Leaf(i + 1);
            return a + b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task<int> Thrower(int i)
        {
            Counter.Hit(typeof(Async).GetMethod(nameof(Thrower))!);
            await Task.Yield();
            throw new InvalidOperationException("async " + i);
        }
    }

    // --- Span<T> and ref structs ----------------------------------------
    public ref struct Cursor
    {
        private Span<int> _items;
        private int _at;

        public Cursor(Span<int> items) { _items = items; _at = 0; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public bool TryNext(out int value)
        {
            Counter.Hit(typeof(Cursor).GetMethod(nameof(TryNext))!);
            if (_at < _items.Length) { value = _items[_at++]; return true; }
            value = 0;
            return false;
        }
    }

    public static class Spans
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Sum(ReadOnlySpan<int> items)
        {
            Counter.Hit(typeof(Spans).GetMethod(nameof(Sum))!);
            int s = 0;
            foreach (int x in items) s += x;
            return s;
        }
    }

    // --- generic virtual methods ------------------------------------------
    public abstract class Shape
    {
        public abstract T Describe<T>(Func<double, T> f);
    }

    public sealed class Square : Shape
    {
        public double Side = 3;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public override T Describe<T>(Func<double, T> f)
        {
            Counter.Hit(typeof(Square).GetMethod(nameof(Describe))!);
            return f(Side * Side);
        }
    }

    public sealed class Disc : Shape
    {
        public double Radius = 2;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public override T Describe<T>(Func<double, T> f)
        {
            Counter.Hit(typeof(Disc).GetMethod(nameof(Describe))!);
            return f(Math.PI * Radius * Radius);
        }
    }

    // --- static abstract interface members --------------------------------
    public interface IMonoid<T> where T : IMonoid<T>
    {
        static abstract T Zero { get; }
        static abstract T Combine(T a, T b);
    }

    public readonly struct Meters : IMonoid<Meters>
    {
        public readonly long Value;
        public Meters(long v) { Value = v; }
        public static Meters Zero => new Meters(0);

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Meters Combine(Meters a, Meters b)
        {
            Counter.Hit(typeof(Meters).GetMethod(nameof(Combine))!);
            return new Meters(a.Value + b.Value);
        }
    }

    public static class Monoids
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static T Fold<T>(IEnumerable<T> items) where T : IMonoid<T>
        {
            Counter.Hit(typeof(Monoids).GetMethod(nameof(Fold))!);
            T acc = T.Zero;
            foreach (T x in items) acc = T.Combine(acc, x);
            return acc;
        }
    }

    // --- default interface methods ----------------------------------------
    public interface IGreeter
    {
        string Name { get; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        string Greet(string whom)
        {
            Counter.Hit(typeof(IGreeter).GetMethod(nameof(Greet))!);
            return Name + " greets " + whom;
        }
    }

    public sealed class Plain : IGreeter
    {
        public string Name => "plain";
    }

    public sealed class Loud : IGreeter
    {
        public string Name => "loud";

        [MethodImpl(MethodImplOptions.NoInlining)]
        public string Greet(string whom)
        {
            Counter.Hit(typeof(Loud).GetMethod(nameof(Greet))!);
            return Name.ToUpperInvariant() + " GREETS " + whom.ToUpperInvariant();
        }
    }

    // --- records ------------------------------------------------------------
    public record Point(int X, int Y)
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public Point Move(int dx, int dy)
        {
            Counter.Hit(typeof(Point).GetMethod(nameof(Move))!);
            return this with { X = X + dx, Y = Y + dy };
        }
    }

    public readonly record struct Money(decimal Amount, string Currency)
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public Money Add(Money other)
        {
            Counter.Hit(typeof(Money).GetMethod(nameof(Add))!);
            return this with { Amount = Amount + other.Amount };
        }
    }

    // --- function pointers ---------------------------------------------------
    public static unsafe class Pointers
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Twice(int x)
        {
            Counter.Hit(typeof(Pointers).GetMethod(nameof(Twice))!);
            return x * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Apply(delegate*<int, int> f, int x)
        {
            Counter.Hit(typeof(Pointers).GetMethod(nameof(Apply))!);
            return f(f(x));
        }
    }

    // Called only from the collectible copy of this assembly; not counted
    // (the copy has its own statics).
    public static class Unloadable
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Echo(int x) => x + 1000;
    }

    public static class Program
    {
        // --- lambdas and local functions -----------------------------------
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Closures(int round)
        {
            Counter.Hit(typeof(Program).GetMethod(nameof(Closures), BindingFlags.NonPublic | BindingFlags.Static)!);
            int captured = round + 1;
            Func<int, int> lambda = [MethodImpl(MethodImplOptions.NoInlining)] (x) =>
            {
                Counter.Hit(MethodBase.GetCurrentMethod()!);
                return x * captured;
            };
            [MethodImpl(MethodImplOptions.NoInlining)]
            int Local(int y)
            {
                Counter.Hit(MethodBase.GetCurrentMethod()!);
                return y + captured;
            }
            [MethodImpl(MethodImplOptions.NoInlining)]
            static int StaticLocal(int z)
            {
                Counter.Hit(MethodBase.GetCurrentMethod()!);
                return z - 1;
            }
            return Enumerable.Range(0, 4).Select(lambda).Sum() + Local(10) + StaticLocal(5);
        }

        // --- a collectible AssemblyLoadContext ----------------------------
        sealed class Collectible : AssemblyLoadContext
        {
            public Collectible() : base("modern-collectible", isCollectible: true) { }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference LoadAndUnload(string path, int round)
        {
            Counter.Hit(typeof(Program).GetMethod(nameof(LoadAndUnload), BindingFlags.NonPublic | BindingFlags.Static)!);
            var alc = new Collectible();
            // This app's own assembly again, in the collectible context: its
            // types are new ones there, with their own methods.
            Assembly asm = alc.LoadFromAssemblyPath(path);
            Type t = asm.GetType("Modern.Unloadable")!;
            int r = (int)t.GetMethod("Echo")!.Invoke(null, new object[] { round })!;
            Console.WriteLine("result collectible " + r.ToString(CultureInfo.InvariantCulture));
            alc.Unload();
            return new WeakReference(alc);
        }

        public static unsafe int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0], CultureInfo.InvariantCulture) : 3;
            bool throwing = args.Contains("throw");
            var inv = CultureInfo.InvariantCulture;
            for (int round = 0; round < rounds; round++)
            {
                int asyncResult = Async.Middle(round).GetAwaiter().GetResult();
                Console.WriteLine("result async " + asyncResult.ToString(inv));

                Span<int> numbers = stackalloc int[] { round, round + 1, round + 2, round + 3 };
                var cursor = new Cursor(numbers);
                int walked = 0;
                while (cursor.TryNext(out int v)) walked += v;
                Console.WriteLine("result span " + walked.ToString(inv) + " " + Spans.Sum(numbers).ToString(inv));

                Shape[] shapes = { new Square(), new Disc() };
                foreach (Shape s in shapes)
                {
                    Console.WriteLine("result gvm " + s.Describe(a => a.ToString("R", inv)) + " " + s.Describe(a => (long)a).ToString(inv));
                }

                Meters total = Monoids.Fold(new[] { new Meters(round), new Meters(10), new Meters(100) });
                Console.WriteLine("result static-abstract " + total.Value.ToString(inv));

                IGreeter[] greeters = { new Plain(), new Loud() };
                foreach (IGreeter g in greeters) Console.WriteLine("result dim " + g.Greet("r" + round.ToString(inv)));

                Point p = new Point(round, -round).Move(1, 2);
                Money m = new Money(1.5m, "EUR").Add(new Money(round, "EUR"));
                Console.WriteLine("result record " + p + " " + m + " " + (p == new Point(round + 1, 2 - round)).ToString());

                Console.WriteLine("result closures " + Closures(round).ToString(inv));

                Console.WriteLine("result fnptr " + Pointers.Apply(&Pointers.Twice, round + 1).ToString(inv));
            }
            if (throwing)
            {
                try
                {
                    Async.Thrower(7).GetAwaiter().GetResult();
                    Console.WriteLine("result async-throw none");
                }
                catch (InvalidOperationException e)
                {
                    Console.WriteLine("result async-throw " + e.Message);
                }
            }

            WeakReference alive = LoadAndUnload(typeof(Program).Assembly.Location, rounds);
            for (int i = 0; alive.IsAlive && i < 20; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Console.WriteLine("result unloaded " + (!alive.IsAlive).ToString());

            Counter.Print();
            return 0;
        }
    }
}
