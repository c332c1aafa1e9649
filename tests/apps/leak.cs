// The leak scenario's app: a cache that only grows (Cache.Store keeps a
// 256 KB payload per entry) beside heavy short-lived garbage (requests,
// strings, buffers that die at once), in rounds separated by pauses, then
// a last collection; prints its own ground truth:
//   leaked <method> <type> <count>
//   churned <objects of the short-lived kinds>
// Usage: leak [<rounds>] [<entries per round>]
using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Leak
{
    class CacheEntry
    {
        public string Key;
        public byte[] Payload;
        public long Added;
    }

    class Request
    {
        public long Id;
        public string Path;
        public byte[] Buffer;
    }

    static class Cache
    {
        static readonly Dictionary<string, CacheEntry> entries = new Dictionary<string, CacheEntry>();

        public static int Count => entries.Count;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Store(int key)
        {
            var k = "key-" + key;
            entries[k] = new CacheEntry { Key = k, Payload = new byte[256 * 1024], Added = key };
        }
    }

    static class App
    {
        static long sink;
        static long churned;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Serve(int n)
        {
            for (int i = 0; i < n; i++)
            {
                var r = new Request { Id = i, Path = "/item/" + (i % 97), Buffer = new byte[512] };
                r.Buffer[i % 512] = 1;
                sink += r.Path.Length + r.Buffer[i % 512];
                churned += 3;
            }
        }

        static int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0]) : 4;
            int perRound = args.Length > 1 ? int.Parse(args[1]) : 40;
            int key = 0;
            for (int r = 0; r < rounds; r++)
            {
                for (int i = 0; i < perRound; i++)
                {
                    Cache.Store(key++);
                    Serve(5000);
                }
                Thread.Sleep(400);
            }
            GC.Collect();
            Console.WriteLine("leaked Leak.Cache::Store System.Byte[] " + Cache.Count);
            Console.WriteLine("churned " + churned);
            // Let the period that ends next show the heap after this collection.
            Thread.Sleep(600);
            Console.WriteLine("done " + (sink > 0 ? "ok" : "none"));
            return 0;
        }
    }
}
