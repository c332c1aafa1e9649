// Scenario "inliners": Inliners.Target.Value is small and inlined into
// Inliners.Callers.Twice (the scenario runs without tiered compilation, so
// the first compilation is optimized and inlines). At Rejit.Begin a
// profiler rewrites Value to return 2 instead of 1. The app prints what the
// caller computes before and after, and what a call through a delegate
// (never inlined) returns after.
using System;
using System.Runtime.CompilerServices;

namespace Inliners
{
    public static class Target
    {
        public static int Value()
        {
            return 1;
        }
    }

    public static class Callers
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Twice()
        {
            return Target.Value() * 100 + Target.Value();
        }
    }

    public static class Rejit
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Begin() { }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            int before = Callers.Twice();
            Rejit.Begin();
            int after = Callers.Twice();
            Func<int> direct = Target.Value;
            Console.WriteLine("caller before " + before);
            Console.WriteLine("caller after " + after);
            Console.WriteLine("direct after " + direct());
            return 0;
        }
    }
}
