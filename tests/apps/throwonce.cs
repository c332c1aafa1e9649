// Scenario "throwonce": throws and catches exactly one managed exception, so
// exception tools can be tested on every leg, the win-x64 .NET 8 leg included
// (its Wine defect hangs only on the second exception of a process).
using System;
using System.Runtime.CompilerServices;

namespace ThrowOnce
{
    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Fail()
        {
            throw new TimeoutException("once");
        }

        public static int Main(string[] args)
        {
            try
            {
                Fail();
            }
            catch (TimeoutException e)
            {
                Console.WriteLine("caught " + e.GetType().FullName + ": " + e.Message);
            }
            Console.WriteLine("thrown = 1");
            return 0;
        }
    }
}
