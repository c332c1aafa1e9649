//! Raw, 1:1 bindings of the CoreCLR profiling API.
//!
//! Every item mirrors one entity of the runtime's `corprof.idl` (profiling
//! API), `cor.h` (metadata interfaces) or `corhdr.h` (metadata tables and
//! method headers), with the IDL's own names. Nothing here is safe to call
//! without reading the runtime's documentation of that entity; the `clrprof`
//! crate is the safe layer.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
#![allow(clippy::missing_safety_doc)]

pub mod corhdr;
pub mod corprof;
pub mod elt;
pub mod hresults;
pub mod metadata;
pub mod newer;
pub mod types;

pub use corhdr::*;
pub use corprof::*;
pub use hresults::*;
pub use metadata::*;
pub use newer::*;
pub use types::*;
