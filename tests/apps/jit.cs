// Scenario "jit": calls a known list of methods of different shapes (static,
// instance, nested type, generic type) and names each in its output as
// "calls <Namespace.Type+Nested::Method>", so a test can check a profiler saw
// the JIT compilation of each. NoInlining keeps every one a separate method.
using System;
using System.Runtime.CompilerServices;

namespace Jit
{
    public class Counter
    {
        private int total;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public void Add(int value)
        {
            total += value;
        }

        public int Total { get { return total; } }
    }

    public static class Outer
    {
        public static class Inner
        {
            [MethodImpl(MethodImplOptions.NoInlining)]
            public static int Work(int x)
            {
                return x * 3 + 1;
            }
        }
    }

    public class Box<T>
    {
        private readonly T value;

        public Box(T value)
        {
            this.value = value;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public T Get()
        {
            return value;
        }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Fib(int n)
        {
            return n < 2 ? n : Fib(n - 1) + Fib(n - 2);
        }

        public static int Main(string[] args)
        {
            Console.WriteLine("calls Jit.Program::Main");

            Console.WriteLine("calls Jit.Program::Fib");
            Console.WriteLine("fib(20) = " + Fib(20));

            Console.WriteLine("calls Jit.Counter::Add");
            Counter counter = new Counter();
            for (int i = 1; i <= 100; i++)
                counter.Add(i);
            Console.WriteLine("counter total = " + counter.Total);

            Console.WriteLine("calls Jit.Outer+Inner::Work");
            Console.WriteLine("work(14) = " + Outer.Inner.Work(14));

            Console.WriteLine("calls Jit.Box`1::Get");
            Box<string> box = new Box<string>("boxed");
            Console.WriteLine("box = " + box.Get());
            return 0;
        }
    }
}
