// The readers follow a string layout into objects: only the runtime's
// answer (GetStringLayout2) makes one.
use clrprof::info::StringLayout2;

fn forge() -> StringLayout2 {
    StringLayout2 {
        string_length_offset: 8,
        buffer_offset: 12,
    }
}

fn main() {}
