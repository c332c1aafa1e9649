// References read out of an object are valid only while no GC can start:
// they borrow the scope that read them.
use clrprof::{ObjectId, ProfilerInfo};

struct Graph {
    edges: Vec<ObjectId<'static>>,
}

fn walk(graph: &mut Graph, info: &ProfilerInfo, object: ObjectId<'_>) {
    graph.edges = info.object_references(object).unwrap();
}

fn main() {}
