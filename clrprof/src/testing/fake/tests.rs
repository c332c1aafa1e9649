//! Tests of the fake itself.
