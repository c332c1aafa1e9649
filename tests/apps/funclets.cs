// Scenario "funclets": exceptions that leave a handler funclet (a finally
// or a catch block) and propagate through the method the funclet belongs
// to, the case where .NET 9's exception handling reported that method's
// frame twice to a profiler (dotnet/runtime issue 123351, fixed in .NET 11
// by PR 123564). Each case runs in a method of its own, called from Main,
// which catches:
// - FromFinallyWhileUnwinding: a finally that throws while an exception
//   unwinds through it (the first exception is abandoned);
// - FromFinallyOnNormalExit: a finally that throws on the normal way out;
// - FromCatch: a catch block that throws a new exception.
// Prints its own account: "thrown = N", "caught = M", "finallys = F".
// More than one exception per process: not for the win-x64 .NET 8 leg
// (Wine defect, RUNTIMES.md).
using System;
using System.Runtime.CompilerServices;

namespace Funclets
{
    public class CaseException : Exception
    {
        public CaseException(string message) : base(message) { }
    }

    public static class Program
    {
        static int thrown;
        static int caught;
        static int finallys;
        static int sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Throw(string what)
        {
            thrown++;
            throw new CaseException(what);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void FromFinallyWhileUnwinding()
        {
            try
            {
                Throw("unwinding");
            }
            finally
            {
                finallys++;
                Throw("from finally while unwinding");
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void FromFinallyOnNormalExit()
        {
            try
            {
                sink++;
            }
            finally
            {
                finallys++;
                Throw("from finally on normal exit");
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void FromCatch()
        {
            try
            {
                Throw("caught first");
            }
            catch (CaseException)
            {
                caught++;
                Throw("from catch");
            }
        }

        public static int Main(string[] args)
        {
            try
            {
                FromFinallyWhileUnwinding();
            }
            catch (CaseException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }
            try
            {
                FromFinallyOnNormalExit();
            }
            catch (CaseException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }
            try
            {
                FromCatch();
            }
            catch (CaseException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }
            Console.WriteLine("finallys = " + finallys);
            Console.WriteLine("thrown = " + thrown);
            Console.WriteLine("caught = " + caught);
            return 0;
        }
    }
}
