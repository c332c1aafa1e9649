// Scenario "apply metadata, in-memory symbols": EmitApp.Target::Compute is
// what a profiler rewrites to call a method it adds to this module's
// metadata at run time (the result must not change: 41 + 1). Then the app
// loads its own image from memory with a symbol blob it made (777 bytes,
// byte i = i * 31 + 7), and builds a Reflection.Emit module. It prints the
// blob's length and FNV-1a hash, so the profiler's read can be checked.
using System;
using System.IO;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;

namespace EmitApp
{
    public static class Target
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Compute(int x)
        {
            return x + 1;
        }
    }

    public static class Program
    {
        private static uint Fnv(byte[] data)
        {
            uint h = 2166136261;
            foreach (byte b in data)
            {
                h ^= b;
                h *= 16777619;
            }
            return h;
        }

        public static int Main(string[] args)
        {
            Console.WriteLine("compute " + Target.Compute(41));

            byte[] image = File.ReadAllBytes(typeof(Program).Assembly.Location);
            byte[] symbols = new byte[777];
            for (int i = 0; i < symbols.Length; i++)
            {
                symbols[i] = (byte)(i * 31 + 7);
            }
            Assembly copy = Assembly.Load(image, symbols);
            Console.WriteLine("loaded a copy with symbols " + symbols.Length + " " + Fnv(symbols).ToString("x8") + " " + (copy != typeof(Program).Assembly));

            AssemblyBuilder ab = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("EmitDyn"), AssemblyBuilderAccess.Run);
            ModuleBuilder mb = ab.DefineDynamicModule("EmitDyn");
            TypeBuilder tb = mb.DefineType("EmitDyn.T", TypeAttributes.Public);
            Type t = tb.CreateType();
            Console.WriteLine("emitted " + t.FullName);
            return 0;
        }
    }
}
