// Scenario "exceptions": throws and catches a known number of managed
// exceptions of known types, printing each as "caught <Type>" and the total,
// so a test can compare with what a profiler saw. More than one exception per
// process: cannot run on the win-x64 .NET 8 leg (Wine defect, RUNTIMES.md).
using System;
using System.Runtime.CompilerServices;

namespace Exceptions
{
    public class AppException : Exception
    {
        public AppException(string message) : base(message) { }
    }

    public static class Program
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Throw(int i)
        {
            switch (i % 3)
            {
                case 0: throw new InvalidOperationException("op " + i);
                case 1: throw new ArgumentException("arg " + i);
                default: throw new AppException("app " + i);
            }
        }

        public static int Main(string[] args)
        {
            int caught = 0;
            for (int i = 0; i < 6; i++)
            {
                try
                {
                    Throw(i);
                }
                catch (Exception e)
                {
                    caught++;
                    Console.WriteLine("caught " + e.GetType().FullName + ": " + e.Message);
                }
            }
            Console.WriteLine("exceptions caught = " + caught);
            return 0;
        }
    }
}
