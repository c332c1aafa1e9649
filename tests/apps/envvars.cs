// Scenario "environment": prints the environment variables a profiler reads
// and sets through ICorProfilerInfo11, as the managed program sees them
// (values as UTF-16 code units in hex, so any text prints the same on every
// console). The test sets CLRPROF_ENV_FROM_TEST, CLRPROF_ENV_LONG and
// CLRPROF_ENV_REMOVED; the profiler sets CLRPROF_ENV_SET_BY_PROFILER and
// removes CLRPROF_ENV_REMOVED in Initialize.
using System;
using System.Text;

namespace EnvApp
{
    public static class Program
    {
        private static string Show(string name)
        {
            string v = Environment.GetEnvironmentVariable(name);
            if (v == null)
            {
                return name + " <unset>";
            }
            var sb = new StringBuilder(name + " len " + v.Length + " ");
            for (int i = 0; i < v.Length && i < 16; i++)
            {
                sb.Append(((int)v[i]).ToString("x4"));
            }
            return sb.ToString();
        }

        public static int Main(string[] args)
        {
            Console.WriteLine(Show("CLRPROF_ENV_FROM_TEST"));
            Console.WriteLine(Show("CLRPROF_ENV_LONG"));
            Console.WriteLine(Show("CLRPROF_ENV_REMOVED"));
            Console.WriteLine(Show("CLRPROF_ENV_SET_BY_PROFILER"));
            return 0;
        }
    }
}
