// Scenario "exflow": managed exceptions along every path of the runtime's
// two-pass handling, counted by the program itself: a plain catch, a throw
// through a frame with a finally, exception filters (C# `when`, one false and
// one true), a nested exception caught inside a catch block, a rethrow
// (`throw;`) caught one frame up, and an exception thrown and caught inside a
// finally that runs while another exception unwinds. It prints every step and
// the totals "thrown = N" (throw statements executed, rethrow included) and
// "caught = M" (catch blocks entered). More than one exception per process:
// cannot run on the win-x64 .NET 8 leg (Wine defect, RUNTIMES.md).
using System;
using System.Runtime.CompilerServices;

namespace ExFlow
{
    public class FlowException : Exception
    {
        public FlowException(string message) : base(message) { }
    }

    public static class Program
    {
        static int thrown;
        static int caught;
        static int filtersRun;
        static int finallysRun;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Throw(string what)
        {
            thrown++;
            throw new FlowException(what);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void WithFinally(string what)
        {
            try
            {
                Throw(what);
            }
            finally
            {
                finallysRun++;
                Console.WriteLine("finally ran for " + what);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static bool Filter(Exception e, bool answer)
        {
            filtersRun++;
            Console.WriteLine("filter saw " + e.Message + ", answers " + answer);
            return answer;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Rethrower()
        {
            try
            {
                Throw("rethrown");
            }
            catch (FlowException)
            {
                caught++;
                Console.WriteLine("caught rethrown once, rethrowing");
                thrown++;
                throw;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void FinallyThatThrows()
        {
            try
            {
                Throw("outer of finally");
            }
            finally
            {
                finallysRun++;
                try
                {
                    Throw("inside finally");
                }
                catch (FlowException e)
                {
                    caught++;
                    Console.WriteLine("caught " + e.Message);
                }
            }
        }

        public static int Main(string[] args)
        {
            try
            {
                Throw("plain");
            }
            catch (FlowException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }

            try
            {
                WithFinally("through finally");
            }
            catch (FlowException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }

            try
            {
                Throw("filtered");
            }
            catch (FlowException e) when (Filter(e, false))
            {
                Console.WriteLine("wrong handler");
            }
            catch (FlowException e) when (Filter(e, true))
            {
                caught++;
                Console.WriteLine("caught " + e.Message + " by the second filter");
            }

            try
            {
                Throw("outer");
            }
            catch (FlowException e)
            {
                caught++;
                try
                {
                    Throw("nested");
                }
                catch (FlowException inner)
                {
                    caught++;
                    Console.WriteLine("caught " + inner.Message + " inside the handler of " + e.Message);
                }
            }

            try
            {
                Rethrower();
            }
            catch (FlowException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message + " again");
            }

            try
            {
                FinallyThatThrows();
            }
            catch (FlowException e)
            {
                caught++;
                Console.WriteLine("caught " + e.Message);
            }

            Console.WriteLine("filters = " + filtersRun + ", finallys = " + finallysRun);
            Console.WriteLine("thrown = " + thrown);
            Console.WriteLine("caught = " + caught);
            return 0;
        }
    }
}
