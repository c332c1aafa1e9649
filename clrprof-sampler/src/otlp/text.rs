//! Test support: an OTLP request written the way `protoc --decode` prints
//! a message (protobuf text format: fields in declaration order, proto3
//! fields left out at their default value, strings and bytes C-escaped), so
//! that a request decoded by the SDK's own types can be compared with what
//! `protoc` printed of the same bytes
//! (`tests/data/otlp-request.protoc.txt`).

use super::proto::*;
use std::fmt::Write as _;

struct Out {
    s: String,
    depth: usize,
}

impl Out {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.s.push_str("  ");
        }
        self.s.push_str(text);
        self.s.push('\n');
    }
    fn num(&mut self, name: &str, v: impl std::fmt::Display + PartialEq + Default) {
        if v != Default::default() {
            self.line(&format!("{name}: {v}"));
        }
    }
    fn string(&mut self, name: &str, v: &str) {
        if !v.is_empty() {
            self.line(&format!("{name}: \"{}\"", escape(v.as_bytes())));
        }
    }
    fn bytes(&mut self, name: &str, v: &[u8]) {
        if !v.is_empty() {
            self.line(&format!("{name}: \"{}\"", escape(v)));
        }
    }
    fn message(&mut self, name: &str, f: impl FnOnce(&mut Out)) {
        self.line(&format!("{name} {{"));
        self.depth += 1;
        f(self);
        self.depth -= 1;
        self.line("}");
    }
}

/// C escapes as protobuf's text format writes them: printable ASCII as it
/// is, `\n \r \t \" \' \\`, other bytes as three octal digits.
fn escape(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        match c {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'"' => s.push_str("\\\""),
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\{c:03o}");
            }
        }
    }
    s
}

fn any_value(o: &mut Out, name: &str, v: &AnyValue) {
    o.message(name, |o| match &v.value {
        Some(Value::StringValue(s)) => {
            o.line(&format!("string_value: \"{}\"", escape(s.as_bytes())))
        }
        Some(Value::BoolValue(b)) => o.line(&format!("bool_value: {b}")),
        Some(Value::IntValue(i)) => o.line(&format!("int_value: {i}")),
        Some(Value::DoubleValue(d)) => o.line(&format!("double_value: {d}")),
        Some(Value::BytesValue(b)) => o.line(&format!("bytes_value: \"{}\"", escape(b))),
        None => {}
    });
}

fn value_type(o: &mut Out, name: &str, v: &ValueType) {
    o.message(name, |o| {
        o.num("type_strindex", v.type_strindex);
        o.num("unit_strindex", v.unit_strindex);
    });
}

/// `r` in protobuf's text format, as `protoc --decode` prints it.
pub fn request(r: &ExportProfilesServiceRequest) -> String {
    let mut o = Out {
        s: String::new(),
        depth: 0,
    };
    for rp in &r.resource_profiles {
        o.message("resource_profiles", |o| {
            if let Some(res) = &rp.resource {
                o.message("resource", |o| {
                    for a in &res.attributes {
                        o.message("attributes", |o| {
                            o.string("key", &a.key);
                            if let Some(v) = &a.value {
                                any_value(o, "value", v);
                            }
                        });
                    }
                    o.num("dropped_attributes_count", res.dropped_attributes_count);
                });
            }
            for sp in &rp.scope_profiles {
                o.message("scope_profiles", |o| {
                    if let Some(scope) = &sp.scope {
                        o.message("scope", |o| {
                            o.string("name", &scope.name);
                            o.string("version", &scope.version);
                        });
                    }
                    for p in &sp.profiles {
                        o.message("profiles", |o| {
                            if let Some(t) = &p.sample_type {
                                value_type(o, "sample_type", t);
                            }
                            for s in &p.samples {
                                o.message("samples", |o| {
                                    o.num("stack_index", s.stack_index);
                                    for a in &s.attribute_indices {
                                        o.line(&format!("attribute_indices: {a}"));
                                    }
                                    o.num("link_index", s.link_index);
                                    for v in &s.values {
                                        o.line(&format!("values: {v}"));
                                    }
                                    for t in &s.timestamps_unix_nano {
                                        o.line(&format!("timestamps_unix_nano: {t}"));
                                    }
                                });
                            }
                            o.num("time_unix_nano", p.time_unix_nano);
                            o.num("duration_nano", p.duration_nano);
                            if let Some(t) = &p.period_type {
                                value_type(o, "period_type", t);
                            }
                            o.num("period", p.period);
                            o.bytes("profile_id", &p.profile_id);
                            o.num("dropped_attributes_count", p.dropped_attributes_count);
                            for a in &p.attribute_indices {
                                o.line(&format!("attribute_indices: {a}"));
                            }
                        });
                    }
                    o.string("schema_url", &sp.schema_url);
                });
            }
            o.string("schema_url", &rp.schema_url);
        });
    }
    if let Some(d) = &r.dictionary {
        o.message("dictionary", |o| {
            for m in &d.mapping_table {
                o.message("mapping_table", |o| {
                    o.num("memory_start", m.memory_start);
                    o.num("memory_limit", m.memory_limit);
                    o.num("file_offset", m.file_offset);
                    o.num("filename_strindex", m.filename_strindex);
                    for a in &m.attribute_indices {
                        o.line(&format!("attribute_indices: {a}"));
                    }
                });
            }
            for l in &d.location_table {
                o.message("location_table", |o| {
                    o.num("mapping_index", l.mapping_index);
                    o.num("address", l.address);
                    for line in &l.lines {
                        o.message("lines", |o| {
                            o.num("function_index", line.function_index);
                            o.num("line", line.line);
                            o.num("column", line.column);
                        });
                    }
                    for a in &l.attribute_indices {
                        o.line(&format!("attribute_indices: {a}"));
                    }
                });
            }
            for f in &d.function_table {
                o.message("function_table", |o| {
                    o.num("name_strindex", f.name_strindex);
                    o.num("system_name_strindex", f.system_name_strindex);
                    o.num("filename_strindex", f.filename_strindex);
                    o.num("start_line", f.start_line);
                });
            }
            for l in &d.link_table {
                o.message("link_table", |o| {
                    o.bytes("trace_id", &l.trace_id);
                    o.bytes("span_id", &l.span_id);
                });
            }
            for s in &d.string_table {
                o.line(&format!("string_table: \"{}\"", escape(s.as_bytes())));
            }
            for a in &d.attribute_table {
                o.message("attribute_table", |o| {
                    o.num("key_strindex", a.key_strindex);
                    if let Some(v) = &a.value {
                        any_value(o, "value", v);
                    }
                    o.num("unit_strindex", a.unit_strindex);
                });
            }
            for s in &d.stack_table {
                o.message("stack_table", |o| {
                    for l in &s.location_indices {
                        o.line(&format!("location_indices: {l}"));
                    }
                });
            }
        });
    }
    o.s
}
