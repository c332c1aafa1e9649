// Scenario "calls": methods of many shapes, each counting its own calls.
// Prints "count <Namespace.Type::Method> <n>" for every counted method (the
// profiler's call counts must match exactly, with inlining disabled) and
// "result ..." lines computed from many integer, float, double and struct
// arguments and struct / floating-point returns (round-trip formatting):
// they must be byte for byte the same with and without ELT hooks, which is
// the proof that the hooks preserve argument and return registers.
using System;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace Calls
{
    public struct Vec3
    {
        public double X, Y, Z;
        public Vec3(double x, double y, double z) { X = x; Y = y; Z = z; }
    }

    public struct Pair
    {
        public int A, B;
    }

    public struct Mixed
    {
        public float F;
        public int I;
        public double D;
    }

    public struct Big
    {
        public long A, B, C, D, E;
    }

    public static class Counts
    {
        public static int Fib, Identity, BoxGet, AnimalSpeak, DogSpeak, CatSpeak, SquareArea, CircleArea;
        public static int Mix, MakeVec, MakePair, MakeMixed, MakeBig, Scale, Half, Sum8, Greet;
    }

    public abstract class Animal
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public virtual int Speak(int n)
        {
            Counts.AnimalSpeak++;
            return n + 1;
        }
    }

    public class Dog : Animal
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public override int Speak(int n)
        {
            Counts.DogSpeak++;
            return base.Speak(n) * 2;
        }
    }

    public class Cat : Animal
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public override int Speak(int n)
        {
            Counts.CatSpeak++;
            return n * 3;
        }
    }

    public interface IShape
    {
        double Area(double scale);
    }

    public class Square : IShape
    {
        public double Side;
        [MethodImpl(MethodImplOptions.NoInlining)]
        public double Area(double scale)
        {
            Counts.SquareArea++;
            return Side * Side * scale;
        }
    }

    public class Circle : IShape
    {
        public double R;
        [MethodImpl(MethodImplOptions.NoInlining)]
        public double Area(double scale)
        {
            Counts.CircleArea++;
            return 3.25 * R * R * scale;
        }
    }

    public class Box<T>
    {
        private readonly T value;
        public Box(T value) { this.value = value; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public T Get()
        {
            Counts.BoxGet++;
            return value;
        }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Fib(int n)
        {
            Counts.Fib++;
            return n < 2 ? n : Fib(n - 1) + Fib(n - 2);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static T Identity<T>(T value)
        {
            Counts.Identity++;
            return value;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Mix(int a, long b, float c, double d, int e, double f, float g, double h,
                                 int i, double j, Vec3 v, double k, int l, Pair p, float m, Mixed x)
        {
            Counts.Mix++;
            return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8 + i * 9 + j * 10
                + v.X * 11 + v.Y * 12 + v.Z * 13 + k * 14 + l * 15 + p.A * 16 + p.B * 17 + m * 18
                + x.F * 19 + x.I * 20 + x.D * 21;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Sum8(long a, long b, long c, long d, long e, long f, long g, long h)
        {
            Counts.Sum8++;
            return a - b + c * 3 - d + e * 5 - f + g * 7 - h;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Vec3 MakeVec(double x, double y, double z)
        {
            Counts.MakeVec++;
            return new Vec3(x * 1.5, y - 0.25, z / 3.0);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Pair MakePair(int a, int b)
        {
            Counts.MakePair++;
            Pair p;
            p.A = a * 7;
            p.B = b - 3;
            return p;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Mixed MakeMixed(float f, int i, double d)
        {
            Counts.MakeMixed++;
            Mixed m;
            m.F = f / 3.0f;
            m.I = i + 11;
            m.D = d * d;
            return m;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Big MakeBig(long seed)
        {
            Counts.MakeBig++;
            Big b;
            b.A = seed; b.B = seed * 3; b.C = seed ^ 0x5555; b.D = -seed; b.E = seed << 7;
            return b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static float Scale(float a, float b, float c, float d, float e, float f, float g, float h, float i)
        {
            Counts.Scale++;
            return a * 1.5f + b - c * 0.5f + d * e - f + g / 3.0f + h * i;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Half(double value)
        {
            Counts.Half++;
            return value / 2.0;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static string Greet(string name, int times)
        {
            Counts.Greet++;
            return name + "!" + times;
        }

        static string R(double d) { return d.ToString("R", CultureInfo.InvariantCulture); }
        static string R(float f) { return f.ToString("R", CultureInfo.InvariantCulture); }

        public static int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0], CultureInfo.InvariantCulture) : 3;
            Console.WriteLine("result fib " + Fib(18));

            long idSum = 0;
            for (int r = 0; r < rounds; r++)
            {
                idSum += Identity(r);
                idSum += (long)Identity(r * 0.5);
                idSum += Identity("s" + r).Length;
                idSum += Greet("s" + r, r).Length;
                idSum += Identity(new Pair { A = r, B = r }).A;
                idSum += new Box<int>(r).Get();
                idSum += new Box<string>("box").Get().Length;
                idSum += (long)new Box<double>(r * 1.25).Get();
            }
            Console.WriteLine("result generic " + idSum);

            Animal[] animals = { new Dog(), new Cat(), new Dog() };
            IShape[] shapes = { new Square { Side = 1.5 }, new Circle { R = 0.75 } };
            long speak = 0;
            double area = 0;
            for (int r = 0; r < rounds * 4; r++)
            {
                speak += animals[r % animals.Length].Speak(r);
                area += shapes[r % shapes.Length].Area(r + 0.5);
            }
            Console.WriteLine("result virtual " + speak + " " + R(area));

            double mix = 0;
            for (int r = 0; r < rounds; r++)
            {
                Vec3 v = MakeVec(r + 0.1, r + 0.2, r + 0.3);
                Pair p = MakePair(r, r + 1);
                Mixed x = MakeMixed(r + 0.5f, r, r + 0.125);
                mix += Mix(r, r * 100000000000L, r + 0.5f, r + 0.25, -r, r * 1e-3, r - 0.5f, r * 1e10,
                           r + 7, Half(r + 1.5), v, r * 3.5, r * 11, p, r + 0.75f, x);
                Big b = MakeBig(r + 1);
                Console.WriteLine("result vec " + R(v.X) + " " + R(v.Y) + " " + R(v.Z)
                    + " pair " + p.A + " " + p.B + " mixed " + R(x.F) + " " + x.I + " " + R(x.D)
                    + " big " + b.A + " " + b.B + " " + b.C + " " + b.D + " " + b.E);
                Console.WriteLine("result scale " + R(Scale(r, r + 1, r + 2, r + 3, r + 4, r + 5, r + 6, r + 7, r + 8))
                    + " sum8 " + Sum8(r, r * 2, r * 3, r * 4, r * 5, r * 6, r * 7, r * 8));
            }
            Console.WriteLine("result mix " + R(mix));

            Console.WriteLine("count Calls.Program::Fib " + Counts.Fib);
            Console.WriteLine("count Calls.Program::Identity " + Counts.Identity);
            Console.WriteLine("count Calls.Box`1::Get " + Counts.BoxGet);
            Console.WriteLine("count Calls.Animal::Speak " + Counts.AnimalSpeak);
            Console.WriteLine("count Calls.Dog::Speak " + Counts.DogSpeak);
            Console.WriteLine("count Calls.Cat::Speak " + Counts.CatSpeak);
            Console.WriteLine("count Calls.Square::Area " + Counts.SquareArea);
            Console.WriteLine("count Calls.Circle::Area " + Counts.CircleArea);
            Console.WriteLine("count Calls.Program::Mix " + Counts.Mix);
            Console.WriteLine("count Calls.Program::MakeVec " + Counts.MakeVec);
            Console.WriteLine("count Calls.Program::MakePair " + Counts.MakePair);
            Console.WriteLine("count Calls.Program::MakeMixed " + Counts.MakeMixed);
            Console.WriteLine("count Calls.Program::MakeBig " + Counts.MakeBig);
            Console.WriteLine("count Calls.Program::Scale " + Counts.Scale);
            Console.WriteLine("count Calls.Program::Half " + Counts.Half);
            Console.WriteLine("count Calls.Program::Sum8 " + Counts.Sum8);
            Console.WriteLine("count Calls.Program::Greet " + Counts.Greet);
            return 0;
        }
    }
}
