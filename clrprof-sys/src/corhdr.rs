//! (to be generated)
