// Scenario "signals": prints "ready", then keeps working until a signal ends
// it (Ctrl-C, SIGTERM); it prints nothing else, so its output is the same
// whenever the signal lands. The first argument says what the work is:
//   alloc   the main thread allocates small objects in a loop (a signal sent
//           to the process interrupts the main thread, so it lands in an
//           allocation, or in a profiler's ObjectAllocated callback)
//   work    the main thread allocates, throws and catches an exception, starts
//           and joins a short thread and induces a collection, each at its own
//           pace, in a loop (for the torture profiler)
using System;
using System.Threading;

namespace Signals
{
    public class Cell
    {
        public int Value;
        public Cell Next;
    }

    public class SignalsException : Exception
    {
        public SignalsException(string message) : base(message) { }
    }

    public static class Program
    {
        static Cell kept;
        static long sum;

        static void Allocate(int n)
        {
            Cell head = null;
            for (int i = 0; i < n; i++)
                head = new Cell { Value = i, Next = (i & 7) == 0 ? null : head };
            kept = head;
        }

        static void Throw(int i)
        {
            try
            {
                throw new SignalsException("round " + i);
            }
            catch (SignalsException e)
            {
                sum += e.Message.Length;
            }
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "alloc";
            if (mode != "alloc" && mode != "work")
            {
                Console.WriteLine("unknown mode " + mode);
                return 2;
            }
            Console.WriteLine("ready");
            Console.Out.Flush();
            for (long i = 0; ; i++)
            {
                Allocate(mode == "alloc" ? 1000 : 64);
                if (mode == "alloc")
                    continue;
                if (i % 16 == 0)
                    Throw((int)i);
                if (i % 64 == 0)
                {
                    var t = new Thread(() => Allocate(32));
                    t.Start();
                    t.Join();
                }
                if (i % 256 == 0)
                    GC.Collect();
                if (sum < 0)
                    Console.WriteLine(kept.Value);
            }
        }
    }
}
