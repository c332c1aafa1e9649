//! Reading and converting the sampler's three profile formats:
//!
//! * folded stacks (`root;...;leaf N` per line; `clrprof flamegraph`'s and
//!   inferno's/FlameGraph's input),
//! * speedscope JSON (`https://www.speedscope.app/file-format-schema.json`,
//!   `sampled` profiles),
//! * pprof (`profile.proto`, gzip-compressed or not; `go tool pprof`,
//!   Pyroscope, Parca).
//!
//! `clrprof convert IN -o OUT [--to FORMAT]` reads any of them and writes
//! any of them. A heap snapshot (`clrprof heap`'s JSON) reads as one stack
//! per type weighing its bytes: folded and speedscope from that, pprof as
//! the snapshot's own (objects and bytes per type).

use clap::ValueEnum;
use clrprof::RawThreadId;
use clrprof_sampler::Profile;
use clrprof_testing::Error;
use std::path::Path;
use std::process::ExitCode;

/// A profile format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Folded stacks, `root;...;leaf N` per line.
    Folded,
    /// speedscope JSON.
    Speedscope,
    /// pprof, gzip-compressed profile.proto.
    Pprof,
}

impl Format {
    /// The format a file name suggests: `.pb.gz`, `.pb`, `.pprof` → pprof,
    /// `.json` → speedscope, anything else → folded.
    pub fn from_name(path: &Path) -> Format {
        let name = path.to_string_lossy().to_lowercase();
        if name.ends_with(".pb.gz") || name.ends_with(".pb") || name.ends_with(".pprof") {
            Format::Pprof
        } else if name.ends_with(".json") {
            Format::Speedscope
        } else {
            Format::Folded
        }
    }

    /// The format of `bytes`: gzip or binary → pprof, a JSON object →
    /// speedscope, text → folded.
    pub fn sniff(bytes: &[u8]) -> Format {
        if bytes.starts_with(&[0x1f, 0x8b]) || std::str::from_utf8(bytes).is_err() {
            Format::Pprof
        } else if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            Format::Speedscope
        } else {
            Format::Folded
        }
    }
}

/// Reads a profile in any of the three formats (detected from the content).
pub fn read_profile(path: &Path) -> Result<(Profile, Format), Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::new(format!("cannot read {}: {e}", path.display())))?;
    let format = Format::sniff(&bytes);
    let what = |e: String| Error::new(format!("{}: {e}", path.display()));
    let text = String::from_utf8_lossy(&bytes);
    if format == Format::Speedscope && crate::heap::is_snapshot(&text) {
        let snapshot = crate::heap::read_snapshot(&text).map_err(what)?;
        let profile =
            Profile::from_folded(&crate::heap::snapshot_folded(&snapshot)).map_err(what)?;
        return Ok((profile, Format::Folded));
    }
    let profile = match format {
        Format::Pprof => Profile::from_pprof(&bytes).map_err(what)?,
        Format::Speedscope => from_speedscope(&String::from_utf8_lossy(&bytes)).map_err(what)?,
        Format::Folded => Profile::from_folded(&String::from_utf8_lossy(&bytes)).map_err(what)?,
    };
    Ok((profile, format))
}

/// A speedscope file's `sampled` profiles (one per thread) as a profile.
pub fn from_speedscope(text: &str) -> Result<Profile, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let frames = v["shared"]["frames"]
        .as_array()
        .ok_or("not a speedscope file (no shared.frames)")?;
    let mut p = Profile::new();
    let index: Vec<u32> = frames
        .iter()
        .map(|f| p.intern(f["name"].as_str().unwrap_or("?")))
        .collect();
    let profiles = v["profiles"].as_array().ok_or("no profiles")?;
    let mut stack = Vec::new();
    for (t, prof) in profiles.iter().enumerate() {
        if prof["type"] != "sampled" {
            return Err(format!(
                "profile {t} is {}, only sampled profiles are read",
                prof["type"]
            ));
        }
        let samples = prof["samples"]
            .as_array()
            .ok_or("sampled profile without samples")?;
        let weights = prof["weights"].as_array();
        for (k, s) in samples.iter().enumerate() {
            stack.clear();
            for f in s.as_array().ok_or("a sample is not an array")? {
                let f = f.as_u64().ok_or("a frame index is not a number")? as usize;
                stack.push(*index.get(f).ok_or("a frame index is out of range")?);
            }
            let n = weights
                .and_then(|w| w.get(k))
                .and_then(|w| w.as_f64())
                .unwrap_or(1.0)
                .max(0.0) as u64;
            p.add_n(RawThreadId(t), &stack, n, false);
        }
    }
    Ok(p)
}

