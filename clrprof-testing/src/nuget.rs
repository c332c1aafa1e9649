//! Fetching pinned packages from a NuGet v3 feed, each checked against its
//! SHA-512.
//!
//! The feed is the first HTTP(S) package source of the user's `NuGet.Config`
//! (the file `dotnet restore` reads: `~/.nuget/NuGet/NuGet.Config`, or
//! `%APPDATA%\NuGet\NuGet.Config` on Windows), else the public feed
//! `https://api.nuget.org/v3/index.json`; `$CLRPROF_NUGET_FEED` (a v3 service
//! index URL) overrides both. A v3 feed names its flat container (the
//! `PackageBaseAddress/3.0.0` resource of its service index), from which a
//! package is `<base>/<id>/<version>/<id>.<version>.nupkg`, with the id and
//! version in lower case.
//!
//! Every package is pinned ([`Pin`]): its id, version and the SHA-512 of the
//! `.nupkg` as NuGet prints it (base64). A download is written to a
//! temporary file, hashed while it is written, and renamed into place only
//! when the hash matches; a cached file is hashed again before use. A
//! mismatch is an error naming both hashes, and nothing is kept.

use crate::{Error, Result};
use base64::Engine as _;
use sha2::{Digest, Sha512};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The public NuGet feed's service index.
pub const PUBLIC_FEED: &str = "https://api.nuget.org/v3/index.json";

/// One package at one version, with the SHA-512 of its `.nupkg` (base64, as
/// `nuget.org` and the `.nupkg.sha512` files of the NuGet cache show it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// Package id, e.g. `Microsoft.NETCore.App.Runtime.linux-x64`.
    pub id: &'static str,
    /// Package version, e.g. `10.0.15`.
    pub version: &'static str,
    /// SHA-512 of the `.nupkg`, base64.
    pub sha512: &'static str,
}

impl Pin {
    /// The file name of the package in the download cache.
    pub fn file_name(&self) -> String {
        format!(
            "{}.{}.nupkg",
            self.id.to_ascii_lowercase(),
            self.version.to_ascii_lowercase()
        )
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.id, self.version)
    }
}

/// A NuGet v3 feed: where its service index is, and its flat container.
#[derive(Debug, Clone)]
pub struct Feed {
    /// The service index URL (`.../v3/index.json`).
    pub index: String,
    /// Where the service index came from (for messages): the variable, a
    /// `NuGet.Config` path, or the public default.
    pub source: String,
    agent: ureq::Agent,
    base: std::sync::OnceLock<std::result::Result<String, String>>,
}

