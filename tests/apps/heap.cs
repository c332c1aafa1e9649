// Scenario "heap": objects a profiler keeps through GC handles and
// inspects. Every object of interest is allocated in a helper, so no frame
// of Main keeps a reference the JIT might report to the GC:
// - a Heap.Kept (Number 42) that nothing references: only a profiler's
//   strong handle keeps it through the five induced collections;
// - a Heap.Pinned (Number 7) that nothing references (a pinned handle);
// - a Heap.Dropped held in a static until round 3, then released;
// - a Heap.Shown held in a static, read by the profiler: two strings (one a
//   literal), a long[] and a null reference;
// - after each collection a Heap.Checkpoint, the profiler's cue to look;
// - two byte arrays around the large-object threshold given as argument;
// - three Heap.Listed held in a static array for the whole run (what a
//   walk of the GC heap must find, with the one Shown and, until round 3,
//   the one Dropped; the Kept and the Pinned are unreachable from the app).
// Prints its own account: the state of the released object per round and
// the values of the objects.
using System;
using System.Runtime.CompilerServices;

namespace Heap
{
    public class Kept
    {
        public int Number;
        public string Text;
        public long[] Values;
        public Kept(int n)
        {
            Number = n;
            Text = "kept-" + n;
            Values = new long[] { n, n * 2L, n * 3L };
        }
    }

    public class Pinned
    {
        public int Number;
        public Pinned(int n) { Number = n; }
    }

    public class Dropped
    {
        public int Number;
        public Dropped(int n) { Number = n; }
    }

    public class Shown
    {
        public int Number;
        public string Text;
        public string Label;
        public long[] Values;
        public object Nothing;
        public Shown(int n)
        {
            Number = n;
            Text = "shown-" + n;
            Label = "a literal label";
            Values = new long[] { n, n + 1L };
            Nothing = null;
        }
    }

    public class Listed
    {
        public int Number;
        public Listed(int n) { Number = n; }
    }

    public class Checkpoint
    {
        public int Round;
        public Checkpoint(int round) { Round = round; }
    }

    public static class Program
    {
        static Dropped dropped;
        static Shown shown;
        static Listed[] listed;
        static object sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Keep(object o)
        {
            sink = o;
            sink = null;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Make()
        {
            Keep(new Kept(42));
            Keep(new Pinned(7));
            dropped = new Dropped(9);
            shown = new Shown(5);
            listed = new Listed[] { new Listed(1), new Listed(2), new Listed(3) };
        }

        // The checkpoint is allocated here, not in Main: no frame that lives
        // on keeps a reference to it (an unoptimised Main reports its
        // temporaries live until they are overwritten).
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Cue(int round)
        {
            Keep(new Checkpoint(round));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Release()
        {
            dropped = null;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static string DroppedState()
        {
            return dropped == null ? "released" : "held";
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Collect()
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Large(int threshold)
        {
            Keep(new byte[threshold]);
            Keep(new byte[threshold - 1000]);
        }

        public static int Main(string[] args)
        {
            int threshold = args.Length > 0 ? int.Parse(args[0]) : 85000;
            Make();
            for (int round = 1; round <= 5; round++)
            {
                if (round == 3)
                    Release();
                Collect();
                Cue(round);
                Console.WriteLine("round " + round + " dropped " + DroppedState());
            }
            Large(threshold);
            Console.WriteLine("kept 42 kept-42 42,84,126");
            Console.WriteLine("shown 5 shown-5 a literal label 5,6");
            Console.WriteLine("large " + threshold + " and " + (threshold - 1000));
            Console.WriteLine("listed " + listed.Length);
            GC.KeepAlive(shown);
            return 0;
        }
    }
}
