// Scenario "notification profilers": an app with exact, countable events
// for several profilers loaded at once: ten methods NotifyApp.Work::M0..M9
// each called (so compiled) once, 1,000 NotifyApp.Item objects, three
// induced garbage collections, one exception thrown and caught (one only:
// see the Wine defect in RUNTIMES.md). It prints what it did.
using System;
using System.Runtime.CompilerServices;

namespace NotifyApp
{
    public class Item
    {
        public int Value;

        public Item(int value)
        {
            Value = value;
        }
    }

    public static class Work
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M0(int x)
        {
            return x * 2 + 0;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M1(int x)
        {
            return x * 3 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M2(int x)
        {
            return x * 4 + 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M3(int x)
        {
            return x * 5 + 3;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M4(int x)
        {
            return x * 6 + 4;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M5(int x)
        {
            return x * 7 + 5;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M6(int x)
        {
            return x * 8 + 6;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M7(int x)
        {
            return x * 9 + 7;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M8(int x)
        {
            return x * 10 + 8;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int M9(int x)
        {
            return x * 11 + 9;
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            int sum = Work.M0(0) + Work.M1(1) + Work.M2(2) + Work.M3(3) + Work.M4(4) + Work.M5(5) + Work.M6(6) + Work.M7(7) + Work.M8(8) + Work.M9(9);
            Item[] items = new Item[1000];
            for (int i = 0; i < items.Length; i++)
            {
                items[i] = new Item(i);
            }
            for (int i = 0; i < 3; i++)
            {
                GC.Collect();
            }
            int caught = 0;
            try
            {
                throw new InvalidOperationException("notify app: deliberate");
            }
            catch (InvalidOperationException)
            {
                caught++;
            }
            Console.WriteLine("methods 10 sum " + sum);
            Console.WriteLine("items " + items.Length + " last " + items[items.Length - 1].Value);
            Console.WriteLine("induced collections 3");
            Console.WriteLine("exceptions " + caught);
            return 0;
        }
    }
}
