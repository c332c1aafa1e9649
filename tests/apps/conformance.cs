// Scenario "conformance": the programs of the runtime's own profiler test
// suite (dotnet/runtime src/tests/profiler), written anew. The first
// argument names the test; each prints its own ground truth, and nothing it
// prints depends on whether a profiler is loaded:
//   alc          two collectible AssemblyLoadContexts, each loads a copy of
//                this assembly, runs a method in it and is unloaded
//                (assembly/ALCTest)
//   dynopt       three collectible copies, loaded one after another while
//                the profiler is asked to switch COR_PRF_DISABLE_OPTIMIZATIONS
//                on and off through the profiler library's export; one method
//                of each copy is compiled with RuntimeHelpers.PrepareMethod
//                (dynamicoptimization)
//   transitions  forward P/Invokes into the profiler library (blittable and
//                not) that call back into managed code through a marshalled
//                delegate, and (on .NET 5+) through an [UnmanagedCallersOnly]
//                method (transitions, elttransitions)
//   exception    one exception thrown from a nested finally and caught by a
//                filter one frame up (exception)
//   gc           10,000 allocations, half on the pinned object heap where the
//                runtime has one, a GC every 1,000 (gc/gc)
//   gcallocate   one large-object-heap array and one pinned array (gc/gcallocate)
//   gcbasic      a thread allocating growing large arrays (gc/gcbasic)
//   classload    a class of a collectible copy instantiated, then the copy
//                unloaded (unittest/classload)
//   enumthreads  one induced GC (unittest/enumthreads)
//   statics      a class with statics in a collectible copy, kept for a
//                while, then unloaded (unittest/getappdomainstaticaddress)
//   inlining     three callers of an aggressively inlined method
//                (unittest/inlining)
//   moduleload   a dynamic (Reflection.Emit) assembly with one type
//                (unittest/moduleload)
//   multiple     waits for profilers to attach, throws and catches one
//                exception, waits to be told to end (multiple); arguments:
//                <ready-file> <go-file> <stop-file>
//   hello        prints one line (unittest/metadatagetdispenser,
//                unittest/releaseonshutdown)
// Mono's compiler sees Mono's mscorlib, so APIs newer than it
// (AssemblyLoadContext, NativeLibrary, GC.AllocateArray) are reached by
// reflection.
using System;
using System.Collections.Generic;
using System.IO;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

// The runtime recognises these attributes by name. Mono's mscorlib has
// neither, so this assembly declares them: UnmanagedCallersOnly is honoured
// by .NET 5 and later.
namespace System.Runtime.InteropServices
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class UnmanagedCallersOnlyAttribute : Attribute
    {
        public Type[] CallConvs;
        public string EntryPoint;
    }
}

namespace UnloadLibrary
{
    // The class the classload and statics tests load in a collectible copy.
    public class TestClass : MarshalByRefObject
    {
        static string staticString = "A static string";
        static int s_count;
        static List<TestClass> instances = new List<TestClass>();
        string[] instanceStrings;

        public TestClass()
        {
            instanceStrings = new string[100];
            for (int i = 0; i < instanceStrings.Length; i++)
                instanceStrings[i] = staticString + (++s_count);
            instances.Add(this);
        }

        public int Count { get { return instances.Count + instanceStrings.Length; } }
    }

    // The statics test's class: ordinary statics of several kinds, no
    // generic instantiation over a collectible type (see the statics
    // scenario for why).
    public class StaticsClass
    {
        static string name = "statics";
        static int s_count;
        static object[] slots = new object[4];
        static double ratio = 0.5;

        public StaticsClass()
        {
            s_count++;
            slots[s_count % 4] = name;
        }

        public int Count { get { return s_count + slots.Length + (int)ratio; } }
    }
}

namespace Conformance
{
    public static class Plugin
    {
        // Run in each collectible copy by the alc test.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Run(int seed)
        {
            return 100 + seed * 0;
        }
    }

    public static class DynOptLib
    {
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Callee(int x)
        {
            return x * 3 + 1;
        }

        // Compiled by PrepareMethod in each copy; inlines Callee when the
        // JIT optimises.
        public static int Caller(int x)
        {
            return Callee(x) + Callee(x + 1);
        }
    }

    // Collectible AssemblyLoadContexts through reflection.
    static class Contexts
    {
        static Type alc = Type.GetType(
            "System.Runtime.Loader.AssemblyLoadContext, System.Runtime.Loader", true);

        public static object Create(string name)
        {
            return alc.GetConstructor(new Type[] { typeof(string), typeof(bool) })
                .Invoke(new object[] { name, true });
        }

        public static Assembly LoadCopy(object context)
        {
            return (Assembly)alc.GetMethod("LoadFromAssemblyPath")
                .Invoke(context, new object[] { typeof(Contexts).Assembly.Location });
        }

