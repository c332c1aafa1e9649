// The live-heap scenarios' app: keeps objects of known types in known
// numbers beside short-lived garbage, collects, and prints its own ground
// truth, one line per kept kind:
//   live <method> <type> <count> <bytes per object>
// (the size measured with GC.GetAllocatedBytesForCurrentThread over
// objects allocated alone), then "done". Arguments: the scale (1 = the
// default sizes) and the mode: "kept" (everything below), "churn" (only
// the short-lived garbage, nothing kept).
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;

namespace LiveHeap
{
    class Keep
    {
        public long A, B;
        public object C;
    }

    class Temp
    {
        public long A, B, C, D;
    }

    static class App
    {
        static readonly List<Keep> kept = new List<Keep>();
        static readonly List<byte[]> blobs = new List<byte[]>();
        static readonly List<byte[]> large = new List<byte[]>();
        static long sink;

        // Sizes: small objects, medium arrays (small-object heap) and large
        // arrays (large-object heap).
        const int BlobBytes = 16 * 1024;
        const int LargeBytes = 300 * 1024;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void AllocateKept(int n)
        {
            for (int i = 0; i < n; i++)
            {
                kept.Add(new Keep { A = i });
                Churn(4);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void AllocateBlobs(int n)
        {
            for (int i = 0; i < n; i++)
            {
                blobs.Add(new byte[BlobBytes]);
                Churn(64);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void AllocateLarge(int n)
        {
            for (int i = 0; i < n; i++)
            {
                large.Add(new byte[LargeBytes]);
                Churn(512);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Churn(int n)
        {
            for (int i = 0; i < n; i++)
            {
                var t = new Temp { A = i };
                sink += t.A;
            }
        }

        /// Bytes one object takes, measured on this thread.
        static long SizeOf(Func<object> make, int count)
        {
            var keep = new object[count];
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < keep.Length; i++)
            {
                keep[i] = make();
            }
            long after = GC.GetAllocatedBytesForCurrentThread();
            GC.KeepAlive(keep);
            return (after - before) / keep.Length;
        }

        static int Main(string[] args)
        {
            double scale = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 1;
            string mode = args.Length > 1 ? args[1] : "kept";
            int n = (int)(100000 * scale);
            if (mode == "churn")
            {
                Churn((int)(2000000 * scale));
            }
            else
            {
                AllocateKept(n);
                AllocateBlobs((int)(2000 * scale));
                AllocateLarge((int)(100 * scale));
            }
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            long keepSize = SizeOf(() => new Keep(), 1000);
            long blobSize = SizeOf(() => new byte[BlobBytes], 16);
            long largeSize = SizeOf(() => new byte[LargeBytes], 2);
            Console.WriteLine("live LiveHeap.App::AllocateKept LiveHeap.Keep " + kept.Count + " " + keepSize);
            Console.WriteLine("live LiveHeap.App::AllocateBlobs System.Byte[] " + blobs.Count + " " + blobSize);
            Console.WriteLine("live LiveHeap.App::AllocateLarge System.Byte[] " + large.Count + " " + largeSize);
            Console.WriteLine("dead LiveHeap.App::Churn LiveHeap.Temp");
            // The profile is the heap as of the last collection: one more,
            // with nothing allocated since the lines above but their strings.
            GC.Collect();
            GC.KeepAlive(kept);
            GC.KeepAlive(blobs);
            GC.KeepAlive(large);
            Console.WriteLine("done " + (sink > 0 ? "ok" : "none"));
            return 0;
        }
    }
}
