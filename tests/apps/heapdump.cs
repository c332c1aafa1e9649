// The heap-snapshot scenarios' app: builds a known heap (its own types in
// known numbers, strings, arrays and collections), collects, writes its
// process id to <ready-file> and waits, allocating nothing, until
// <stop-file> exists; then prints its own ground truth, one line per kind:
//   count <type as a snapshot names it> <objects>
// and "done". Usage: heapdump <stop-file> <ready-file> [<scale>]
// (each unit of scale adds about 0.5 MB of live objects: 420 about 200 MB,
// for the benchmark).
using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;

namespace HeapDump
{
    class Node
    {
        public Node Next;
        public int Value;
    }

    class Customer
    {
        public string Name;
        public int[] Scores;
        public Customer(int i)
        {
            Name = "customer-" + i;
            Scores = new int[4];
        }
    }

    class Order
    {
        public long Id;
        public decimal Total;
    }

    struct Point
    {
        public int X, Y;
    }

    static class App
    {
        static Node head;
        static readonly List<Customer> customers = new List<Customer>();
        static readonly Dictionary<int, Order> orders = new Dictionary<int, Order>();
        static readonly List<List<int>> lists = new List<List<int>>();
        static readonly List<Dictionary<string, int>> maps = new List<Dictionary<string, int>>();
        static readonly List<byte[]> blobs = new List<byte[]>();
        static readonly List<Point[]> points = new List<Point[]>();

        static int Main(string[] args)
        {
            string stop = args[0];
            string ready = args[1];
            int scale = args.Length > 2 ? int.Parse(args[2]) : 1;
            const int Nodes = 5000, Customers = 1234, Orders = 777, Lists = 50, Maps = 30, Blobs = 100, PointArrays = 20;
            for (int s = 0; s < scale; s++)
            {
                for (int i = 0; i < Nodes; i++) head = new Node { Next = head, Value = i };
                for (int i = 0; i < Customers; i++) customers.Add(new Customer(s * Customers + i));
                for (int i = 0; i < Orders; i++) orders[s * Orders + i] = new Order { Id = i };
                for (int i = 0; i < Lists; i++)
                {
                    var l = new List<int>(16);
                    for (int j = 0; j < 16; j++) l.Add(j);
                    lists.Add(l);
                }
                for (int i = 0; i < Maps; i++)
                {
                    var m = new Dictionary<string, int>();
                    m["a" + i] = i;
                    maps.Add(m);
                }
                for (int i = 0; i < Blobs; i++) blobs.Add(new byte[1000]);
                for (int i = 0; i < PointArrays; i++) points.Add(new Point[10]);
            }
            string truth =
                "count HeapDump.Node " + Nodes * scale + "\n" +
                "count HeapDump.Customer " + Customers * scale + "\n" +
                "count HeapDump.Order " + Orders * scale + "\n" +
                "count System.Collections.Generic.List<System.Int32> " + Lists * scale + "\n" +
                "count System.Collections.Generic.Dictionary<System.String,System.Int32> " + Maps * scale + "\n" +
                "count HeapDump.Point[] " + PointArrays * scale + "\n" +
                "done";
            // The waiting loop's first round before the heap is known: its
            // first File.Exists and Thread.Sleep initialise what they keep
            // (the file system's and the thread's statics).
            bool stopped = File.Exists(stop);
            Thread.Sleep(1);
            string pid = System.Diagnostics.Process.GetCurrentProcess().Id.ToString();
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            File.WriteAllText(ready + ".tmp", pid);
            File.Move(ready + ".tmp", ready);
            if (stopped) truth = "stopped early";
            // Wait without allocating: a sleep between checks of the file.
            while (!File.Exists(stop))
            {
                Thread.Sleep(50);
            }
            Console.WriteLine(truth);
            GC.KeepAlive(head);
            return 0;
        }
    }
}
