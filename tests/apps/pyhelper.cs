// Scenario "pyhelper": a small assembly the Python host (tests/python/host.py)
// loads through pythonnet, so tracers have methods and a type of the host's
// own to count: PyHelper.Helper::Marked calls and PyHelper.Marker objects.
using System.Runtime.CompilerServices;

namespace PyHelper
{
    public class Marker
    {
        public int Value;
    }

    public static class Helper
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Marked(int i)
        {
            return i * 2 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int MakeMarkers(int n)
        {
            int sum = 0;
            for (int i = 0; i < n; i++)
            {
                Marker m = new Marker();
                m.Value = i;
                sum += m.Value;
            }
            return sum;
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            return 0;
        }
    }
}
