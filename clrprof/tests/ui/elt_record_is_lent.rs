// ELT records are freed when their function's module unloads: they are only
// lent, for a hook call or a closure, never handed out for keeps.
use clrprof::elt::{EltHooks, EltRuntime, Hooked};

fn keep<H: EltHooks>(runtime: &EltRuntime<H>, kept: &mut Vec<&'static Hooked<H::Function>>) {
    let _ = runtime.for_each_function(|f| kept.push(f));
}

fn main() {}
