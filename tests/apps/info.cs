// Scenario "info": an app shaped for the ICorProfilerInfo scenario. It has a
// nested type, a generic type, a value type and a reference type with known
// fields (and an ordinary and a thread static), a two-dimensional array, one caught exception (only one: see the
// Wine defect in RUNTIMES.md) and one induced GC. It prints what it did so
// the test can compare with the profiler's view.
using System;

namespace InfoApp
{
    public class Outer
    {
        public class Inner
        {
            public static int Method(int x)
            {
                return x * 3 + 1;
            }
        }
    }

    public class Box<T>
    {
        private T value;
        public Box(T value) { this.value = value; }
        public T Get() { return value; }
    }

    public struct Point
    {
        public int X;
        public long Y;
    }

    public class Shape
    {
        public int Sides;
        public object Tag;
        public static int Counter;
        [ThreadStatic] public static int Tls;
    }

    public static class Program
    {
        private static int Thrower(int n)
        {
            if (n > 0)
            {
                throw new InvalidOperationException("info app: deliberate");
            }
            return n;
        }

        public static int Main(string[] args)
        {
            int total = Outer.Inner.Method(4);
            Console.WriteLine("calls InfoApp.Outer+Inner::Method " + total);

            var box = new Box<string>("boxed");
            Console.WriteLine("calls InfoApp.Box`1::Get " + box.Get());

            var shape = new Shape { Sides = 4, Tag = "square" };
            Console.WriteLine("shape " + shape.Sides + " " + shape.Tag);

            Shape.Counter = 41;
            Shape.Tls = 5;
            Console.WriteLine("statics " + Shape.Counter + " " + Shape.Tls);

            object boxed = new Point { X = 1, Y = 2 };
            Console.WriteLine("point " + ((Point)boxed).X + " " + ((Point)boxed).Y);

            int[,] grid = new int[3, 4];
            grid[2, 3] = 7;
            Console.WriteLine("grid " + grid.GetLength(0) + "x" + grid.GetLength(1) + " " + grid[2, 3]);

            try
            {
                Thrower(1);
            }
            catch (InvalidOperationException e)
            {
                Console.WriteLine("caught " + e.Message);
            }

            GC.Collect();
            Console.WriteLine("collected");
            return 0;
        }
    }
}
