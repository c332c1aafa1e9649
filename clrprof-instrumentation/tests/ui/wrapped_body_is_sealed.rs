// Installing a `WrappedBody` is safe because only the wrapping layer makes
// one: the original IL inside the SDK's verified try/finally. Safe code
// cannot make one from bytes of its own (its fields are private and it has
// no constructor but `instrumentation::wrap`), so it cannot install
// arbitrary IL through the safe installers.
use clrprof_instrumentation::WrappedBody;

fn forge<'m>() -> WrappedBody<'m> {
    WrappedBody {
        bytes: vec![0x02, 0x2a],
    }
}

fn main() {}
