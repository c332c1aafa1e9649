//! Provisioning against a feed that serves nothing useful: every leg is
//! recorded as unusable with a reason that names the leg's package and the
//! feed, nothing is assembled, and the manifest is still written (the
//! harness then reports each leg with that reason). One test per binary:
//! it sets the process's environment.

use clrprof_testing::http::{Response, TestServer};
use clrprof_testing::provision::{provision, Options};
use clrprof_testing::runtime_pack::LEG_PACKS;

fn cache(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn unreachable_feeds_and_missing_versions_name_every_leg() {
    // No compiler from an installed SDK or Mono: only what the feed gives.
    std::env::set_var("PATH", "/nonexistent");
    std::env::remove_var("DOTNET_ROOT");

    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let index = format!("http://127.0.0.1:{port}/v3/index.json");
    std::env::set_var("CLRPROF_NUGET_FEED", &index);
    let options = Options {
        strict: false,
        toolchains: false,
    };
    let m = provision(&cache("provision-unreachable"), &options).unwrap();
    assert!(m.legs.is_empty(), "{:?}", m.legs);
    for pack in &LEG_PACKS {
        let u = m
            .unusable
            .iter()
            .find(|u| u.name == pack.name)
            .unwrap_or_else(|| panic!("{} not reported: {:?}", pack.name, m.unusable));
        assert!(
            u.reason.contains("cannot be reached") && u.reason.contains(&index),
            "{}: {}",
            pack.name,
            u.reason
        );
    }
    // Strict mode: the same, as an error naming the legs.
    let strict = Options {
        strict: true,
        toolchains: false,
    };
    let e = provision(&cache("provision-unreachable-strict"), &strict)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("linux-x64-10.0: ") && e.contains("win-x64-8.0: "),
        "{e}"
    );

    // A feed that answers, but serves none of the pinned versions.
    let server = TestServer::start(|r| {
        let base = r
            .header("host")
            .map(|h| format!("http://{h}/flat/"))
            .unwrap_or_default();
        match r.target() {
            "/v3/index.json" => Response::new(
                200,
                format!(
                    r#"{{"resources":[{{"@id":"{base}","@type":"PackageBaseAddress/3.0.0"}}]}}"#
                ),
            ),
            t if t.ends_with("/index.json") => Response::new(200, r#"{"versions":["1.0.0"]}"#),
            _ => Response::new(404, ""),
        }
    })
    .unwrap();
    std::env::set_var(
        "CLRPROF_NUGET_FEED",
        format!("{}/v3/index.json", server.url()),
    );
    let m = provision(&cache("provision-missing"), &options).unwrap();
    for pack in &LEG_PACKS {
        let u = m.unusable.iter().find(|u| u.name == pack.name).unwrap();
        let want = format!("does not serve {}", pack.runtime);
        assert!(
            u.reason.contains(&want) && u.reason.contains("it serves 1.0.0"),
            "{}: {}",
            pack.name,
            u.reason
        );
    }
}
