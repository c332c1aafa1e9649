// Scenario "blocking": threads blocked in each kind of call a signal can
// interrupt, while a sampler's signals hit them: a pipe read, a socket
// accept and receive (one with a receive timeout, which the kernel never
// restarts after a handler), Socket.Poll, Thread.Sleep, Monitor.Wait and an
// event wait with timeouts, Process.WaitForExit (Process.Start forks), a raw
// fork() whose child exits at once, Console.ReadLine on a pipe (stdin made a
// pipe with dup2), and Task.Delay. Each prints what it got, never a time, so
// the output is the same with and without a profiler; a call that an
// interruption broke would print something else (an EINTR error, a short
// sleep, a wrong byte count).
// A spinning thread runs meanwhile so that CPU-time timers fire too.
// Arguments: [rounds (default 2)].
using System;
using System.Diagnostics;
using System.IO;
using System.IO.Pipes;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Blocking
{
    public static class Program
    {
        [DllImport("libc", SetLastError = true)]
        static extern int pipe(int[] fds);
        [DllImport("libc", SetLastError = true)]
        static extern int dup2(int from, int to);
        [DllImport("libc", SetLastError = true)]
        static extern int write(int fd, byte[] buf, IntPtr count);
        [DllImport("libc", SetLastError = true)]
        static extern int close(int fd);
        [DllImport("libc", SetLastError = true)]
        static extern int fork();
        [DllImport("libc")]
        static extern void _exit(int status);
        [DllImport("libc", SetLastError = true)]
        static extern int waitpid(int pid, out int status, int options);

        static volatile bool spinning = true;
        static long spins;

        static void Spin()
        {
            long x = 1;
            while (spinning)
            {
                for (int i = 0; i < 10000; i++) x = x * 31 + i;
            }
            Interlocked.Add(ref spins, x & 1);
        }

        static void PipeRead()
        {
            using var server = new AnonymousPipeServerStream(PipeDirection.Out);
            using var client = new AnonymousPipeClientStream(PipeDirection.In, server.ClientSafePipeHandle);
            var writer = new Thread(() =>
            {
                Thread.Sleep(200);
                server.Write(Encoding.ASCII.GetBytes("hello"), 0, 5);
                server.Flush();
            });
            writer.Start();
            var buf = new byte[16];
            int n = client.Read(buf, 0, buf.Length);
            writer.Join();
            Console.WriteLine($"pipe read {n} bytes: {Encoding.ASCII.GetString(buf, 0, n)}");
        }

        static void Sockets()
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            int port = ((IPEndPoint)listener.LocalEndpoint).Port;
            var done = new ManualResetEventSlim(false);
            var sender = new Thread(() =>
            {
                Thread.Sleep(200);
                using var c = new TcpClient();
                c.Connect(IPAddress.Loopback, port);
                var s = c.GetStream();
                Thread.Sleep(200);
                s.Write(new byte[] { 1, 2, 3 }, 0, 3);
                // Nothing more until the receiver is done: its poll and its
                // receive time out.
                done.Wait();
            });
            sender.Start();
            // Accept blocks until the sender connects.
            using Socket accepted = listener.Server.Accept();
            var buf = new byte[8];
            int n = accepted.Receive(buf);
            Console.WriteLine($"socket accepted, received {n} bytes");
            // Poll blocks in poll(2), which the kernel never restarts.
            bool readable = accepted.Poll(300_000, SelectMode.SelectRead);
            Console.WriteLine($"socket poll readable: {readable}");
            // A receive timeout (SO_RCVTIMEO): recv(2) is never restarted
            // after a handler either; the BCL must still report a timeout.
            accepted.ReceiveTimeout = 300;
            try
            {
                accepted.Receive(buf);
                Console.WriteLine("socket receive: data");
            }
            catch (SocketException e)
            {
                Console.WriteLine($"socket receive: {e.SocketErrorCode}");
            }
            done.Set();
            sender.Join();
            listener.Stop();
        }

        static void Sleeps()
        {
            var clock = Stopwatch.StartNew();
            Thread.Sleep(300);
            Console.WriteLine($"sleep lasted at least 300 ms: {clock.ElapsedMilliseconds >= 299}");
            var gate = new object();
            bool woken;
            lock (gate)
            {
                clock.Restart();
                woken = Monitor.Wait(gate, 300);
            }
            Console.WriteLine($"monitor wait: woken {woken}, at least 300 ms: {clock.ElapsedMilliseconds >= 299}");
            var ev = new ManualResetEventSlim(false);
            var setter = new Thread(() => { Thread.Sleep(200); ev.Set(); });
            setter.Start();
            Console.WriteLine($"event wait: {ev.Wait(5000)}");
            setter.Join();
            clock.Restart();
            Task.Delay(300).Wait();
            Console.WriteLine($"task delay lasted at least 300 ms: {clock.ElapsedMilliseconds >= 299}");
        }

        static void Processes()
        {
            var psi = new ProcessStartInfo("/bin/sh", "-c \"sleep 0.3; exit 3\"")
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
            };
            using var p = Process.Start(psi);
            string output = p.StandardOutput.ReadToEnd();
            p.WaitForExit();
            Console.WriteLine($"process exit {p.ExitCode}, output {output.Length} chars");
            // A raw fork: the child leaves at once (it has one thread and no
            // timers; it inherits the handlers).
            Marshal.Prelink(typeof(Program).GetMethod("_exit", System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Static));
            int pid = fork();
            if (pid == 0)
            {
                _exit(7);
            }
            int status;
            int got;
            while ((got = waitpid(pid, out status, 0)) < 0 && Marshal.GetLastWin32Error() == 4) { }
            Console.WriteLine($"fork child exit {(status >> 8) & 0xff}");
        }

        static void ReadLineOnPipe()
        {
            var fds = new int[2];
            if (pipe(fds) != 0) { Console.WriteLine("pipe failed"); return; }
            dup2(fds[0], 0);
            close(fds[0]);
            var writer = new Thread(() =>
            {
                Thread.Sleep(200);
                var line = Encoding.ASCII.GetBytes("first line\n");
                write(fds[1], line, (IntPtr)line.Length);
                Thread.Sleep(200);
                line = Encoding.ASCII.GetBytes("second line\n");
                write(fds[1], line, (IntPtr)line.Length);
                close(fds[1]);
            });
            writer.Start();
            string a = Console.ReadLine();
            string b = Console.ReadLine();
            string c = Console.ReadLine();
            writer.Join();
            Console.WriteLine($"readline: '{a}', '{b}', end {c == null}");
        }

        public static int Main(string[] args)
        {
            int rounds = args.Length > 0 ? int.Parse(args[0]) : 2;
            var spinner = new Thread(Spin) { Name = "spinner" };
            spinner.Start();
            ReadLineOnPipe();
            for (int r = 0; r < rounds; r++)
            {
                PipeRead();
                Sockets();
                Sleeps();
                Processes();
            }
            spinning = false;
            spinner.Join();
            Console.WriteLine("blocking done");
            return 0;
        }
    }
}
