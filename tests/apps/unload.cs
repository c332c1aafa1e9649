// Scenario "unload": N load/run/unload cycles of a collectible
// AssemblyLoadContext. Each cycle creates a collectible context (through
// reflection: Mono's compiler has no System.Runtime.Loader), loads a second
// copy of this very assembly into it, calls Unload.Plugin.Work k times in
// that copy (k = 3 + cycle % 5), unloads the context and collects until it
// is gone. Prints "cycle <i> calls <k>" per cycle and, at the end,
// "cycles <N> collected <M>" (contexts whose weak reference died).
using System;
using System.Reflection;
using System.Runtime.CompilerServices;

namespace Unload
{
    public static class Plugin
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Work(int x)
        {
            return x * 2 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Run(int k)
        {
            int sum = 0;
            for (int j = 0; j < k; j++)
                sum += Work(j);
            return sum;
        }
    }

    static class Program
    {
        static ConstructorInfo newContext;
        static MethodInfo loadFromPath;
        static MethodInfo unload;

        static int Main(string[] args)
        {
            int cycles = args.Length > 0 ? int.Parse(args[0]) : 1000;
            Type alc = Type.GetType(
                "System.Runtime.Loader.AssemblyLoadContext, System.Runtime.Loader", true);
            newContext = alc.GetConstructor(new Type[] { typeof(string), typeof(bool) });
            loadFromPath = alc.GetMethod("LoadFromAssemblyPath");
            unload = alc.GetMethod("Unload");
            string path = typeof(Program).Assembly.Location;
            int collected = 0;
            for (int i = 0; i < cycles; i++)
            {
                WeakReference context = Cycle(path, i);
                for (int g = 0; g < 20 && context.IsAlive; g++)
                {
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                }
                if (!context.IsAlive)
                    collected++;
            }
            Console.WriteLine("cycles " + cycles + " collected " + collected);
            return 0;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference Cycle(string path, int i)
        {
            object context = newContext.Invoke(new object[] { "cycle" + i, true });
            Assembly copy = (Assembly)loadFromPath.Invoke(context, new object[] { path });
            MethodInfo run = copy.GetType("Unload.Plugin").GetMethod("Run");
            int k = 3 + i % 5;
            int sum = (int)run.Invoke(null, new object[] { k });
            if (sum != k * k)
                throw new Exception("wrong sum " + sum);
            Console.WriteLine("cycle " + i + " calls " + k);
            unload.Invoke(context, null);
            return new WeakReference(context);
        }
    }
}
