// Scenario "eltargs": the argument and return-value shapes of the runtime's
// own slow-path ELT test (dotnet/runtime src/tests/profiler/elt): integers,
// floats, strings, homogeneous float/double aggregates of 2-4 fields,
// structs mixing int and double, a large struct, and structs next to
// floating-point arguments, each method called twice with different values;
// and, beyond the runtime's test, structs returned in rax and rdx
// ({long; long}) and in xmm0 and rax ({double; int}), the two register
// pairs its shapes do not use; and a struct nesting a struct
// ({{float; float}; float}, returned in xmm0 and xmm1), whose return value a
// profiler on .NET Core 3.1 for Linux x64 must refuse rather than misread.
//
// The app prints its own ground truth, which a profiler's decoded values
// must equal, and which must be the same with and without ELT hooks:
//   arg <Ns.Type::Method> <index> <value>    printed by the callee, as received
//   ret <Ns.Type::Method> <value>            printed by the caller, as received
// where <value> is "i4 N", "r4 X", "r8 X", "str S", or for a struct
// "struct <size> <offset>:<i4|i8|r4|r8>:<value> ..." with one item per field
// (offsets measured in the value itself, so they are the runtime's layout).
// Floating-point values use round-trip ("R") formatting.
using System;
using System.Globalization;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace EltArgs
{
    [StructLayout(LayoutKind.Sequential)]
    public struct IntegerStruct { public int X, Y; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp32x2 { public float X, Y; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp32x3 { public float X, Y, Z; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp32x4 { public float X, Y, Z, W; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp64x2 { public double X, Y; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp64x3 { public double X, Y, Z; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Fp64x4 { public double X, Y, Z, W; }

    [StructLayout(LayoutKind.Sequential)]
    public struct MixedStruct { public int X; public double D; }

    [StructLayout(LayoutKind.Sequential)]
    public struct LongPair { public long A, B; }

    [StructLayout(LayoutKind.Sequential)]
    public struct DoubleInt { public double D; public int X; }

    [StructLayout(LayoutKind.Sequential)]
    public struct Nested { public Fp32x2 A; public float B; }

    [StructLayout(LayoutKind.Sequential)]
    public struct LargeStruct
    {
        public int X0; public double D0; public int X1; public double D1;
        public int X2; public double D2; public int X3; public double D3;
    }

    public static unsafe class Show
    {
        static string R(float f) { return f.ToString("R", CultureInfo.InvariantCulture); }
        static string R(double d) { return d.ToString("R", CultureInfo.InvariantCulture); }

        public static string I4(int v) { return "i4 " + v.ToString(CultureInfo.InvariantCulture); }
        public static string R4(float v) { return "r4 " + R(v); }
        public static string R8(double v) { return "r8 " + R(v); }
        public static string Str(string v) { return "str " + v; }

        static string F(byte* start, int* field) { return " " + ((byte*)field - start) + ":i4:" + (*field).ToString(CultureInfo.InvariantCulture); }
        static string F(byte* start, long* field) { return " " + ((byte*)field - start) + ":i8:" + (*field).ToString(CultureInfo.InvariantCulture); }
        static string F(byte* start, float* field) { return " " + ((byte*)field - start) + ":r4:" + R(*field); }
        static string F(byte* start, double* field) { return " " + ((byte*)field - start) + ":r8:" + R(*field); }

        public static string Of(IntegerStruct s) { byte* b = (byte*)&s; return "struct " + sizeof(IntegerStruct) + F(b, &s.X) + F(b, &s.Y); }
        public static string Of(Fp32x2 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp32x2) + F(b, &s.X) + F(b, &s.Y); }
        public static string Of(Fp32x3 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp32x3) + F(b, &s.X) + F(b, &s.Y) + F(b, &s.Z); }
        public static string Of(Fp32x4 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp32x4) + F(b, &s.X) + F(b, &s.Y) + F(b, &s.Z) + F(b, &s.W); }
        public static string Of(Fp64x2 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp64x2) + F(b, &s.X) + F(b, &s.Y); }
        public static string Of(Fp64x3 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp64x3) + F(b, &s.X) + F(b, &s.Y) + F(b, &s.Z); }
        public static string Of(Fp64x4 s) { byte* b = (byte*)&s; return "struct " + sizeof(Fp64x4) + F(b, &s.X) + F(b, &s.Y) + F(b, &s.Z) + F(b, &s.W); }
        public static string Of(MixedStruct s) { byte* b = (byte*)&s; return "struct " + sizeof(MixedStruct) + F(b, &s.X) + F(b, &s.D); }
        public static string Of(LongPair s) { byte* b = (byte*)&s; return "struct " + sizeof(LongPair) + F(b, &s.A) + F(b, &s.B); }
        public static string Of(DoubleInt s) { byte* b = (byte*)&s; return "struct " + sizeof(DoubleInt) + F(b, &s.D) + F(b, &s.X); }
        public static string Of(Nested s) { byte* b = (byte*)&s; return "struct " + sizeof(Nested) + F(b, &s.A.X) + F(b, &s.A.Y) + F(b, &s.B); }
        public static string Of(LargeStruct s)
        {
            byte* b = (byte*)&s;
            return "struct " + sizeof(LargeStruct) + F(b, &s.X0) + F(b, &s.D0) + F(b, &s.X1) + F(b, &s.D1)
                + F(b, &s.X2) + F(b, &s.D2) + F(b, &s.X3) + F(b, &s.D3);
        }
    }

    public static class Program
    {
        const string P = "EltArgs.Program::";

        static void Arg(string method, int index, string value) { Console.WriteLine("arg " + P + method + " " + index + " " + value); }
        static void Ret(string method, string value) { Console.WriteLine("ret " + P + method + " " + value); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static string SimpleArgs(int x, float y, string s)
        {
            Arg("SimpleArgs", 0, Show.I4(x)); Arg("SimpleArgs", 1, Show.R4(y)); Arg("SimpleArgs", 2, Show.Str(s));
            return s + "|" + x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static MixedStruct MixedStructFunc(MixedStruct m)
        {
            Arg("MixedStructFunc", 0, Show.Of(m));
            m.X += 3; m.D *= 1.5;
            return m;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int LargeStructFunc(LargeStruct l)
        {
            Arg("LargeStructFunc", 0, Show.Of(l));
            return l.X0 + l.X1 + l.X2 + l.X3 + 3;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static IntegerStruct IntegerStructFunc(IntegerStruct s)
        {
            Arg("IntegerStructFunc", 0, Show.Of(s));
            s.X = s.X * 2 + 21;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp32x2 Fp32x2Func(Fp32x2 s)
        {
            Arg("Fp32x2Func", 0, Show.Of(s));
            s.Y = s.Y * 0.5f + 2;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp32x3 Fp32x3Func(Fp32x3 s)
        {
            Arg("Fp32x3Func", 0, Show.Of(s));
            s.Z = s.Z - 3.25f;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp32x4 Fp32x4Func(Fp32x4 s)
        {
            Arg("Fp32x4Func", 0, Show.Of(s));
            s.W = s.X + s.W;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp64x2 Fp64x2Func(Fp64x2 s)
        {
            Arg("Fp64x2Func", 0, Show.Of(s));
            s.Y = s.Y / 3;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp64x3 Fp64x3Func(Fp64x3 s)
        {
            Arg("Fp64x3Func", 0, Show.Of(s));
            s.Z = -s.Z;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp64x4 Fp64x4Func(Fp64x4 s)
        {
            Arg("Fp64x4Func", 0, Show.Of(s));
            s.W = s.W * s.X;
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp32x3 Fp32x3SingleFp32x3Single(Fp32x3 a, float f, Fp32x3 b, float g)
        {
            Arg("Fp32x3SingleFp32x3Single", 0, Show.Of(a)); Arg("Fp32x3SingleFp32x3Single", 1, Show.R4(f));
            Arg("Fp32x3SingleFp32x3Single", 2, Show.Of(b)); Arg("Fp32x3SingleFp32x3Single", 3, Show.R4(g));
            b.X += a.Z * f; b.Y -= g;
            return b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Fp64x3 Fp64x3DoubleFp64x3Double(Fp64x3 a, double f, Fp64x3 b, double g)
        {
            Arg("Fp64x3DoubleFp64x3Double", 0, Show.Of(a)); Arg("Fp64x3DoubleFp64x3Double", 1, Show.R8(f));
            Arg("Fp64x3DoubleFp64x3Double", 2, Show.Of(b)); Arg("Fp64x3DoubleFp64x3Double", 3, Show.R8(g));
            b.X += a.Z * f; b.Y -= g;
            return b;
        }

        // A double in a floating-point register next to a struct in an
        // integer register (System V: xmm0 and rdi).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double DoubleAndIntegerStruct(double d, IntegerStruct s)
        {
            Arg("DoubleAndIntegerStruct", 0, Show.R8(d)); Arg("DoubleAndIntegerStruct", 1, Show.Of(s));
            return d * s.X + s.Y;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double DoubleRet(int r)
        {
            Arg("DoubleRet", 0, Show.I4(r));
            return 13.0 + r * 0.125;
        }

        // System V: returned in rax and rdx.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static LongPair LongPairFunc(LongPair p)
        {
            Arg("LongPairFunc", 0, Show.Of(p));
            p.A = p.A * 3 - 1; p.B = -p.B;
            return p;
        }

        // System V: returned in xmm0 and rax.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static DoubleInt DoubleIntFunc(DoubleInt d)
        {
            Arg("DoubleIntFunc", 0, Show.Of(d));
            d.D = d.D * 0.25 + 1; d.X = d.X + 40;
            return d;
        }

        // System V: returned in xmm0 (A) and xmm1 (B).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Nested NestedFunc(Nested n)
        {
            Arg("NestedFunc", 0, Show.Of(n));
            n.B = n.A.X - n.B; n.A.Y = n.A.Y * 2;
            return n;
        }

        public static int Main(string[] args)
        {
            for (int r = 0; r < 2; r++)
            {
                Ret("SimpleArgs", Show.Str(SimpleArgs(-123 + r, -4.3f + r, "Hello_test!" + r)));

                MixedStruct m; m.X = 1 + r; m.D = 1.0 + r * 0.5;
                Ret("MixedStructFunc", Show.Of(MixedStructFunc(m)));

                LargeStruct l;
                l.X0 = r; l.D0 = r + 0.5; l.X1 = r + 1; l.D1 = r + 1.5; l.X2 = r + 2; l.D2 = r + 2.5; l.X3 = r + 3; l.D3 = r + 3.5;
                Ret("LargeStructFunc", Show.I4(LargeStructFunc(l)));

                IntegerStruct i; i.X = 14 + r; i.Y = 256 - r;
                Ret("IntegerStructFunc", Show.Of(IntegerStructFunc(i)));

                Fp32x2 f2; f2.X = 1.2f + r; f2.Y = 3.5f - r;
                Fp32x3 f3; f3.X = 6.7f + r; f3.Y = 10.11f; f3.Z = 13.14f * (r + 1);
                Fp32x4 f4; f4.X = 15.17f; f4.Y = 19.21f + r; f4.Z = 22.23f; f4.W = 26.29f - r;
                Ret("Fp32x2Func", Show.Of(Fp32x2Func(f2)));
                Ret("Fp32x3Func", Show.Of(Fp32x3Func(f3)));
                Ret("Fp32x4Func", Show.Of(Fp32x4Func(f4)));

                Fp64x2 d2; d2.X = 1.2 + r; d2.Y = 3.5;
                Fp64x3 d3; d3.X = 6.7; d3.Y = 10.11 - r; d3.Z = 13.14;
                Fp64x4 d4; d4.X = 15.17 + r; d4.Y = 19.21; d4.Z = 22.23 * (r + 1); d4.W = 26.29;
                Ret("Fp64x2Func", Show.Of(Fp64x2Func(d2)));
                Ret("Fp64x3Func", Show.Of(Fp64x3Func(d3)));
                Ret("Fp64x4Func", Show.Of(Fp64x4Func(d4)));

                Fp32x3 g3; g3.X = -1.5f; g3.Y = 2.25f + r; g3.Z = 0.1f;
                Ret("Fp32x3SingleFp32x3Single", Show.Of(Fp32x3SingleFp32x3Single(f3, 1.2f + r, g3, 3.5f)));
                Fp64x3 e3; e3.X = -1.5; e3.Y = 2.25; e3.Z = 0.1 * (r + 1);
                Ret("Fp64x3DoubleFp64x3Double", Show.Of(Fp64x3DoubleFp64x3Double(d3, 1.2, e3, 3.5 + r)));

                Ret("DoubleAndIntegerStruct", Show.R8(DoubleAndIntegerStruct(0.75 + r, i)));
                Ret("DoubleRet", Show.R8(DoubleRet(r)));

                LongPair lp; lp.A = 0x1122334455L + r; lp.B = -7 - r;
                Ret("LongPairFunc", Show.Of(LongPairFunc(lp)));
                DoubleInt di; di.D = -3.75 + r; di.X = 9 * (r + 1);
                Ret("DoubleIntFunc", Show.Of(DoubleIntFunc(di)));
                Nested n; n.A.X = 0.5f + r; n.A.Y = -1.25f; n.B = 8.0f * (r + 1);
                Ret("NestedFunc", Show.Of(NestedFunc(n)));
            }
            return 0;
        }
    }
}
