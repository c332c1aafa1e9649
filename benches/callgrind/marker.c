/*
 * The callgrind marker of `cargo xtask bench gate`: two functions a
 * benchmark workload calls (through P/Invoke) around the part it measures.
 * Under `valgrind --tool=callgrind --instr-atstart=no` nothing is counted
 * until clrprof_callgrind_start turns instrumentation on, and nothing after
 * clrprof_callgrind_stop turns it off again, so the process's total is the
 * measured part alone: start-up and JIT run uninstrumented (several times
 * faster) and do not need to be subtracted. Outside valgrind both are a
 * few no-op instructions (valgrind's client requests).
 */
#include <valgrind/callgrind.h>

__attribute__((visibility("default"))) void clrprof_callgrind_start(void) {
    CALLGRIND_START_INSTRUMENTATION;
}

__attribute__((visibility("default"))) void clrprof_callgrind_stop(void) {
    CALLGRIND_STOP_INSTRUMENTATION;
}
