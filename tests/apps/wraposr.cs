// Methods with hot loops, for wrapping under on-stack replacement (OSR):
// each call of a loop method runs its loop long enough at tier 0 for the
// runtime to move the running frame to optimized code in the middle of the
// loop. The app keeps its own account of every call and prints
// "account <method> <enter> <return> <exception>" for each method (counted
// at the call sites), and the
// loops' results (deterministic), so that the output is the same with and
// without a profiler.
using System;

namespace Osr.Target
{
    static class Loops
    {
        // A plain counted loop.
        public static long Sum(int n)
        {
            long acc = 17;
            for (int i = 0; i < n; i++)
            {
                acc = acc * 31 + (i ^ (acc >> 7));
            }
            return acc;
        }

        // A loop inside the method's own try/finally, with a second return.
        public static long Guarded(int n, int[] finallies)
        {
            long acc = 3;
            try
            {
                int i = 0;
                while (i < n)
                {
                    acc ^= (acc << 5) + i;
                    i++;
                }
                if (acc == 0) return -1;
                return acc;
            }
            finally
            {
                finallies[0]++;
            }
        }

        // A loop, then an exception that leaves the method.
        public static long ThenThrow(int n)
        {
            long acc = 5;
            for (int i = 0; i < n; i++)
            {
                acc += (acc >> 3) ^ i;
            }
            throw new InvalidOperationException("after the loop: " + acc);
        }
    }
}

static class App
{
    // enter, return, exception per method, counted at the call sites.
    static readonly long[] sumCalls = new long[3], guardedCalls = new long[3], throwCalls = new long[3];

    static void Main(string[] args)
    {
        int n = args.Length > 0 ? int.Parse(args[0]) : 30000000;
        int calls = args.Length > 1 ? int.Parse(args[1]) : 2;
        // WRAP_NO_THROW=1 (the Wine leg that hangs on a process's second
        // managed exception): ThenThrow is called once only.
        bool oneThrow = Environment.GetEnvironmentVariable("WRAP_NO_THROW") == "1";
        int[] finallies = new int[1];
        long sum = 0, guarded = 0;
        string last = "";
        for (int c = 0; c < calls; c++)
        {
            sumCalls[0]++;
            sum += Osr.Target.Loops.Sum(n + c);
            sumCalls[1]++;
            guardedCalls[0]++;
            guarded += Osr.Target.Loops.Guarded(n + c, finallies);
            guardedCalls[1]++;
            if (oneThrow && c > 0) continue;
            try
            {
                throwCalls[0]++;
                Osr.Target.Loops.ThenThrow(n + c);
                throwCalls[1]++;
            }
            catch (InvalidOperationException e)
            {
                throwCalls[2]++;
                last = e.Message;
            }
        }
        Console.WriteLine("sum " + sum);
        Console.WriteLine("guarded " + guarded + " finallies " + finallies[0]);
        Console.WriteLine("last " + last);
        Account("Osr.Target.Loops::Guarded", guardedCalls);
        Account("Osr.Target.Loops::Sum", sumCalls);
        Account("Osr.Target.Loops::ThenThrow", throwCalls);
    }

    static void Account(string method, long[] c)
    {
        Console.WriteLine("account " + method + " " + c[0] + " " + c[1] + " " + c[2]);
    }
}
