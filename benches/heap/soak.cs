// The live-heap soak: for <seconds>, short-lived churn (requests, strings,
// buffers) beside a cache of <entries> that keeps replacing its oldest
// entry, so the live set stays the same size while millions of objects come
// and go; prints "rounds N" and "done". Usage: soak <seconds> [<entries>]
using System;
using System.Collections.Generic;
using System.Diagnostics;

namespace Soak
{
    class Entry
    {
        public string Key;
        public byte[] Payload;
    }

    class Request
    {
        public long Id;
        public string Path;
        public byte[] Buffer;
    }

    static class App
    {
        static long sink;

        static int Main(string[] args)
        {
            double seconds = double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture);
            int entries = args.Length > 1 ? int.Parse(args[1]) : 2000;
            var cache = new Queue<Entry>();
            var clock = Stopwatch.StartNew();
            long rounds = 0;
            while (clock.Elapsed.TotalSeconds < seconds)
            {
                for (int i = 0; i < 1000; i++)
                {
                    var r = new Request { Id = i, Path = "/item/" + (i % 97), Buffer = new byte[256] };
                    sink += r.Path.Length + r.Buffer.Length;
                }
                cache.Enqueue(new Entry { Key = "k" + rounds, Payload = new byte[4096] });
                if (cache.Count > entries)
                {
                    cache.Dequeue();
                }
                rounds++;
            }
            Console.WriteLine("rounds " + rounds);
            Console.WriteLine("done " + (sink > 0 ? "ok" : "none"));
            return 0;
        }
    }
}
