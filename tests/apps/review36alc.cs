// Review 36 (provenance of managed handlers): an app that loads the C#
// handler assembly of clrprof's managed wrapping shape (wraphandlers) into
// an AssemblyLoadContext of its own (a plugin context, as plugin hosts
// do), never into the default context, and then calls its own
// ReviewAlc.Target::Work. The default context, where the app's code binds
// its references, cannot see the plugin context's assemblies.
// REVIEW_HANDLERS=<path of wraphandlers.dll> (unset: no plugin is loaded);
// REVIEW_COLLECTIBLE=1 makes the plugin context collectible and unloads it
// (and collects) before the calls.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.Loader;

namespace ReviewAlc
{
    public static class Target
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Work(int x) { return x * 2 + 1; }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void LoadPlugin(string path, bool collectible)
        {
            var alc = new AssemblyLoadContext("plugins", collectible);
            var asm = alc.LoadFromAssemblyPath(path);
            Console.WriteLine("plugin " + asm.GetName().Name + " in " + AssemblyLoadContext.GetLoadContext(asm).Name);
            if (collectible) alc.Unload();
        }

        public static int Main(string[] args)
        {
            string path = Environment.GetEnvironmentVariable("REVIEW_HANDLERS");
            bool collectible = Environment.GetEnvironmentVariable("REVIEW_COLLECTIBLE") == "1";
            if (!string.IsNullOrEmpty(path)) LoadPlugin(path, collectible);
            if (collectible)
            {
                for (int i = 0; i < 3; i++)
                {
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                }
            }
            long sum = 0;
            for (int i = 0; i < 1000; i++) sum += Target.Work(i);
            Console.WriteLine("sum " + sum);
            return 0;
        }
    }
}
