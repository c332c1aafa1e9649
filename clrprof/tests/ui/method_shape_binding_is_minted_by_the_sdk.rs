// A shape decodes only the hook calls of the ELT record it is bound to (the
// function's ID and the record's serial number, which a recycled ID does not
// keep): safe code cannot forge a binding, nor rebind a shape, to pass the
// check with a shape of another function.
use clrprof::elt::Binding;
use clrprof::RawFunctionId;

fn forge(function: RawFunctionId) -> Binding {
    Binding {
        function,
        serial: 1,
    }
}

fn main() {}
