// Scenario "code versions": TiersApp.Work::Hot (no loop, never inlined) is
// called 40,000 times in 20 rounds with pauses, so tiered compilation
// replaces its tier-0 body with an optimized tier-1 body; both stay in
// memory. Work::Checkpoint is compiled once, after that: the profiler looks
// at Hot's code versions when Checkpoint is jitted. The app prints what it
// did.
using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace TiersApp
{
    public static class Work
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Hot(int x)
        {
            int y = x * 7 + 3;
            if ((y & 1) == 0)
            {
                y = y / 2;
            }
            else
            {
                y = 3 * y + 1;
            }
            return y ^ (x >> 2);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Checkpoint(long total)
        {
            Console.WriteLine("checkpoint " + total);
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            long total = 0;
            for (int round = 0; round < 20; round++)
            {
                for (int i = 0; i < 2000; i++)
                {
                    total += Work.Hot(i);
                }
                Thread.Sleep(50);
            }
            Work.Checkpoint(total);
            Console.WriteLine("calls TiersApp.Work::Hot 40000");
            return 0;
        }
    }
}