impl Feed {
    /// A feed whose service index is `index`.
    pub fn new(index: &str, source: &str) -> Feed {
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(20))
            .timeout_read(Duration::from_secs(60));
        if let Some(tls) = tls_config() {
            builder = builder.tls_config(tls);
        }
        let agent = builder.build();
        Feed {
            index: index.to_string(),
            source: source.to_string(),
            agent,
            base: std::sync::OnceLock::new(),
        }
    }

    /// The feed `dotnet restore` would use here (see the module docs).
    pub fn configured() -> Feed {
        if let Ok(url) = std::env::var("CLRPROF_NUGET_FEED") {
            if !url.trim().is_empty() {
                return Feed::new(url.trim(), "$CLRPROF_NUGET_FEED");
            }
        }
        for config in user_config_paths() {
            let Ok(text) = std::fs::read_to_string(&config) else {
                continue;
            };
            if let Some(url) = first_http_source(&text) {
                return Feed::new(&url, &config.display().to_string());
            }
        }
        Feed::new(
            PUBLIC_FEED,
            "the public NuGet feed (no NuGet.Config names one)",
        )
    }

    /// The flat container's base URL (with a trailing `/`), read once from the
    /// service index.
    pub fn base_address(&self) -> Result<String> {
        self.base
            .get_or_init(|| self.read_base_address())
            .clone()
            .map_err(Error::new)
    }

    fn read_base_address(&self) -> std::result::Result<String, String> {
        println!(
            "provision: NuGet feed {} (from {})",
            self.index, self.source
        );
        let unreachable = |e: &dyn std::fmt::Display| {
            format!(
                "the NuGet feed {} (from {}) cannot be reached: {e}",
                self.index, self.source
            )
        };
        let response = self
            .agent
            .get(&self.index)
            .call()
            .map_err(|e| unreachable(&e))?;
        let text = response.into_string().map_err(|e| unreachable(&e))?;
        let index: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} (from {}) is not a NuGet v3 service index: {e}",
                self.index, self.source
            )
        })?;
        let resources = index["resources"].as_array().ok_or_else(|| {
            format!(
                "{} (from {}) lists no resources: not a NuGet v3 feed",
                self.index, self.source
            )
        })?;
        resources
            .iter()
            .find(|r| {
                r["@type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("PackageBaseAddress/3.0.0"))
            })
            .and_then(|r| r["@id"].as_str())
            .map(|id| {
                if id.ends_with('/') {
                    id.to_string()
                } else {
                    format!("{id}/")
                }
            })
            .ok_or_else(|| {
                format!(
                    "{} (from {}) has no PackageBaseAddress/3.0.0 resource",
                    self.index, self.source
                )
            })
    }

    /// The download URL of `pin`'s `.nupkg`.
    pub fn package_url(&self, pin: &Pin) -> Result<String> {
        let id = pin.id.to_ascii_lowercase();
        let version = pin.version.to_ascii_lowercase();
        Ok(format!(
            "{}{id}/{version}/{id}.{version}.nupkg",
            self.base_address()?
        ))
    }

    /// The versions of `id` the feed serves (its flat container's list).
    pub fn versions(&self, id: &str) -> Result<Vec<String>> {
        let url = format!(
            "{}{}/index.json",
            self.base_address()?,
            id.to_ascii_lowercase()
        );
        let text = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| Error::new(format!("{url}: {e}")))?
            .into_string()
            .map_err(|e| Error::new(format!("{url}: {e}")))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::new(format!("{url}: not a version list: {e}")))?;
        Ok(v["versions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `pin`'s `.nupkg` in `downloads`, downloaded (once) and checked against
    /// its SHA-512 (every time). `progress` is told the bytes as they arrive.
    pub fn fetch(&self, pin: &Pin, downloads: &Path, progress: &dyn Progress) -> Result<PathBuf> {
        let path = downloads.join(pin.file_name());
        if path.is_file() {
            match sha512_of_file(&path) {
                Ok(hash) if hash == pin.sha512 => return Ok(path),
                // A partial or altered file: fetched again below.
                _ => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        std::fs::create_dir_all(downloads)
            .map_err(|e| Error::new(format!("{}: {e}", downloads.display())))?;
        let url = self.package_url(pin)?;
        let response = match self.agent.get(&url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(404, _)) => {
                return Err(Error::new(format!(
                    "the NuGet feed {} (from {}) does not serve {pin} (HTTP 404 for {url}){}",
                    self.index,
                    self.source,
                    self.versions(pin.id)
                        .ok()
                        .filter(|v| !v.is_empty())
                        .map(|v| format!("; it serves {}", v.join(", ")))
                        .unwrap_or_default()
                )))
            }
            Err(e) => {
                return Err(Error::new(format!(
                    "downloading {pin} from {url} failed: {e}"
                )))
            }
        };
        let length = response
            .header("Content-Length")
            .and_then(|l| l.parse::<u64>().ok());
        progress.start(pin, length);
        let tmp = downloads.join(format!(
            "{}.{}.part",
            pin.file_name(),
            crate::unique_suffix()
        ));
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)
                .map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
            let mut reader = response.into_reader();
            let mut hasher = Sha512::new();
            let mut buf = vec![0u8; 1 << 16];
            let mut total = 0u64;
            loop {
                let n = reader
                    .read(&mut buf)
                    .map_err(|e| Error::new(format!("downloading {pin} from {url}: {e}")))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])
                    .map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
                total += n as u64;
                progress.advance(total);
            }
            file.sync_all()
                .map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
            let hash = base64::engine::general_purpose::STANDARD.encode(hasher.finalize());
            check_hash(pin, &hash, &url)?;
            std::fs::rename(&tmp, &path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
        })();
        progress.finish(pin, result.is_ok());
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map(|()| path)
    }
}

/// TLS trusting Mozilla's roots and the system's (a feed reached through a
/// company's TLS-inspecting proxy is signed by a root only the system's
/// store has). `None` when rustls cannot be set up (ureq's default is used).
fn tls_config() -> Option<std::sync::Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    // Unreadable stores and certificates rustls cannot parse are skipped:
    // Mozilla's roots still apply.
    let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(std::sync::Arc::new(config))
}

