// Scenario "hello": the smallest app. Prints a fixed line and a checksum of a
// computation, so a test can compare the output with its own ground truth and
// check it is identical with and without a profiler.
using System;

namespace Hello
{
    public static class Program
    {
        public static int Main(string[] args)
        {
            Console.WriteLine("hello from the clrprof test app");
            // FNV-1a (64-bit) over the decimal text of the squares 1..1000, joined by ','.
            ulong hash = 14695981039346656037UL;
            for (int i = 1; i <= 1000; i++)
            {
                string part = (i == 1 ? "" : ",") + ((long)i * i).ToString();
                foreach (char c in part)
                {
                    hash ^= (byte)c;
                    hash *= 1099511628211UL;
                }
            }
            Console.WriteLine("checksum " + hash.ToString("x16"));
            return 0;
        }
    }
}
