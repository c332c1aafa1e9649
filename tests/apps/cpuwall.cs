// Scenario "cpuwall": one thread spins, one sleeps, for the same time.
// A CPU profile must give the spinner's method (Cpuwall.Program::Burn)
// nearly all the CPU time and the sleeper's (Cpuwall.Program::Doze) next to
// none; a wall-time profile sees both threads the whole time.
// The threads are named "spinner" and "sleeper".
// Arguments: [seconds (default 2)].
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Cpuwall
{
    public static class Program
    {
        static long sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Burn(double seconds)
        {
            var clock = Stopwatch.StartNew();
            long stop = (long)(seconds * Stopwatch.Frequency);
            long x = 1;
            while (clock.ElapsedTicks < stop)
            {
                for (int i = 0; i < 1000; i++) x = x * 31 + i;
            }
            Interlocked.Add(ref sink, x);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Doze(double seconds)
        {
            var clock = Stopwatch.StartNew();
            long stop = (long)(seconds * Stopwatch.Frequency);
            while (clock.ElapsedTicks < stop)
            {
                Thread.Sleep(50);
            }
        }

        public static int Main(string[] args)
        {
            double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 2.0;
            var spinner = new Thread(() => Burn(seconds));
            spinner.Name = "spinner";
            var sleeper = new Thread(() => Doze(seconds));
            sleeper.Name = "sleeper";
            spinner.Start();
            sleeper.Start();
            spinner.Join();
            sleeper.Join();
            Console.WriteLine("done " + Interlocked.Read(ref sink));
            return 0;
        }
    }
}
