//! jit-tracer: module loads and JIT compilations, as JSON Lines.
