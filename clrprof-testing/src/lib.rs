//! Test CLR profilers against real runtimes.
