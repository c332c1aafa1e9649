// Scenario "readers": boxed value types whose GetClassLayout offsets count
// from the unboxed value, read by a profiler that prints every field of
// every new object:
// - a boxed System.Collections.DictionaryEntry (references at offset 0),
// - a boxed System.Threading.CancellationToken (its source at offset 0),
// - a boxed Boxes.Pair { long; string } (the runtime may put the reference
//   first: auto layout for structs that hold references),
// - a boxed Boxes.After { long at 0; string at 8 } (explicit layout: a
//   reference after a long),
// - a boxed int and a boxed enum, and a Boxes.Holder class for contrast,
// - arrays of structs (Boxes.Pair[], and Boxes.Odd[] whose element is
//   padded), read element by element.
// They are kept in Boxes.Marker.Kept; allocating a Boxes.Marker is the
// profiler's cue to read them. Program.Twice is the target of a ReJIT whose
// new body lies about its size (the lying-header probe), which must be
// refused so the method keeps its IL. The app prints its own account: one line
// "field <class> <field> <value>" per field (strings quoted, other objects
// by class name), then churns boxes (in optimized code, stored where they
// escape, so that each is a heap allocation the runtime reports) so that
// every allocation is inspected.
using System;
using System.Collections;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Boxes
{
    public struct Pair
    {
        public long Number;
        public string Text;
        public Pair(long n, string t) { Number = n; Text = t; }
    }

    [StructLayout(LayoutKind.Explicit)]
    public struct After
    {
        [FieldOffset(0)] public long Number;
        [FieldOffset(8)] public string Text;
    }

    public struct Odd
    {
        public long L;
        public byte B;
    }

    public enum Color { Red = 1, Green = 2, Blue = 3 }

    public class Holder
    {
        public string Text;
        public long Number;
        public object Other;
    }

    public class Marker
    {
        public static object[] Kept;
    }

    public static class Program
    {
        // Where the churn loop's boxes escape to (see Churn).
        static readonly object[] Sink = new object[5];

        // Churn: every box below and a Holder are allocations the profiler
        // inspects. On .NET 10 and 11 a box made through the runtime's C#
        // box helper raises no ObjectAllocated (see the book's GC page):
        // tier-0 code boxes that way, and on Windows x64 optimized code too
        // for these 16-byte structs; so the method is compiled optimized
        // from its first call (Linux then reports every box), and the
        // Holder is an allocation every runtime reports. Each object is
        // stored in Sink so that it escapes: optimized code may allocate an
        // object that does not escape on the stack (JIT escape analysis).
        [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
        static long Churn()
        {
            long sum = 0;
            for (int i = 0; i < 2000; i++)
            {
                object a = new DictionaryEntry("k" + (i % 7), i);
                object b = new Pair(i, "p");
                object c = CancellationToken.None;
                object d = new After();
                Sink[0] = a;
                Sink[1] = b;
                Sink[2] = c;
                Sink[3] = d;
                Sink[4] = new Holder();
                sum += ((Pair)b).Number + (int)((DictionaryEntry)a).Value + Twice(i);
            }
            return sum;
        }

        static void Field(string cls, string field, string value)
        {
            Console.WriteLine("field " + cls + " " + field + " " + value);
        }

        static Odd MakeOdd(long l, byte b)
        {
            var o = new Odd();
            o.L = l;
            o.B = b;
            return o;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static string Quote(string s) { return "\"" + s + "\""; }

        // The ReJIT target of the lying-header probe (called before Quote
        // is first compiled, which is the probe's cue, and in the churn loop).
        [MethodImpl(MethodImplOptions.NoInlining)]
        static long Twice(long x) { return 2 * x; }

        public static int Main()
        {
            long sum = Twice(0);
            var source = new CancellationTokenSource();
            var after = new After();
            after.Number = 9007199254740993L;
            after.Text = "after-a-long";
            var holder = new Holder();
            holder.Text = "holder-text";
            holder.Number = -5;
            holder.Other = new Pair(1, "inner");
            object[] kept = new object[]
            {
                new DictionaryEntry("key-one", "value-one"),
                source.Token,
                new Pair(1234567890123L, "pair-text"),
                after,
                42,
                Color.Blue,
                holder,
                new Pair[] { new Pair(5, "five"), new Pair(6, "six") },
                new Odd[] { MakeOdd(-1, 1), MakeOdd(-2, 2), MakeOdd(-3, 3) },
            };
            Marker.Kept = kept;
            GC.KeepAlive(new Marker());

            Field("System.Collections.DictionaryEntry", "_key", Quote("key-one"));
            Field("System.Collections.DictionaryEntry", "_value", Quote("value-one"));
            Field("System.Threading.CancellationToken", "_source", source.GetType().FullName);
            Field("Boxes.Pair", "Number", "1234567890123");
            Field("Boxes.Pair", "Text", Quote("pair-text"));
            Field("Boxes.After", "Number", "9007199254740993");
            Field("Boxes.After", "Text", Quote("after-a-long"));
            Field("System.Int32", "m_value", "42");
            Field("Boxes.Color", "value__", "3");
            Field("Boxes.Holder", "Text", Quote("holder-text"));
            Field("Boxes.Holder", "Number", "-5");
            Field("Boxes.Holder", "Other", "Boxes.Pair");
            Field("Boxes.Pair[0]", "Number", "5");
            Field("Boxes.Pair[0]", "Text", Quote("five"));
            Field("Boxes.Pair[1]", "Number", "6");
            Field("Boxes.Pair[1]", "Text", Quote("six"));
            for (int i = 0; i < 3; i++)
            {
                Field("Boxes.Odd[" + i + "]", "L", (-(i + 1)).ToString());
                Field("Boxes.Odd[" + i + "]", "B", (i + 1).ToString());
            }

            sum += Churn();
            Console.WriteLine("sum " + sum);
            return 0;
        }
    }
}
