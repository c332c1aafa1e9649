// Scenario "events": triggers every callback family a profiler can watch and
// prints its own account of what it did, so a test can compare:
// a collectible AssemblyLoadContext loads this very assembly again, runs a
// method in it and is unloaded (assembly/module/class unloads); a named thread
// starts and ends; a P/Invoke crosses into native code; K objects of
// Events.Tracked stay alive across 5 induced GCs while garbage around them is
// collected (moved/surviving references); objects with finalizers are queued;
// GC handles are made and freed; statics are set before Probe is first called;
// UseTiny calls the small Inl.Tiny (inlined unless a profiler vetoes it).
// No managed exception is thrown, so the win-x64 .NET 8 leg can run it.
using System;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Events
{
    public class Tracked
    {
        public int Id;
        public string Name;
        public Tracked Next;

        public Tracked(int id)
        {
            Id = id;
            Name = "t" + id;
        }
    }

    public class Finalizable
    {
        ~Finalizable()
        {
            Interlocked.Increment(ref Program.Finalized);
        }
    }

    public class Handled
    {
        public int Value;
    }

    public static class Holder
    {
        public static int Number;
        public static string Text;
        public static int[] Numbers;
        public static object Boxed;
    }

    public static class Inl
    {
        public static int Tiny(int x)
        {
            return x + 1;
        }
    }

    public static class Plugin
    {
        public static string Hello()
        {
            return "hello from the collectible context";
        }
    }

    static class Native
    {
        [DllImport("libc.so.6", EntryPoint = "getpid")]
        public static extern int GetPidUnix();

        [DllImport("kernel32", EntryPoint = "GetCurrentProcessId")]
        public static extern uint GetPidWindows();
    }

    public static class Program
    {
        public const int K = 1000;
        public const int Finalizables = 10;
        public const int Handles = 3;
        public static int Finalized;
        public static object sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int UseTiny(int n)
        {
            int s = 0;
            for (int i = 0; i < n; i++)
                s = Inl.Tiny(s);
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Probe()
        {
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void MakeFinalizables()
        {
            for (int i = 0; i < Finalizables; i++)
                sink = new Finalizable();
            sink = null;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Garbage(int n)
        {
            for (int i = 0; i < n; i++)
                sink = new byte[100 + i % 50];
            sink = null;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference RunInCollectibleContext(out string said)
        {
            Type alcType = typeof(object).Assembly.GetType("System.Runtime.Loader.AssemblyLoadContext");
            ConstructorInfo ctor = alcType.GetConstructor(new Type[] { typeof(string), typeof(bool) });
            object alc = ctor.Invoke(new object[] { "events-plugin", true });
            MethodInfo load = alcType.GetMethod("LoadFromAssemblyPath", new Type[] { typeof(string) });
            Assembly copy = (Assembly)load.Invoke(alc, new object[] { typeof(Program).Assembly.Location });
            said = (string)copy.GetType("Events.Plugin").GetMethod("Hello").Invoke(null, null);
            alcType.GetMethod("Unload").Invoke(alc, null);
            return new WeakReference(alc);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int NativePid()
        {
            if (Environment.OSVersion.Platform == PlatformID.Win32NT)
                return (int)Native.GetPidWindows();
            return Native.GetPidUnix();
        }

        public static int Main(string[] args)
        {
            Console.WriteLine("tiny x100 = " + UseTiny(100));

            string said;
            WeakReference alc = RunInCollectibleContext(out said);
            Console.WriteLine("plugin says: " + said);
            for (int i = 0; i < 20 && alc.IsAlive; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Console.WriteLine("collectible context unloaded = " + !alc.IsAlive);

            Thread worker = new Thread(delegate () { sink = new Handled(); });
            worker.Name = "events-worker";
            worker.Start();
            worker.Join();
            Console.WriteLine("thread events-worker joined");

            Console.WriteLine("native pid > 0 = " + (NativePid() > 0));

            Holder.Number = 42;
            Holder.Text = "static text";
            Holder.Numbers = new int[] { 1, 2, 3, 5, 8 };
            Holder.Boxed = 1234567890123L;
            Probe();
            Console.WriteLine("statics set: 42, static text, [1,2,3,5,8], boxed 1234567890123");

            GCHandle[] handles = new GCHandle[Handles];
            for (int i = 0; i < Handles; i++)
                handles[i] = GCHandle.Alloc(new Handled(), GCHandleType.Normal);
            for (int i = 0; i < Handles; i++)
                handles[i].Free();
            Console.WriteLine("handles made and freed = " + Handles);

            MakeFinalizables();
            GC.Collect();
            GC.WaitForPendingFinalizers();
            Console.WriteLine("finalized = " + Finalized);

            Tracked[] all = new Tracked[K];
            for (int i = 0; i < K; i++)
            {
                Garbage(3);
                all[i] = new Tracked(i);
                if (i > 0)
                    all[i - 1].Next = all[i];
            }
            for (int gc = 0; gc < 5; gc++)
            {
                Garbage(2000);
                GC.Collect();
            }
            long sum = 0;
            int alive = 0;
            for (Tracked t = all[0]; t != null; t = t.Next)
            {
                alive++;
                sum += t.Id;
            }
            Console.WriteLine("tracked allocated = " + K + ", alive after 5 GCs = " + alive + ", id sum = " + sum);
            GC.KeepAlive(all);
            return 0;
        }
    }
}