/// Compares a computed hash with the pin's.
pub fn check_hash(pin: &Pin, actual: &str, from: &str) -> Result<()> {
    if actual == pin.sha512 {
        return Ok(());
    }
    Err(Error::new(format!(
        "{pin} from {from} has SHA-512 {actual}, but {} is pinned; the package was not used \
         (a changed or corrupted package, or a feed serving something else under that name)",
        pin.sha512
    )))
}

/// The SHA-512 of a file, base64.
pub fn sha512_of_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    let mut hasher = Sha512::new();
    std::io::copy(&mut file, &mut hasher)
        .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(hasher.finalize()))
}

/// Told how a download goes (a progress bar, or nothing).
pub trait Progress {
    /// A download of `pin` starts; `length` is its size when the feed says it.
    fn start(&self, pin: &Pin, length: Option<u64>);
    /// `bytes` have arrived so far.
    fn advance(&self, bytes: u64);
    /// The download ended, checked (`ok`) or not.
    fn finish(&self, pin: &Pin, ok: bool);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: &Pin, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn finish(&self, _: &Pin, _: bool) {}
}

/// The user-level `NuGet.Config` files, most specific first.
fn user_config_paths() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if cfg!(windows) {
        if let Some(appdata) = std::env::var_os("APPDATA") {
            paths.push(PathBuf::from(appdata).join("NuGet").join("NuGet.Config"));
        }
    } else if let Some(home) = std::env::var_os("HOME") {
        let dir = PathBuf::from(home).join(".nuget").join("NuGet");
        // The file name is case-sensitive here; NuGet writes `NuGet.Config`.
        paths.push(dir.join("NuGet.Config"));
        paths.push(dir.join("nuget.config"));
    }
    paths
}

