// Dispatch benchmark, MovedReferences2 / SurvivingReferences2: N rounds,
// each filling a table of small objects, dropping every other one
// (fragmented survivors, so each surviving object is its own range) and
// collecting; every fourth round is a full compacting collection, the rest
// gen 0. Timed by the app itself (one warm-up round untimed).
// Prints "elapsed_ns <ns> rounds <n> gcs <g> survivors <s>" (g: collections
// of any generation during the timed part, GC.CollectionCount(0) counts
// them all; s: objects alive at the end).
using System;
using System.Diagnostics;
using System.Globalization;
using System.Runtime.CompilerServices;

namespace Bench
{
    public sealed class Node
    {
        public long A, B;
        public Node Next;
    }

    public static class Collections
    {
        const int Objects = 20000;
        static Node[] table = new Node[Objects];

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Round(int r)
        {
            for (int i = 0; i < Objects; i++)
            {
                var n = new Node { A = i, B = r };
                if ((i & 1) == 0) table[i] = n;
            }
            if (r % 4 == 3)
            {
                GC.Collect(2, GCCollectionMode.Forced, true, true);
            }
            else
            {
                GC.Collect(0, GCCollectionMode.Forced, true);
            }
        }

        public static int Main(string[] args)
        {
            int rounds = int.Parse(args[0], CultureInfo.InvariantCulture);
            Round(0); // JIT-compile and warm up
            int before = GC.CollectionCount(0);
            var watch = Stopwatch.StartNew();
            for (int r = 1; r <= rounds; r++) Round(r);
            watch.Stop();
            int gcs = GC.CollectionCount(0) - before;
            long survivors = 0;
            foreach (var n in table) if (n != null) survivors++;
            long ns = (long)(watch.ElapsedTicks * (1e9 / Stopwatch.Frequency));
            Console.WriteLine("elapsed_ns " + ns + " rounds " + rounds + " gcs " + gcs + " survivors " + survivors);
            return 0;
        }
    }
}
