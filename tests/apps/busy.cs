// Scenario "busy": touches many kinds of runtime events in one short run:
// JIT compilation, class loads, several threads, allocations, an induced GC,
// and exactly one thrown-and-caught exception (one, so the .NET 8 Wine leg,
// which hangs on a second exception, can run it too). Prints its own counts.
using System;
using System.Collections.Generic;
using System.Threading;

namespace Busy
{
    public class Node
    {
        public int Value;
        public Node Next;
    }

    public static class Program
    {
        static int Work(int seed)
        {
            Node head = null;
            for (int i = 0; i < 1000; i++)
            {
                head = new Node { Value = (seed * 31 + i) % 1009, Next = head };
            }
            int sum = 0;
            for (Node n = head; n != null; n = n.Next) sum += n.Value;
            return sum;
        }

        public static int Main(string[] args)
        {
            int total = Work(1);
            int[] results = new int[4];
            var threads = new List<Thread>();
            for (int t = 0; t < 4; t++)
            {
                int id = t;
                var th = new Thread(() => { results[id] = Work(id + 2); });
                threads.Add(th);
                th.Start();
            }
            foreach (var th in threads) th.Join();
            foreach (int r in results) total += r;
            GC.Collect();
            int caught = 0;
            try
            {
                throw new InvalidOperationException("one exception");
            }
            catch (InvalidOperationException)
            {
                caught++;
            }
            Console.WriteLine("threads 4");
            Console.WriteLine("caught " + caught);
            Console.WriteLine("total " + total);
            return 0;
        }
    }
}
