// Scenario "review42fresh" (the fresh review of issue 42): a worker thread
// allocates while the main thread compiles `Claimed` for the first time,
// then the main thread throws through `Unwound` (one unwind of an app
// frame, a finally on the way), collects once, and makes and frees one GC
// handle of an object. Every line printed is
// independent of timing.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Review42
{
    public static class Program
    {
        static volatile bool stop;
        static volatile bool started;
        static object kept;

        static void Allocate()
        {
            started = true;
            while (!stop)
            {
                kept = new object();
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Claimed(int x)
        {
            return x * 2 + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Unwound()
        {
            try
            {
                throw new InvalidOperationException("unwound");
            }
            finally
            {
                kept = null;
            }
        }

        public static int Main(string[] args)
        {
            var worker = new Thread(Allocate);
            worker.Start();
            while (!started)
            {
                Thread.Sleep(1);
            }
            Console.WriteLine("claimed " + Claimed(20));
            stop = true;
            worker.Join();
            try
            {
                Unwound();
            }
            catch (InvalidOperationException e)
            {
                Console.WriteLine("caught " + e.Message);
            }
            GC.Collect();
            Console.WriteLine("collected");
            var handle = GCHandle.Alloc(new int[] { 42 });
            Console.WriteLine("handle " + ((int[])handle.Target)[0]);
            handle.Free();
            return 0;
        }
    }
}