/// The first `<add value="http...">` under `<packageSources>` of a
/// `NuGet.Config`, skipping sources a `<disabledPackageSources>` entry turns off.
/// Version-2 feeds (no `index.json`) are skipped: they have no flat container.
pub fn first_http_source(config: &str) -> Option<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(config);
    let mut section = String::new();
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut disabled: Vec<String> = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                section = String::from_utf8_lossy(e.name().as_ref()).to_string();
            }
            Ok(Event::End(_)) => section.clear(),
            Ok(Event::Empty(e)) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).to_string();
                let attr = |wanted: &str| {
                    e.attributes().flatten().find_map(|a| {
                        (a.key.as_ref() == wanted.as_bytes())
                            .then(|| String::from_utf8_lossy(&a.value).to_string())
                    })
                };
                match (section.as_str(), name.as_str()) {
                    ("packageSources", "clear") => sources.clear(),
                    ("packageSources", "add") => {
                        if let (Some(k), Some(v)) = (attr("key"), attr("value")) {
                            sources.push((k, v));
                        }
                    }
                    ("disabledPackageSources", "add")
                        if attr("value").is_some_and(|v| v.eq_ignore_ascii_case("true")) =>
                    {
                        disabled.extend(attr("key"));
                    }
                    _ => {}
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    sources
        .into_iter()
        .filter(|(k, _)| !disabled.contains(k))
        .map(|(_, v)| v)
        .find(|v| {
            (v.starts_with("https://") || v.starts_with("http://")) && v.ends_with("index.json")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_sources_in_order_disabled_and_v2_skipped() {
        let config = r#"<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <packageSources>
    <clear />
    <add key="local" value="/opt/packages" />
    <add key="v2" value="https://example.org/api/v2" />
    <add key="off" value="https://off.example.org/v3/index.json" />
    <add key="mirror" value="https://mirror.example.org/v3/index.json" protocolVersion="3" />
    <add key="nuget.org" value="https://api.nuget.org/v3/index.json" />
  </packageSources>
  <disabledPackageSources>
    <add key="off" value="true" />
  </disabledPackageSources>
</configuration>"#;
        assert_eq!(
            first_http_source(config).as_deref(),
            Some("https://mirror.example.org/v3/index.json")
        );
        assert_eq!(first_http_source("<configuration/>"), None);
        assert_eq!(first_http_source("not xml at all <<<"), None);
    }

    #[test]
    fn a_wrong_hash_names_both() {
        let pin = Pin {
            id: "Some.Package",
            version: "1.0.0",
            sha512: "pinned==",
        };
        let e = check_hash(&pin, "actual==", "a file")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Some.Package 1.0.0") && e.contains("actual==") && e.contains("pinned=="),
            "{e}"
        );
        assert!(check_hash(&pin, "pinned==", "x").is_ok());
        assert_eq!(pin.file_name(), "some.package.1.0.0.nupkg");
    }

    #[test]
    fn file_hash_is_nugets_base64_sha512() {
        let dir = std::env::temp_dir().join(format!("clrprof-nuget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("abc");
        std::fs::write(&f, b"abc").unwrap();
        // SHA-512("abc") from FIPS 180-2, appendix C.1, in base64.
        assert_eq!(
            sha512_of_file(&f).unwrap(),
            "3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw=="
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A feed on a local server: its service index names the flat
    /// container; one package is served with the bytes its pin's hash
    /// describes, one with other bytes, and one version is not served.
    fn local_feed() -> (crate::http::TestServer, Pin, Pin, Pin) {
        use crate::http::{Response, TestServer};
        let good: &'static [u8] = b"the package's bytes";
        let sha = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(Sha512::digest(b));
        let good_pin = Pin {
            id: "Test.Package",
            version: "1.0.0",
            sha512: Box::leak(sha(good).into_boxed_str()),
        };
        let tampered_pin = Pin {
            id: "Test.Package",
            version: "2.0.0",
            sha512: Box::leak(sha(b"what was pinned").into_boxed_str()),
        };
        let missing_pin = Pin {
            id: "Test.Package",
            version: "9.9.9",
            sha512: good_pin.sha512,
        };
        let server = TestServer::start(move |r| {
            let base = r.header("host").map(|h| format!("http://{h}/flat/")).unwrap_or_default();
            match r.target() {
                "/v3/index.json" => Response::new(
                    200,
                    format!(
                        r#"{{"version":"3.0.0","resources":[{{"@id":"{base}","@type":"PackageBaseAddress/3.0.0"}}]}}"#
                    ),
                ),
                "/flat/test.package/index.json" => {
                    Response::new(200, r#"{"versions":["1.0.0","2.0.0"]}"#)
                }
                "/flat/test.package/1.0.0/test.package.1.0.0.nupkg" => Response::new(200, good),
                "/flat/test.package/2.0.0/test.package.2.0.0.nupkg" => {
                    Response::new(200, b"something else".to_vec())
                }
                _ => Response::new(404, ""),
            }
        })
        .unwrap();
        (server, good_pin, tampered_pin, missing_pin)
    }

    #[test]
    fn a_pinned_package_is_fetched_checked_and_reused() {
        let (server, good, tampered, missing) = local_feed();
        let feed = Feed::new(&format!("{}/v3/index.json", server.url()), "a test");
        let dir = std::env::temp_dir().join(format!("clrprof-nuget-feed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);

        let path = feed.fetch(&good, &dir, &Quiet).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"the package's bytes");
        let downloads = |s: &crate::http::TestServer| {
            s.requests()
                .iter()
                .filter(|r| r.target().ends_with(".nupkg"))
                .count()
        };
        assert_eq!(downloads(&server), 1);
        // Cached and still matching: not downloaded again.
        feed.fetch(&good, &dir, &Quiet).unwrap();
        assert_eq!(downloads(&server), 1);
        // Altered on disk: downloaded again.
        std::fs::write(&path, b"corrupted").unwrap();
        feed.fetch(&good, &dir, &Quiet).unwrap();
        assert_eq!(downloads(&server), 2);

        // A package whose bytes are not the pinned ones is refused, and
        // nothing of it is kept.
        let e = feed.fetch(&tampered, &dir, &Quiet).unwrap_err().to_string();
        assert!(
            e.contains("Test.Package 2.0.0")
                && e.contains(tampered.sha512)
                && e.contains("was not used"),
            "{e}"
        );
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(good.file_name())]);

        // A version the feed does not serve: named, with what it serves.
        let e = feed.fetch(&missing, &dir, &Quiet).unwrap_err().to_string();
        assert!(
            e.contains("does not serve Test.Package 9.9.9") && e.contains("it serves 1.0.0, 2.0.0"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An unreachable feed is an error that names the feed (a port nothing listens on).
    #[test]
    fn an_unreachable_feed_is_named() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let feed = Feed::new(&format!("http://127.0.0.1:{port}/v3/index.json"), "a test");
        let e = feed.base_address().unwrap_err().to_string();
        assert!(
            e.contains("cannot be reached") && e.contains(&port.to_string()),
            "{e}"
        );
    }
}
