//! `clrprof flamegraph PROFILE -o OUT.svg`: renders a profile as an SVG
//! flame graph with the `inferno` crate. PROFILE is any of the sampler's
//! formats (see [`crate::convert`]): folded stacks (`root;...;leaf N` per
//! line), speedscope JSON or pprof (`.pb.gz`); the format is told from the
//! content.

use clrprof_testing::Error;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

/// Renders the profile `folded` (any format) into `out`; `title` defaults
/// to the input's file name.
pub fn run(folded: &Path, out: &Path, title: Option<&str>) -> Result<ExitCode, Error> {
    let (profile, _) = crate::convert::read_profile(folded)?;
    let mut text = Vec::new();
    profile
        .write_folded(&mut text)
        .map_err(|e| Error::new(e.to_string()))?;
    let text = String::from_utf8_lossy(&text);
    if text.lines().all(|l| l.trim().is_empty()) {
        return Err(Error::new(format!(
            "{} has no stacks (expected lines `root;...;leaf N`)",
            folded.display()
        )));
    }
    let svg = render(&text, title.unwrap_or(&folded.display().to_string()))?;
    let file = std::fs::File::create(out)
        .map_err(|e| Error::new(format!("cannot create {}: {e}", out.display())))?;
    let mut w = BufWriter::new(file);
    w.write_all(&svg)
        .and_then(|_| w.flush())
        .map_err(|e| Error::new(format!("cannot write {}: {e}", out.display())))?;
    Ok(ExitCode::SUCCESS)
}

/// The SVG of folded stacks `text`.
pub fn render(text: &str, title: &str) -> Result<Vec<u8>, Error> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, text.lines(), &mut svg)
        .map_err(|e| Error::new(format!("cannot render the flame graph: {e}")))?;
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_frame_of_the_folded_input() {
        let svg = render(
            "Hot.Program::Main;Hot.Program::Work;Hot.Program::Spin 80\nHot.Program::Main;Hot.Program::Work;Hot.Program::Cold 20\n",
            "hot",
        )
        .unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.starts_with("<?xml"));
        for f in [
            "Hot.Program::Main",
            "Hot.Program::Spin",
            "Hot.Program::Cold",
        ] {
            assert!(svg.contains(f), "{f} missing");
        }
        assert!(svg.contains("80 samples"), "counts are shown");
    }

    #[test]
    fn empty_input_is_an_error() {
        let dir = std::env::temp_dir().join(format!("clrprof-fg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("empty.folded");
        std::fs::write(&input, "\n").unwrap();
        let e = run(&input, &dir.join("out.svg"), None).unwrap_err();
        assert!(e.message().contains("has no stacks"), "{e}");
    }
}