        public static void Unload(object context)
        {
            alc.GetMethod("Unload").Invoke(context, null);
        }

        // Collects until every context is gone (or 50 rounds); returns how many went.
        public static int CollectAll(List<WeakReference> contexts)
        {
            for (int round = 0; round < 50; round++)
            {
                bool alive = false;
                foreach (WeakReference w in contexts)
                    alive |= w.IsAlive;
                if (!alive)
                    break;
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            int gone = 0;
            foreach (WeakReference w in contexts)
                if (!w.IsAlive)
                    gone++;
            return gone;
        }
    }

    // The profiler library, loaded by path ($CLRPROF_CONFORMANCE_LIB) for
    // [DllImport("conformance")] through NativeLibrary's resolver (.NET Core 3.0+).
    static class Native
    {
        static IntPtr handle;

        public static void Install()
        {
            Type nativeLibrary = Type.GetType("System.Runtime.InteropServices.NativeLibrary", true);
            Type resolver = Type.GetType("System.Runtime.InteropServices.DllImportResolver", true);
            Delegate d = Delegate.CreateDelegate(resolver,
                typeof(Native).GetMethod("Resolve", BindingFlags.Static | BindingFlags.NonPublic));
            nativeLibrary.GetMethod("SetDllImportResolver")
                .Invoke(null, new object[] { typeof(Native).Assembly, d });
        }

        static IntPtr Resolve(string name, Assembly assembly, DllImportSearchPath? path)
        {
            if (name != "conformance")
                return IntPtr.Zero;
            if (handle == IntPtr.Zero)
            {
                string lib = Environment.GetEnvironmentVariable("CLRPROF_CONFORMANCE_LIB");
                Type nativeLibrary = Type.GetType("System.Runtime.InteropServices.NativeLibrary", true);
                handle = (IntPtr)nativeLibrary.GetMethod("Load", new Type[] { typeof(string) })
                    .Invoke(null, new object[] { lib });
            }
            return handle;
        }
    }

    static class Pinned
    {
        public static bool Available { get { return Environment.Version.Major >= 5; } }

        // GC.AllocateArray<int>(length, pinned: true) (.NET 5+), else a plain array.
        public static int[] Ints(int length)
        {
            if (!Available)
                return new int[length];
            MethodInfo m = typeof(GC).GetMethod("AllocateArray").MakeGenericMethod(typeof(int));
            return (int[])m.Invoke(null, new object[] { length, true });
        }

        public static int[] UninitializedInts(int length)
        {
            if (!Available)
                return new int[length];
            MethodInfo m = typeof(GC).GetMethod("AllocateUninitializedArray")
                .MakeGenericMethod(typeof(int));
            return (int[])m.Invoke(null, new object[] { length, true });
        }
    }

    public static class Transitions
    {
        [UnmanagedFunctionPointer(CallingConvention.Winapi)]
        delegate int InteropDelegate(int i);

        [UnmanagedFunctionPointer(CallingConvention.Winapi)]
        delegate int InteropDelegateNonBlittable(bool b);

        [DllImport("conformance", EntryPoint = "DoPInvoke")]
        public static extern int DoPInvoke(IntPtr callback, int i);

        [DllImport("conformance", EntryPoint = "DoPInvoke")]
        public static extern int DoPInvokeNonBlittable(IntPtr callback, bool b);

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int DoDelegateReversePInvoke(int i)
        {
            return i;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int DoDelegateReversePInvokeNonBlittable(bool b)
        {
            return b ? 1 : 0;
        }

        [UnmanagedCallersOnly]
        static int DoReversePInvoke(int i)
        {
            return i;
        }

        public static void Run()
        {
            Native.Install();
            InteropDelegate d = DoDelegateReversePInvoke;
            Console.WriteLine("blittable to delegate: " +
                DoPInvoke(Marshal.GetFunctionPointerForDelegate(d), 13));
            GC.KeepAlive(d);
            InteropDelegateNonBlittable nb = DoDelegateReversePInvokeNonBlittable;
            Console.WriteLine("non-blittable to delegate: " +
                DoPInvokeNonBlittable(Marshal.GetFunctionPointerForDelegate(nb), true));
            GC.KeepAlive(nb);
            // UnmanagedCallersOnly arrived in .NET 5; on older runtimes its
            // function pointer is not callable from native code.
            if (Environment.Version.Major >= 5)
            {
                IntPtr uco = typeof(Transitions)
                    .GetMethod("DoReversePInvoke", BindingFlags.Static | BindingFlags.NonPublic)
                    .MethodHandle.GetFunctionPointer();
                Console.WriteLine("blittable to UnmanagedCallersOnly: " + DoPInvokeUco(uco, 13));
                Console.WriteLine("non-blittable to UnmanagedCallersOnly: " +
                    DoPInvokeUcoNonBlittable(uco, true));
            }
        }

        // Separate P/Invoke methods for the UnmanagedCallersOnly target, so a
        // profiler can tell the four cases apart by name.
        [DllImport("conformance", EntryPoint = "DoPInvoke")]
        public static extern int DoPInvokeUco(IntPtr callback, int i);

        [DllImport("conformance", EntryPoint = "DoPInvoke")]
        public static extern int DoPInvokeUcoNonBlittable(IntPtr callback, bool b);
    }

