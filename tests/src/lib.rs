//! Integration tests of clrprof inside real CLRs (see tests/runtime/).
