// An event's fields are typed by its payload: a write with other types
// does not compile.
use clrprof::eventpipe::Event;

fn write(event: &Event<(i32, String)>) {
    event.write(("seven", 7)).unwrap();
}

fn main() {}
