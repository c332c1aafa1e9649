// clrprof's trace-context startup hook: mirrors System.Diagnostics.Activity.Current
// into the profiler library's per-thread trace-context records (clrprof::context).
//
// Load it with DOTNET_STARTUP_HOOKS=<path to ClrprofTraceContext.dll> and
// CLRPROF_CONTEXT_LIBRARY=<path to the profiler library> (`clrprof run
// --trace-context` sets both). It changes nothing the application sees: it
// creates no activity, listens to no ActivitySource, and never throws into
// the application.
//
// How it follows the context:
// - Activity.CurrentChanged (.NET 7+) tells it when Activity.Current is set;
//   it then stores the activity's ids in its own AsyncLocal, in the same
//   execution context, so that value flows exactly as Activity.Current does.
// - That AsyncLocal's value-changed handler runs on every thread where the
//   value changes: on an explicit set, and whenever an execution context is
//   switched in (an await resuming on a pool thread, Task.Run, a timer) or
//   out (a pool thread going back to the pool: the value becomes null). It
//   writes the calling thread's record, which the library's
//   clrprof_context_record_v1 handed it at the thread's first change. This
//   path allocates nothing and calls no native code.
// - When a local root activity ends, its route (the http.route tag) or
//   display name is given to clrprof_context_root_endpoint_v1.
//
// It is compiled against .NET Core 3.1's reference assemblies and finds the
// newer APIs by reflection, so one assembly loads on every runtime; on a
// runtime without Activity.CurrentChanged it reports that and does nothing.
// The application's Main is not in this assembly; the Main below is only
// there because the SDK's test harness compiles every program as an exe.
using System;
using System.Diagnostics;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Threading;

internal class StartupHook
{
    public static void Initialize()
    {
        Clrprof.TraceContext.Mirror.Start();
    }

    private static void Main()
    {
    }
}

namespace Clrprof.TraceContext
{
    public static unsafe class Mirror
    {
        // The ids of one activity, read once when it becomes current (the
        // value-changed handler then only copies four words).
        private sealed class Ids
        {
            internal ulong Trace0, Trace1, Span, Root;
            internal uint Flags;
            internal Activity Activity;
        }

        // clrprof_context_record_v1: the calling thread's record (claimed at the
        // thread's first call).
        private static delegate* unmanaged[Cdecl]<byte*> s_record;
        private static delegate* unmanaged[Cdecl]<ulong, char*, UIntPtr, uint> s_endpoint;
        // This thread's record, once asked for.
        [ThreadStatic]
        private static IntPtr t_record;
        private static delegate* unmanaged[Cdecl]<uint, char*, UIntPtr, uint> s_hello;
        private static int s_failed;
        private static AsyncLocal<Ids> s_current;
        // Activity.GetTagItem and Activity.DisplayName (.NET 5+), Activity.IsStopped
        // (.NET 6+), where present.
        private static Func<Activity, string, object> s_getTag;
        private static Func<Activity, string> s_displayName;
        private static Func<Activity, bool> s_isStopped;

        public static void Start()
        {
            delegate* unmanaged[Cdecl]<uint, char*, UIntPtr, uint> hello = null;
            try
            {
                IntPtr library = Load();
                if (library == IntPtr.Zero)
                    return;
                IntPtr h, record, endpoint;
                if (!NativeLibrary.TryGetExport(library, "clrprof_context_hello_v1", out h)
                    || !NativeLibrary.TryGetExport(library, "clrprof_context_record_v1", out record)
                    || !NativeLibrary.TryGetExport(library, "clrprof_context_root_endpoint_v1", out endpoint))
                    return;
                hello = (delegate* unmanaged[Cdecl]<uint, char*, UIntPtr, uint>)h;
                s_hello = hello;
                EventInfo changed = typeof(Activity).GetEvent("CurrentChanged", BindingFlags.Public | BindingFlags.Static);
                if (changed == null)
                {
                    Hello(hello, 1, "System.Diagnostics.Activity has no CurrentChanged event on .NET "
                        + Environment.Version + " (it came with .NET 7): the trace context is not followed");
                    return;
                }
                s_record = (delegate* unmanaged[Cdecl]<byte*>)record;
                s_endpoint = (delegate* unmanaged[Cdecl]<ulong, char*, UIntPtr, uint>)endpoint;
                MethodInfo getTag = typeof(Activity).GetMethod("GetTagItem", new[] { typeof(string) });
                if (getTag != null)
                    s_getTag = (Func<Activity, string, object>)Delegate.CreateDelegate(typeof(Func<Activity, string, object>), getTag);
                MethodInfo displayName = typeof(Activity).GetProperty("DisplayName")?.GetGetMethod();
                if (displayName != null)
                    s_displayName = (Func<Activity, string>)Delegate.CreateDelegate(typeof(Func<Activity, string>), displayName);
                MethodInfo isStopped = typeof(Activity).GetProperty("IsStopped")?.GetGetMethod();
                if (isStopped != null)
                    s_isStopped = (Func<Activity, bool>)Delegate.CreateDelegate(typeof(Func<Activity, bool>), isStopped);
                s_current = new AsyncLocal<Ids>(OnValueChanged);
                // EventHandler<ActivityChangedEventArgs>: a handler generic in
                // the argument type, which this assembly cannot name.
                Type args = changed.EventHandlerType.GetGenericArguments()[0];
                MethodInfo handler = typeof(Mirror)
                    .GetMethod(nameof(OnCurrentChanged), BindingFlags.NonPublic | BindingFlags.Static)
                    .MakeGenericMethod(args);
                changed.AddEventHandler(null, Delegate.CreateDelegate(changed.EventHandlerType, handler));
                Follow(Activity.Current);
                Hello(hello, 0, "following Activity.Current on .NET " + Environment.Version);
            }
            catch (Exception e)
            {
                try
                {
                    if (hello != null)
                        Hello(hello, 2, e.ToString());
                }
                catch
                {
                }
            }
        }

