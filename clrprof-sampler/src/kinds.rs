//! One pprof file per profile kind, for backends that file each profile
//! type apart (Pyroscope, Grafana): the sampler's profile split into a CPU
//! and a wall profile, and the event profiles ([`crate::events`]) as
//! allocation, lock and exception profiles.
//!
//! The same ingest rules as [`crate::pprof`] hold: type names without `-`,
//! no function or location with ID 0, string 0 the empty string; labels
//! `runtime_version` and, for allocations and exceptions, `type` (the
//! class name, at most [`crate::events::MAX_TYPE_LABELS`] distinct values).

use crate::events::{KindProfile, ProfileKind};
use crate::pprof::{Label, PprofProfile, Sample, ValueType};
use crate::pprof_rows::Frames;
use crate::Profile;
use flate2::{write::GzEncoder, Compression};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// gzip-compressed `profile.proto` bytes of `p`.
pub fn gzip_pprof(p: &PprofProfile) -> Vec<u8> {
    let raw = p.encode_to_vec();
    let mut gz = GzEncoder::new(
        Vec::with_capacity(raw.len() / 4 + 64),
        Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(&raw);
    gz.finish().unwrap_or_default()
}

/// The sampler's profile as the pprof of `kind` alone ([`ProfileKind::Cpu`]
/// or [`ProfileKind::Wall`]): only that kind's sample types, samples whose
/// values are all zero dropped. `None` for other kinds, and for CPU when
/// the profile did not measure CPU time.
pub fn sampled_pprof(profile: &Profile, kind: ProfileKind) -> Option<PprofProfile> {
    if !matches!(kind, ProfileKind::Cpu | ProfileKind::Wall)
        || (kind == ProfileKind::Cpu && !profile.cpu_measured())
    {
        return None;
    }
    let mut p = profile.to_pprof();
    let name =
        |p: &PprofProfile, i: i64| p.string_table.get(i as usize).cloned().unwrap_or_default();
    let keep: Vec<usize> = p
        .sample_type
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            let (ty, unit) = (name(&p, t.r#type), name(&p, t.unit));
            kind.sample_types()
                .iter()
                .any(|(a, b)| *a == ty && *b == unit)
        })
        .map(|(i, _)| i)
        .collect();
    p.sample_type = keep.iter().map(|&i| p.sample_type[i].clone()).collect();
    for s in &mut p.sample {
        s.value = keep
            .iter()
            .map(|&i| s.value.get(i).copied().unwrap_or(0))
            .collect();
    }
    p.sample.retain(|s| s.value.iter().any(|&v| v != 0));
    if kind == ProfileKind::Cpu {
        // The CPU profile's period: CPU nanoseconds (one per unit).
        p.period_type = p.sample_type.first().cloned();
    }
    Some(p)
}

/// An event profile as pprof: `kind`'s sample types (see
/// [`ProfileKind::sample_types`]), one sample per (type, stack), leaf
/// first.
pub fn event_pprof(
    profile: &KindProfile,
    kind: ProfileKind,
    runtime: Option<&str>,
    end: SystemTime,
) -> PprofProfile {
    let mut table: Vec<String> = vec![String::new()];
    let mut index: HashMap<String, i64> = HashMap::new();
    index.insert(String::new(), 0);
    let mut s = |v: &str| -> i64 {
        if let Some(&i) = index.get(v) {
            return i;
        }
        let i = table.len() as i64;
        table.push(v.to_string());
        index.insert(v.to_string(), i);
        i
    };
    let types = kind.sample_types();
    let sample_type: Vec<ValueType> = types
        .iter()
        .map(|(t, u)| ValueType {
            r#type: s(t),
            unit: s(u),
        })
        .collect();
    let (type_key, runtime_key) = (s("type"), s("runtime_version"));
    let runtime = runtime.map(&mut s);
    let mut frames = Frames::default();
    let mut sample = Vec::new();
    let mut rows: Vec<_> = profile.rows().collect();
    rows.sort();
    for (ty, stack, values) in rows {
        if stack.is_empty() {
            continue;
        }
        let mut ids = Vec::with_capacity(stack.len());
        for frame in stack.iter().rev() {
            let id = frames.id(frame, &mut s);
            ids.push(id);
        }
        let mut label = Vec::new();
        if let Some(ty) = ty {
            label.push(Label {
                key: type_key,
                str: s(ty),
                ..Default::default()
            });
        }
        if let Some(r) = runtime {
            label.push(Label {
                key: runtime_key,
                str: r,
                ..Default::default()
            });
        }
        let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        sample.push(Sample {
            location_id: ids,
            value: values[..types.len()].iter().map(|&v| to_i64(v)).collect(),
            label,
        });
    }
    let nanos = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    };
    let start = profile.start().unwrap_or(end);
    let comment = vec![s("clrprof event profile")];
    let period_type = sample_type.first().cloned();
    PprofProfile {
        sample_type,
        sample,
        mapping: Vec::new(),
        location: frames.location,
        function: frames.function,
        string_table: table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: nanos(start),
        duration_nanos: nanos(end).saturating_sub(nanos(start)).max(0),
        period_type,
        period: 1,
        comment,
        default_sample_type: 0,
    }
}

