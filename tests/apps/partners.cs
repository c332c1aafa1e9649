// Scenario "provenance": two methods of different shapes, called in a loop
// long enough for a profiler to ReJIT one of them and for a sampling thread
// to take a few hundred ticks:
// - Program.Greet(string) -> string, a string concatenation (the method
//   whose wrapper the wrong-control probe builds),
// - Program.Add(int, long) -> long, an addition (the method it asks to
//   ReJIT, and into whose ReJIT control it tries to install Greet's body),
// - Program.Trigger, compiled once both were called: the probe's cue.
// The app prints a checksum of every result, so a body run on the wrong
// method's arguments changes the output (or aborts the app).
using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Partners
{
    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static string Greet(string name) { return "hello " + name; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static long Add(int a, long b) { return a + b; }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Trigger() { }

        public static int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0]) : 400;
            long sum = 0;
            long chars = 0;
            sum += Add(1, 1L << 40);
            chars += Greet("first").Length;
            Trigger();
            for (int i = 0; i < rounds; i++)
            {
                for (int j = 0; j < 50; j++)
                {
                    sum += Add(i, (1L << 40) + j);
                    chars += Greet(j.ToString()).Length;
                }
                Thread.Sleep(2);
            }
            Console.WriteLine("sum " + sum);
            Console.WriteLine("chars " + chars);
            return 0;
        }
    }
}
