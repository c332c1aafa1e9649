// Scenario "exits": does a known amount of work, prints its own account of it,
// then leaves the process the way its first argument says:
//   return            Main returns 0 (the host shuts the runtime down)
//   exit N            Environment.Exit(N)
//   native-exit N     the C library's exit(N), called through P/Invoke
//   unhandled         an exception nobody catches
//   unhandled-rounds  Rounds (below) on the main thread: exceptions caught
//                     from one call site of Main, then one nobody catches
//   unhandled-filter  the same, the last one passing a filter that throws
//                     and catches an exception of its own, then declines
//   unhandled-thread  Rounds on a new Thread
//   unhandled-pool    Rounds on a thread-pool thread
//   unhandled-recursive  Main calls itself; the inner Main runs Rounds
//   unhandled-finalizer  finalizers on the finalizer thread: one of class
//                     Catching throws and catches, then one of class
//                     Escaping throws an exception nobody catches
//   wait              prints "ready" and sleeps until a signal ends it
// The second argument is the number of exceptions to throw and catch (default
// 5; 0 on the win-x64 .NET 8 leg, whose Wine defect hangs a second exception).
// What it prints before it leaves is the ground truth tracers are compared
// with: Marker allocations, calls of Exits.Program::Marked, exceptions.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Exits
{
    public class Marker
    {
        public int Value;
    }

    public class ExitException : Exception
    {
        public ExitException(string message) : base(message) { }
    }

    // Finalizers: the runtime's finalizer thread calls them (from native
    // code on .NET Core 3.1: each finalizer is then that thread's outermost
    // managed frame, a different method for each class).
    public class Catching
    {
        ~Catching()
        {
            try
            {
                throw new ExitException("in a finalizer");
            }
            catch (ExitException)
            {
                Console.WriteLine("finalizer: thrown = 1, caught = 1");
                Console.Out.Flush();
            }
        }
    }

    public class Escaping
    {
        ~Escaping()
        {
            Program.Unhandled();
        }
    }

    public static class Program
    {
        const int Allocations = 777;
        const int Calls = 321;

        [DllImport("libc", EntryPoint = "exit")]
        static extern void LibcExit(int status);

        [DllImport("msvcrt", EntryPoint = "exit")]
        static extern void MsvcrtExit(int status);

        static Marker[] kept = new Marker[Allocations];

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Marked(int i)
        {
            return i * 2 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Throw(int i)
        {
            throw new ExitException("planned " + i);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Work(int exceptions)
        {
            for (int i = 0; i < Allocations; i++)
                kept[i] = new Marker { Value = i };
            long sum = 0;
            for (int i = 0; i < Calls; i++)
                sum += Marked(i);
            int caught = 0;
            for (int i = 0; i < exceptions; i++)
            {
                try
                {
                    Throw(i);
                }
                catch (ExitException)
                {
                    caught++;
                }
            }
            Console.WriteLine("allocated Exits.Marker x " + Allocations);
            Console.WriteLine("called Exits.Program::Marked x " + Calls + " (sum " + sum + ")");
            Console.WriteLine("thrown = " + exceptions + ", caught = " + caught);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Garbage<T>() where T : new()
        {
            new T();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void Unhandled()
        {
            throw new ExitException("unhandled on purpose");
        }

        const int RoundsCaught = 3;
        static int roundsThrown, roundsCaught;

        // Throws and catches RoundsCaught exceptions from one call site, so
        // that the thread's outermost frame stays in the same call; then an
        // exception nobody catches (through a filter that declines when
        // `filter` is set).
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Rounds(bool filter)
        {
            for (int i = 0; i <= RoundsCaught; i++)
                Round(i, filter);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Round(int i, bool filter)
        {
            if (i < RoundsCaught)
            {
                roundsThrown++;
                try
                {
                    Throw(i);
                }
                catch (ExitException)
                {
                    roundsCaught++;
                }
                return;
            }
            Console.WriteLine("rounds: thrown = " + roundsThrown + ", caught = " + roundsCaught);
            Console.Out.Flush();
            if (!filter)
            {
                Unhandled();
                return;
            }
            try
            {
                Unhandled();
            }
            catch (ExitException e) when (Declines(e))
            {
                Console.WriteLine("caught by the filter");
            }
        }

        // A filter that throws and catches an exception of its own (an
        // exception nested in the first pass of another), then declines.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static bool Declines(Exception e)
        {
            try
            {
                Throw(-1);
            }
            catch (ExitException)
            {
                Console.WriteLine("filter: thrown = 1, caught = 1");
                Console.Out.Flush();
            }
            return false;
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "return";
            if (mode == "recursive-inner")
            {
                Rounds(false);
                return 4;
            }
            int exceptions = args.Length > 2 ? int.Parse(args[2]) : 5;
            int status = 0;
            if (args.Length > 1 && args[1] != "-")
                status = int.Parse(args[1]);
            Work(exceptions);
            Console.WriteLine("leaving by " + mode);
            Console.Out.Flush();
            switch (mode)
            {
                case "return":
                    return status;
                case "exit":
                    Environment.Exit(status);
                    break;
                case "native-exit":
                    if (Environment.OSVersion.Platform == PlatformID.Win32NT)
                        MsvcrtExit(status);
                    else
                        LibcExit(status);
                    break;
                case "unhandled":
                    Unhandled();
                    break;
                case "unhandled-rounds":
                    Rounds(false);
                    break;
                case "unhandled-filter":
                    Rounds(true);
                    break;
                case "unhandled-thread":
                    var thread = new Thread(() => Rounds(false));
                    thread.Start();
                    thread.Join();
                    break;
                case "unhandled-pool":
                    ThreadPool.QueueUserWorkItem(_ => Rounds(false));
                    Thread.Sleep(Timeout.Infinite);
                    break;
                case "unhandled-finalizer":
                    Garbage<Catching>();
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    Garbage<Escaping>();
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    Thread.Sleep(Timeout.Infinite);
                    break;
                case "unhandled-recursive":
                    return Main(new[] { "recursive-inner" });
                case "wait":
                    Console.WriteLine("ready");
                    Console.Out.Flush();
                    while (true)
                        Thread.Sleep(100);
                default:
                    Console.WriteLine("unknown mode " + mode);
                    return 2;
            }
            Console.WriteLine("still here");
            return 3;
        }
    }
}
