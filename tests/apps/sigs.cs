// Scenario "sigs": method signatures. The app prints, through reflection,
// the C#-style signature of each of its Sigs.* methods (keywords for
// primitives, Name<Args> for generic instantiations, T[] / ref T, !N / !!N
// for generic parameters), and calls each once so the profiler sees it
// JIT-compiled and can print the signature it decodes from metadata.
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Text;

namespace Sigs
{
    public struct Point
    {
        public int X;
        public int Y;
    }

    public class Outer
    {
        public class Inner
        {
            public static long Nested(ref long value, Point p) { value += p.X + p.Y; return value; }
        }
    }

    public class Holder<T>
    {
        public T Item;
        public T Swap(T next, List<T> seen) { T old = Item; Item = next; seen.Add(old); return old; }
    }

    public static class Program
    {
        public static int Add(int a, int b) { return a + b; }
        public static string Join(string[] parts, char sep, double ignored) { return string.Join(sep.ToString(), parts); }
        public static void Fill(List<string> list, Dictionary<string, int> counts) { list.Add("x"); counts["x"] = list.Count; }
        public static T First<T>(T[] items, bool fallback) { return items.Length > 0 ? items[0] : default(T); }
        public static object Box(ushort u, sbyte s, float f, ulong l, IntPtr p) { return u + s; }

        static string Name(Type t)
        {
            if (t.IsByRef) return "ref " + Name(t.GetElementType());
            if (t.IsArray) return Name(t.GetElementType()) + "[" + new string(',', t.GetArrayRank() - 1) + "]";
            if (t.IsGenericParameter) return (t.DeclaringMethod != null ? "!!" : "!") + t.GenericParameterPosition;
            if (t == typeof(void)) return "void";
            if (t == typeof(bool)) return "bool";
            if (t == typeof(char)) return "char";
            if (t == typeof(sbyte)) return "sbyte";
            if (t == typeof(byte)) return "byte";
            if (t == typeof(short)) return "short";
            if (t == typeof(ushort)) return "ushort";
            if (t == typeof(int)) return "int";
            if (t == typeof(uint)) return "uint";
            if (t == typeof(long)) return "long";
            if (t == typeof(ulong)) return "ulong";
            if (t == typeof(float)) return "float";
            if (t == typeof(double)) return "double";
            if (t == typeof(string)) return "string";
            if (t == typeof(object)) return "object";
            if (t == typeof(IntPtr)) return "nint";
            if (t == typeof(UIntPtr)) return "nuint";
            if (t.IsGenericType && !t.IsGenericTypeDefinition)
            {
                string def = t.GetGenericTypeDefinition().FullName;
                int tick = def.IndexOf('`');
                var sb = new StringBuilder(def.Substring(0, tick).Replace('+', '+')).Append('<');
                Type[] args = t.GetGenericArguments();
                for (int i = 0; i < args.Length; i++) sb.Append(i == 0 ? "" : ",").Append(Name(args[i]));
                return sb.Append('>').ToString();
            }
            return t.FullName;
        }

        static void Print(Type type, string method)
        {
            MethodInfo m = type.GetMethod(method);
            var sb = new StringBuilder();
            ParameterInfo[] ps = m.GetParameters();
            for (int i = 0; i < ps.Length; i++) sb.Append(i == 0 ? "" : ", ").Append(Name(ps[i].ParameterType));
            string owner = type.IsGenericType ? type.GetGenericTypeDefinition().FullName : type.FullName;
            Console.WriteLine("sig " + owner + "::" + method + " " + Name(m.ReturnType) + " " + owner + "::" + method + "(" + sb + ")");
        }

        public static int Main(string[] args)
        {
            long v = 1;
            int total = Add(2, 3) + Join(new[] { "a", "b" }, ',', 0.5).Length + (int)Outer.Inner.Nested(ref v, new Point { X = 1, Y = 2 });
            var list = new List<string>();
            Fill(list, new Dictionary<string, int>());
            total += First(new[] { 7 }, false) + (int)Box(1, 2, 3f, 4, IntPtr.Zero);
            var h = new Holder<string>();
            h.Swap("y", list);
            Print(typeof(Program), "Add");
            Print(typeof(Program), "Join");
            Print(typeof(Program), "Fill");
            Print(typeof(Program), "First");
            Print(typeof(Program), "Box");
            Print(typeof(Outer.Inner), "Nested");
            Print(typeof(Holder<>), "Swap");
            AssemblyName an = typeof(Program).Assembly.GetName();
            Console.WriteLine("assembly " + an.Name + " " + an.Version);
            Console.WriteLine("total " + total);
            return 0;
        }
    }
}
