// Scenario "wrap" with C# handlers: the handlers of clrprof's managed
// wrapping shape (OnEntry/OnExit of WrapHandlers.Handlers), loaded into the
// application as a startup hook (DOTNET_STARTUP_HOOKS=<this assembly>).
// They count entries, returns and exceptions per method and print them at
// process exit as "managed-wrapped <method> <enter> <return> <exception>";
// for Wrap.Target.Args::Add they print the arguments and the return value
// they see ("managed-args", "managed-return"); with
// WRAPHANDLERS_SECRET=<n> they make Wrap.Target.Shapes::Secret return n.
// Its Main does nothing: the harness compiles apps as executables.
using System;
using System.Collections.Generic;

internal class StartupHook
{
    public static void Initialize()
    {
        AppDomain.CurrentDomain.ProcessExit += (s, e) => WrapHandlers.Handlers.Print();
    }
}

namespace WrapHandlers
{
    public static class Handlers
    {
        // method -> [enter, return, exception, state mismatches]
        static readonly Dictionary<string, long[]> counts = new Dictionary<string, long[]>();
        static readonly string secret = Environment.GetEnvironmentVariable("WRAPHANDLERS_SECRET");

        static long[] Of(string m)
        {
            long[] c;
            if (!counts.TryGetValue(m, out c))
            {
                c = new long[4];
                counts[m] = c;
            }
            return c;
        }

        public static object OnEntry(string method, object[] args)
        {
            lock (counts) Of(method)[0]++;
            if (method == "Wrap.Target.Args::Add")
                Console.WriteLine("managed-args " + method + " " + args[0] + " " + args[1]);
            // The state: the method's name, checked at exit.
            return method;
        }

        public static object OnExit(string method, object state, object returnValue, object exception)
        {
            lock (counts)
            {
                var c = Of(method);
                if (exception != null) c[2]++; else c[1]++;
                if (!(state is string) || (string)state != method) c[3]++;
            }
            if (exception == null && method == "Wrap.Target.Args::Add")
                Console.WriteLine("managed-return " + method + " " + returnValue);
            if (exception == null && secret != null && method == "Wrap.Target.Shapes::Secret")
                return int.Parse(secret);
            return returnValue;
        }

        public static void Print()
        {
            lock (counts)
            {
                var names = new List<string>(counts.Keys);
                names.Sort(StringComparer.Ordinal);
                foreach (var m in names)
                {
                    var c = counts[m];
                    Console.WriteLine("managed-wrapped " + m + " " + c[0] + " " + c[1] + " " + c[2] + (c[3] > 0 ? " state-mismatch " + c[3] : ""));
                }
            }
        }
    }

    public static class Program
    {
        public static int Main() { return 0; }
    }
}
