//! Write CLR profilers in safe Rust.