/// Writes `profile` to `out` in `format`.
pub fn write_profile(profile: &Profile, format: Format, out: &Path) -> Result<(), Error> {
    let mut bytes = Vec::new();
    let written = match format {
        Format::Folded => profile.write_folded(&mut bytes),
        Format::Speedscope => profile.write_speedscope("clrprof", &mut bytes),
        Format::Pprof => profile.write_pprof(&mut bytes),
    };
    written
        .and_then(|_| std::fs::write(out, bytes))
        .map_err(|e| Error::new(format!("cannot write {}: {e}", out.display())))
}

/// `clrprof convert`.
pub fn run(input: &Path, out: &Path, to: Option<Format>) -> Result<ExitCode, Error> {
    let to = to.unwrap_or_else(|| Format::from_name(out));
    if let Some(snapshot) = std::fs::read_to_string(input)
        .ok()
        .filter(|t| crate::heap::is_snapshot(t))
    {
        let snapshot = crate::heap::read_snapshot(&snapshot)
            .map_err(|e| Error::new(format!("{}: {e}", input.display())))?;
        if to == Format::Pprof {
            std::fs::write(
                out,
                clrprof_sampler::kinds::gzip_pprof(&snapshot.to_pprof()),
            )
            .map_err(|e| Error::new(format!("cannot write {}: {e}", out.display())))?;
            eprintln!(
                "{} (heap snapshot, {} types) -> {} ({to:?})",
                input.display(),
                snapshot.types.len(),
                out.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
    let (profile, from) = read_profile(input)?;
    write_profile(&profile, to, out)?;
    eprintln!(
        "{} ({from:?}, {} samples) -> {} ({to:?})",
        input.display(),
        profile.samples(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOLDED: &str = "Hot.Program::Main;Hot.Program::Work;Hot.Program::Cold 20\nHot.Program::Main;Hot.Program::Work;Hot.Program::Spin 80\n";

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("clrprof-convert-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn folded_to_pprof_to_speedscope_to_folded_is_identity() {
        let d = dir();
        let (a, b, c, e) = (
            d.join("a.folded"),
            d.join("b.pb.gz"),
            d.join("c.json"),
            d.join("e.folded"),
        );
        std::fs::write(&a, FOLDED).unwrap();
        run(&a, &b, None).unwrap();
        assert_eq!(&std::fs::read(&b).unwrap()[..2], &[0x1f, 0x8b]);
        run(&b, &c, None).unwrap();
        run(&c, &e, None).unwrap();
        assert_eq!(std::fs::read_to_string(&e).unwrap(), FOLDED);
    }

    #[test]
    fn a_heap_snapshot_converts_by_type() {
        let d = dir();
        let (a, b, c) = (d.join("s.json"), d.join("s.folded"), d.join("s.pb.gz"));
        let json = r#"{"format":"clrprof-heap-snapshot","version":1,"runtime":"10.0.15","method":"enumerate-gc-heap-objects","taken_at_ms":1,"duration_ms":2.0,"objects":3,"bytes":300,"unnamed":0,"types":[
{"type":"Node","objects":2,"bytes":200},
{"type":"System.String","objects":1,"bytes":100}
]}"#;
        std::fs::write(&a, json).unwrap();
        run(&a, &b, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&b).unwrap(),
            "Node 200
System.String 100
"
        );
        run(&a, &c, None).unwrap();
        // The snapshot's own pprof: its first value is the objects.
        let p = Profile::from_pprof(&std::fs::read(&c).unwrap()).unwrap();
        assert_eq!(p.samples(), 3);
    }

    #[test]
    fn sniffs_the_three_formats() {
        assert_eq!(Format::sniff(b"\x1f\x8b\x08"), Format::Pprof);
        assert_eq!(
            Format::sniff(b"\x0a\x04\x08\x01\x10\x02\xff"),
            Format::Pprof
        );
        assert_eq!(Format::sniff(b"  {\"shared\":{}}"), Format::Speedscope);
        assert_eq!(Format::sniff(b"a;b 1\n"), Format::Folded);
    }
}