        // The profiler library: CLRPROF_CONTEXT_LIBRARY, else the profiler the
        // runtime loaded (CORECLR_PROFILER_PATH_64, CORECLR_PROFILER_PATH).
        private static IntPtr Load()
        {
            foreach (string name in new[] { "CLRPROF_CONTEXT_LIBRARY", "CORECLR_PROFILER_PATH_64", "CORECLR_PROFILER_PATH" })
            {
                string path = Environment.GetEnvironmentVariable(name);
                IntPtr library;
                if (!string.IsNullOrEmpty(path) && NativeLibrary.TryLoad(path, out library)
                    && NativeLibrary.TryGetExport(library, "clrprof_context_hello_v1", out _))
                    return library;
            }
            return IntPtr.Zero;
        }

        private static void Hello(delegate* unmanaged[Cdecl]<uint, char*, UIntPtr, uint> hello, uint status, string detail)
        {
            fixed (char* p = detail)
                hello(status, p, (UIntPtr)detail.Length);
        }

        // Activity.Current was set (on this thread, in this execution context).
        private static void OnCurrentChanged<T>(object sender, T e)
        {
            try
            {
                Follow(Activity.Current);
            }
            catch (Exception ex)
            {
                // Never into the application's Activity.Current setter; the
                // first failure is reported to the library.
                try
                {
                    if (Interlocked.Exchange(ref s_failed, 1) == 0)
                        Hello(s_hello, 2, ex.ToString());
                }
                catch
                {
                }
            }
        }

        private static void Follow(Activity activity)
        {
            Ids previous = s_current.Value;
            if (previous != null && !ReferenceEquals(previous.Activity, activity))
                Ended(previous.Activity);
            if (previous != null && ReferenceEquals(previous.Activity, activity))
                return;
            s_current.Value = Of(activity);
        }

        // A local root that has stopped: name its endpoint.
        private static void Ended(Activity a)
        {
            if (a.Parent != null || !IsStopped(a))
                return;
            string name = s_getTag?.Invoke(a, "http.route") as string;
            if (string.IsNullOrEmpty(name))
                name = s_displayName != null ? s_displayName(a) : a.OperationName;
            if (string.IsNullOrEmpty(name))
                return;
            Span<byte> b = stackalloc byte[8];
            a.SpanId.CopyTo(b);
            ulong root = MemoryMarshal.Read<ulong>(b);
            fixed (char* p = name)
                s_endpoint(root, p, (UIntPtr)name.Length);
        }

        private static bool IsStopped(Activity a)
        {
            if (s_isStopped != null)
                return s_isStopped(a);
            return a.Duration != TimeSpan.Zero;
        }

        private static Ids Of(Activity a)
        {
            if (a == null || a.IdFormat != ActivityIdFormat.W3C)
                return null;
            Span<byte> b = stackalloc byte[16];
            a.TraceId.CopyTo(b);
            var ids = new Ids { Activity = a, Flags = (uint)a.ActivityTraceFlags };
            ids.Trace0 = MemoryMarshal.Read<ulong>(b);
            ids.Trace1 = MemoryMarshal.Read<ulong>(b.Slice(8));
            // An ActivitySpanId fills exactly 8 bytes (a longer span is read
            // past its 16 hex digits).
            a.SpanId.CopyTo(b.Slice(0, 8));
            ids.Span = MemoryMarshal.Read<ulong>(b);
            Activity root = a;
            while (root.Parent != null)
                root = root.Parent;
            root.SpanId.CopyTo(b.Slice(0, 8));
            ids.Root = MemoryMarshal.Read<ulong>(b);
            return ids;
        }

        // Every change of the mirrored value on this thread: an explicit set,
        // or an execution context switched in or out. Writes the thread's
        // record (clrprof::context::ThreadContextRecord, 64 bytes) under its
        // sequence counter: counter odd, fields, counter even, each a release
        // store, so a reader on another thread that sees a field also sees the
        // odd counter. Only this thread writes its record. Allocates nothing;
        // the native library is called once per thread, for the record.
        private static void OnValueChanged(AsyncLocalValueChangedArgs<Ids> change)
        {
            byte* r = (byte*)t_record;
            if (r == null)
            {
                r = s_record();
                t_record = (IntPtr)r;
            }
            Ids c = change.CurrentValue;
            ref uint seq = ref *(uint*)(r + 28);
            uint s = seq;
            Volatile.Write(ref seq, s + 1);
            Volatile.Write(ref r[24], (byte)0);
            if (c != null)
            {
                Volatile.Write(ref *(ulong*)(r + 0), c.Trace0);
                Volatile.Write(ref *(ulong*)(r + 8), c.Trace1);
                Volatile.Write(ref *(ulong*)(r + 16), c.Span);
                Volatile.Write(ref r[25], (byte)c.Flags);
                Volatile.Write(ref *(ulong*)(r + 32), c.Root);
                Volatile.Write(ref *(uint*)(r + 40), 0u);
                Volatile.Write(ref r[24], (byte)1);
            }
            Volatile.Write(ref seq, s + 2);
        }
    }
}
