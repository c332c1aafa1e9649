// Scenario "eventpipe": a profiler writes one EventPipe event per
// Pipe.Marker the app allocates, and listens to the runtime's GC events
// while the app induces collections. Prints its own account: how many
// markers it made and how many collections it induced.
using System;
using System.Runtime.CompilerServices;

namespace Pipe
{
    public class Marker
    {
        public int N;
        public Marker(int n) { N = n; }
    }

    public static class Program
    {
        static Marker[] kept;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Make(int n)
        {
            kept = new Marker[n];
            for (int i = 0; i < n; i++)
                kept[i] = new Marker(i);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Collect()
        {
            GC.Collect();
        }

        public static int Main(string[] args)
        {
            int markers = args.Length > 0 ? int.Parse(args[0]) : 200;
            int collections = args.Length > 1 ? int.Parse(args[1]) : 5;
            Make(markers);
            for (int i = 0; i < collections; i++)
                Collect();
            long sum = 0;
            foreach (var m in kept)
                sum += m.N;
            Console.WriteLine("markers " + markers + " sum " + sum);
            Console.WriteLine("collections " + collections);
            return 0;
        }
    }
}
