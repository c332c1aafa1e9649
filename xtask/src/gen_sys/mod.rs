//! `cargo xtask` command module (to be filled in).

pub fn main(_args: &[String]) -> crate::Result {
    Err("not implemented yet".into())
}
