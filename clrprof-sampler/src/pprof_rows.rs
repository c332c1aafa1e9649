//! A pprof profile from rows of (stack, labels, values): the shape the live
//! heap and heap snapshots write, under the same ingest rules as
//! [`crate::kinds`] (string 0 empty, no function or location with ID 0,
//! type names without `-`).

use crate::pprof::{Function, Label, Line, Location, PprofProfile, Sample, ValueType};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// One sample: its stack (leaf first), its labels and one value per sample
/// type.
pub(crate) struct Row<'a> {
    pub stack_leaf_first: Vec<&'a str>,
    pub labels: Vec<(&'a str, &'a str)>,
    pub values: Vec<i64>,
}

/// The strings of a profile, interned.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut index = HashMap::new();
        index.insert(String::new(), 0);
        Strings {
            table: vec![String::new()],
            index,
        }
    }

    fn get(&mut self, v: &str) -> i64 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }
}

/// A profile's functions and locations: one of each per frame name, the
/// location's ID the function's.
#[derive(Default)]
pub(crate) struct Frames {
    pub(crate) function: Vec<Function>,
    pub(crate) location: Vec<Location>,
    id_of: HashMap<String, u64>,
}

impl Frames {
    /// The location ID of `frame`, made with its function (named by
    /// `intern(frame)`, a string-table index) the first time it is seen.
    pub(crate) fn id(&mut self, frame: &str, intern: impl FnOnce(&str) -> i64) -> u64 {
        if let Some(&id) = self.id_of.get(frame) {
            return id;
        }
        let id = self.location.len() as u64 + 1;
        let name = intern(frame);
        self.function.push(Function {
            id,
            name,
            system_name: name,
            filename: 0,
            start_line: 0,
        });
        self.location.push(Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![Line {
                function_id: id,
                line: 0,
                column: 0,
            }],
            is_folded: false,
        });
        self.id_of.insert(frame.to_string(), id);
        id
    }
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The profile of `rows`, with `types` (type, unit) and `default` the index
/// of the sample type a viewer shows first.
pub(crate) fn build<'a>(
    types: &[(&str, &str)],
    default: usize,
    rows: impl IntoIterator<Item = Row<'a>>,
    comment: &str,
    start: SystemTime,
    end: SystemTime,
) -> PprofProfile {
    let mut s = Strings::new();
    let sample_type: Vec<ValueType> = types
        .iter()
        .map(|(t, u)| ValueType {
            r#type: s.get(t),
            unit: s.get(u),
        })
        .collect();
    let mut frames = Frames::default();
    let mut sample = Vec::new();
    for row in rows {
        let mut ids = Vec::with_capacity(row.stack_leaf_first.len());
        for frame in &row.stack_leaf_first {
            let id = frames.id(frame, |f| s.get(f));
            ids.push(id);
        }
        let label = row
            .labels
            .iter()
            .map(|(k, v)| Label {
                key: s.get(k),
                str: s.get(v),
                ..Default::default()
            })
            .collect();
        let mut values = row.values;
        values.resize(types.len(), 0);
        sample.push(Sample {
            location_id: ids,
            value: values,
            label,
        });
    }
    let comment = vec![s.get(comment)];
    let period_type = sample_type.get(default).cloned();
    let default_sample_type = sample_type.get(default).map_or(0, |t| t.r#type);
    PprofProfile {
        sample_type,
        sample,
        mapping: Vec::new(),
        location: frames.location,
        function: frames.function,
        string_table: s.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: nanos(start),
        duration_nanos: nanos(end).saturating_sub(nanos(start)).max(0),
        period_type,
        period: 1,
        comment,
        default_sample_type,
    }
}
