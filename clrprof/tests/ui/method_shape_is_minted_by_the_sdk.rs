// Decoding follows pointers, so its inputs come only from the SDK: a shape
// cannot be built by hand from a signature.
use clrprof::elt::args::MethodShape;
use clrprof::signature::MethodSig;

fn forge(sig: &MethodSig) {
    let _ = MethodShape::from_sig(sig);
}

fn main() {}