    public static class DynOpt
    {
        [DllImport("conformance")]
        static extern int SwitchJitOptimization(int disable);

        public static void Run()
        {
            Native.Install();
            var contexts = new List<WeakReference>();
            Assembly before = Load("before disable", contexts);
            SwitchJitOptimization(1);
            Assembly after = Load("after disable", contexts);
            SwitchJitOptimization(0);
            Assembly reenabled = Load("after reenable", contexts);
            foreach (Assembly a in new Assembly[] { before, after, reenabled })
            {
                MethodInfo m = a.GetType("Conformance.DynOptLib").GetMethod("Caller");
                RuntimeHelpers.PrepareMethod(m.MethodHandle);
                Console.WriteLine("Caller(2) = " + m.Invoke(null, new object[] { 2 }));
            }
        }

        static Assembly Load(string name, List<WeakReference> contexts)
        {
            object context = Contexts.Create(name);
            contexts.Add(new WeakReference(context));
            return Contexts.LoadCopy(context);
        }
    }

    public static class ExceptionTest
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Foo()
        {
            try
            {
            }
            finally
            {
                try
                {
                }
                finally
                {
                    throw new Exception("Thrown from finally");
                }
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Bar()
        {
            try
            {
                Foo();
            }
            catch (Exception e) when (Filter(e))
            {
                Console.WriteLine("caught: " + e.Message);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static bool Filter(Exception e)
        {
            return e.Message == "Thrown from finally";
        }
    }

    class AllocObject
    {
        public const int ArraySize = 100;
        int[] array;

        public AllocObject(bool poh)
        {
            array = poh ? Pinned.Ints(ArraySize) : new int[ArraySize];
        }

        public int Length { get { return array.Length; } }
    }

    public static class GcTests
    {
        static int[] arrayRef1;
        static int[] arrayRef2;

        public static void Basic()
        {
            int numAllocators = 1024;
            int[] root1 = Pinned.Ints(AllocObject.ArraySize);
            int[] root2 = Pinned.Ints(AllocObject.ArraySize);
            AllocObject[] objs = new AllocObject[numAllocators];
            Random rand = new Random(1234);
            int numPoh = 0, numReg = 0;
            for (int i = 0; i < 10000; ++i)
            {
                int pos = rand.Next(0, numAllocators);
                bool poh = Pinned.Available && rand.NextDouble() > 0.5;
                objs[pos] = new AllocObject(poh);
                if (poh)
                    ++numPoh;
                else
                    ++numReg;
                if (i % 1000 == 0)
                {
                    GC.Collect();
                    Console.WriteLine("Did " + i + " iterations");
                }
                int[] scratch = new int[100];
                GC.KeepAlive(scratch);
            }
            Console.WriteLine(numPoh + " POH allocs and " + numReg + " normal allocs.");
            GC.KeepAlive(root1);
            GC.KeepAlive(root2);
            GC.KeepAlive(objs);
        }

        public static void Allocate()
        {
            arrayRef1 = new int[100000];
            arrayRef2 = Pinned.Ints(32);
            Console.WriteLine("allocated " + arrayRef1.Length + " and " + arrayRef2.Length);
        }

        static void DoWork()
        {
            int[] arr0 = Pinned.UninitializedInts(100000);
            int[] arr1 = Pinned.Ints(200000);
            for (int k = 0; k < 3; k++)
            {
                Console.WriteLine("Restarting run " + k);
                int[] largeArray = new int[1000000];
                for (int i = 0; i <= 20; i++)
                    largeArray = new int[largeArray.Length + 100000];
                GC.KeepAlive(largeArray);
            }
            GC.KeepAlive(arr0);
            GC.KeepAlive(arr1);
        }

        public static void LargeObjects()
        {
            Thread t = new Thread(DoWork);
            t.Start();
            t.Join();
            Console.WriteLine("Test Passed");
        }
    }

    public static class UnitTests
    {
        // classload: instantiate UnloadLibrary.TestClass in a collectible
        // copy, unload the copy and collect until it is gone.
        public static void ClassLoad()
        {
            var contexts = new List<WeakReference>();
            LoadAndInstantiate(contexts, 0);
            Console.WriteLine("contexts collected: " + Contexts.CollectAll(contexts));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void LoadAndInstantiate(List<WeakReference> contexts, int keepMs)
        {
            LoadAndInstantiate(contexts, keepMs, "UnloadLibrary.TestClass");
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void LoadAndInstantiate(List<WeakReference> contexts, int keepMs, string typeName)
        {
            object context = Contexts.Create("Collectible");
            contexts.Add(new WeakReference(context));
            Assembly copy = Contexts.LoadCopy(context);
            Type testType = copy.GetType(typeName);
            object instance = Activator.CreateInstance(testType);
            Console.WriteLine(testType.Name + " constructed, count " +
                testType.GetProperty("Count").GetValue(instance, null));
            if (keepMs > 0)
                Thread.Sleep(keepMs);
            Contexts.Unload(context);
        }

        // statics: the profiler forces GCs every 100 ms meanwhile.
        public static void Statics(string typeName)
        {
            var contexts = new List<WeakReference>();
            LoadAndInstantiate(contexts, 1500, typeName);
            Thread.Sleep(1000);
            Console.WriteLine("statics test done");
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public static int Inlinee(int x)
        {
            return x * 7 + 3;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Inlining(int seed)
        {
            Console.WriteLine("Inlining, x=" + Inlinee(seed));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void BlockInlining(int seed)
        {
            Console.WriteLine("BlockInlining, x=" + Inlinee(seed));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void NoResponse(int seed)
        {
            Console.WriteLine("NoResponse, x=" + Inlinee(seed));
        }

        public static void ModuleLoad()
        {
            Type type = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("TestAssembly"),
                    AssemblyBuilderAccess.Run)
                .DefineDynamicModule("TestModule")
                .DefineType("TestClass", TypeAttributes.Public)
                .CreateType();
            object obj = Activator.CreateInstance(type);
            Console.WriteLine("created " + obj.GetType().Name);
        }
    }

    static class Program
    {
        static int Main(string[] args)
        {
            string test = args.Length > 0 ? args[0] : "hello";
            switch (test)
            {
                case "alc":
                {
                    var contexts = new List<WeakReference>();
                    for (int i = 1; i <= 2; i++)
                        Console.WriteLine("copy " + i + " returned " + RunCopy(i, contexts));
                    Console.WriteLine("contexts collected: " + Contexts.CollectAll(contexts));
                    break;
                }
                case "dynopt":
                    DynOpt.Run();
                    break;
                case "transitions":
                    Transitions.Run();
                    break;
                case "exception":
                    ExceptionTest.Bar();
                    break;
                case "gc":
                    GcTests.Basic();
                    break;
                case "gcallocate":
                    GcTests.Allocate();
                    break;
                case "gcbasic":
                    GcTests.LargeObjects();
                    break;
                case "classload":
                    UnitTests.ClassLoad();
                    break;
                case "enumthreads":
                    GC.Collect();
                    Console.WriteLine("collected");
                    break;
                case "statics":
                    UnitTests.Statics(args.Length > 1 ? args[1] : "UnloadLibrary.StaticsClass");
                    break;
                case "inlining":
                    UnitTests.Inlining(args.Length);
                    UnitTests.BlockInlining(args.Length);
                    UnitTests.NoResponse(args.Length);
                    break;
                case "moduleload":
                    UnitTests.ModuleLoad();
                    break;
                case "multiple":
                    Multiple(args[1], args[2], args[3]);
                    break;
                case "hello":
                    Console.WriteLine("hello from the conformance app");
                    break;
                default:
                    Console.WriteLine("unknown test " + test);
                    return 2;
            }
            return 0;
        }

        // Writes the process id to <ready> (through a temporary file, so a
        // reader never sees half of it), waits for <go>, throws and catches
        // one exception, then waits for <stop>.
        static void Multiple(string ready, string go, string stop)
        {
            string tmp = ready + ".tmp";
            File.WriteAllText(tmp, System.Diagnostics.Process.GetCurrentProcess().Id.ToString());
            File.Move(tmp, ready);
            WaitFor(go);
            try
            {
                throw new InvalidOperationException("Test exception!");
            }
            catch (InvalidOperationException e)
            {
                Console.WriteLine("caught: " + e.Message);
            }
            WaitFor(stop);
            Console.WriteLine("done");
        }

        static void WaitFor(string file)
        {
            for (int i = 0; i < 6000 && !File.Exists(file); i++)
                Thread.Sleep(10);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int RunCopy(int i, List<WeakReference> contexts)
        {
            object context = Contexts.Create("alc" + i);
            contexts.Add(new WeakReference(context));
            Assembly copy = Contexts.LoadCopy(context);
            MethodInfo main = copy.GetType("Conformance.Plugin").GetMethod("Run");
            int result = (int)main.Invoke(null, new object[] { i });
            Contexts.Unload(context);
            return result;
        }
    }
}
