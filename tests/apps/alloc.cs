// Scenario "alloc": allocates exactly K instances of Alloc.Widget, B large
// arrays of Alloc.Widget (large-object heap) and induces G garbage
// collections, printing each number, so a test can compare with the counts
// an allocation profiler reports. No exceptions.
using System;
using System.Runtime.CompilerServices;

namespace Alloc
{
    public class Widget
    {
        public int Value;
        public Widget Next;
    }

    public static class Program
    {
        const int K = 12345;
        const int B = 3;
        const int G = 3;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static Widget Chain(int n)
        {
            Widget head = null;
            for (int i = 0; i < n; i++)
            {
                Widget w = new Widget();
                w.Value = i;
                w.Next = i % 100 == 0 ? null : head;
                head = w;
            }
            return head;
        }

        public static int Main(string[] args)
        {
            Widget kept = Chain(K);
            Widget[][] big = new Widget[B][];
            for (int i = 0; i < B; i++)
                big[i] = new Widget[20000];
            for (int i = 0; i < G; i++)
                GC.Collect();
            Console.WriteLine("allocated Alloc.Widget x " + K);
            Console.WriteLine("allocated Alloc.Widget[] x " + B + " of 20000 elements");
            Console.WriteLine("induced GCs = " + G);
            GC.KeepAlive(kept);
            GC.KeepAlive(big);
            return 0;
        }
    }
}
