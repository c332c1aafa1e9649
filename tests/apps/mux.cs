// Scenario "mux": a little of what each child of the profiler multiplexer
// watches — JIT compilations, allocations of a known type, caught
// exceptions (how many: the first argument, default 3) — with its own
// account of each printed, so the children's records can be compared with
// the app and with each child's records when it runs alone.
using System;
using System.Runtime.CompilerServices;

namespace Mux
{
    public class Widget
    {
        public int Value;
        public Widget Next;
    }

    public class MuxException : Exception
    {
        public MuxException(int n) : base("mux " + n) { }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static Widget Make(int i, Widget next)
        {
            return new Widget { Value = i, Next = next };
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Square(int x)
        {
            return x * x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Fail(int n)
        {
            throw new MuxException(n);
        }

        public static int Main(string[] args)
        {
            int throws = args.Length > 0 ? int.Parse(args[0]) : 3;
            Widget chain = null;
            for (int i = 0; i < 1000; i++)
            {
                chain = Make(i, chain);
            }
            long sum = 0;
            for (int i = 0; i < 2000; i++)
            {
                sum += Square(i);
            }
            int caught = 0;
            for (int i = 0; i < throws; i++)
            {
                try
                {
                    Fail(i);
                }
                catch (MuxException)
                {
                    caught++;
                }
            }
            int length = 0;
            for (Widget w = chain; w != null; w = w.Next)
            {
                length++;
            }
            Console.WriteLine("allocated Mux.Widget x " + length);
            Console.WriteLine("sum of squares = " + sum);
            Console.WriteLine("thrown = " + throws);
            Console.WriteLine("caught = " + caught);
            return 0;
        }
    }
}