/// The file of `kind` beside `output`: `<output>.<kind>.pb.gz`.
pub fn kind_path(output: &std::path::Path, kind: ProfileKind) -> std::path::PathBuf {
    let mut p = output.as_os_str().to_owned();
    p.push(format!(".{}.pb.gz", kind.name()));
    p.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clrprof::ids::RawThreadId;

    #[test]
    fn sampled_split_keeps_one_kind() {
        let mut p = Profile::new();
        let main = p.intern("Main");
        let spin = p.intern("Spin");
        let sleep = p.intern("Sleep");
        p.set_origin(Some("8.0.4"), 10_000_000);
        p.add(RawThreadId(1), &[main, spin], false);
        p.add_cpu(RawThreadId(1), &[main, spin], 9_000_000);
        p.add(RawThreadId(2), &[main, sleep], false);
        let wall = sampled_pprof(&p, ProfileKind::Wall).unwrap();
        let cpu = sampled_pprof(&p, ProfileKind::Cpu).unwrap();
        let ty = |pp: &PprofProfile| -> Vec<String> {
            pp.sample_type
                .iter()
                .map(|t| pp.string_table[t.r#type as usize].clone())
                .collect()
        };
        assert_eq!(ty(&wall), ["samples", "wall"]);
        assert_eq!(ty(&cpu), ["cpu"]);
        assert_eq!(wall.sample.len(), 2);
        // The sleeping thread's sample has no CPU time: dropped.
        assert_eq!(cpu.sample.len(), 1);
        assert_eq!(cpu.sample[0].value, [9_000_000]);
        assert!(sampled_pprof(&p, ProfileKind::Alloc).is_none());
        assert!(!gzip_pprof(&cpu).is_empty());
    }

    #[test]
    fn event_profile_pprof_follows_ingest_rules() {
        let mut k = KindProfile::default();
        k.add(Some("System.Byte[]"), &["Leaf", "Main"], [10, 1000]);
        k.add(Some("Foo"), &["Other", "Main"], [1, 24]);
        let p = event_pprof(&k, ProfileKind::Alloc, Some("8.0.4"), SystemTime::now());
        assert_eq!(p.string_table[0], "");
        assert!(p.function.iter().all(|f| f.id != 0));
        assert!(p.location.iter().all(|l| l.id != 0));
        assert_eq!(p.sample.len(), 2);
        let total: i64 = p.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(total, 1024);
        for s in &p.sample {
            // Leaf first: Main is last.
            let last = *s.location_id.last().unwrap();
            let f = &p.function[(last - 1) as usize];
            assert_eq!(p.string_table[f.name as usize], "Main");
            assert_eq!(s.value.len(), 2);
        }
        let e = event_pprof(&k, ProfileKind::Exception, None, SystemTime::now());
        assert!(e.sample.iter().all(|s| s.value.len() == 1));
    }
}
