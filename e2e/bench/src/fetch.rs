//! Peers built from source registries into the cache: boringtun-cli with `cargo install` from
//! crates.io, and the latest wireguard-go with `go install` from the Go module proxy.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::{
    BenchError,
    tooling::{BORINGTUN_VERSION, WGGO_MODULE, install_err, run_logged, which},
};

fn cargo() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/cargo"));
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| which("cargo"))
        .or_else(|| home.filter(|p| p.is_file()))
        .or_else(|| Some(PathBuf::from("/root/.cargo/bin/cargo")).filter(|p| p.is_file()))
}

pub(super) fn boringtun(cache: &Path, skip: bool) -> Result<(PathBuf, String), BenchError> {
    let bin = cache.join("bin/boringtun-cli");
    if bin.is_file() {
        return Ok((bin, "present".into()));
    }
    if skip {
        return Err(BenchError::Missing {
            what: "boringtun-cli".into(),
            path: bin.display().to_string(),
        });
    }
    let what = format!("boringtun-cli {BORINGTUN_VERSION}");
    let cargo =
        cargo().ok_or_else(|| install_err(&what, "no cargo in $CARGO, $PATH or ~/.cargo/bin"))?;
    eprintln!("bench: building {what} with cargo install from crates.io (about a minute) ...");
    run_logged(
        &format!("{what} from crates.io"),
        Command::new(cargo)
            .args([
                "install",
                "boringtun-cli",
                "--version",
                BORINGTUN_VERSION,
                "--locked",
                "--root",
            ])
            .arg(cache),
        &cache.join("boringtun-install.log"),
    )?;
    Ok((bin, "built with cargo install".into()))
}

fn go() -> Option<PathBuf> {
    which("go").or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file()))
}

fn go_command(go: &Path, cache: &Path) -> Command {
    let mut c = Command::new(go);
    c.current_dir(cache)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false -modcacherw")
        .env("GOPATH", cache.join("go"))
        .env("GOCACHE", cache.join("go-build"));
    c
}

/// The newest wireguard-go already built in the cache (pseudo-versions sort by date).
fn newest_cached_wggo(cache: &Path) -> Option<(PathBuf, String)> {
    let mut found: Vec<(String, PathBuf)> = fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_prefix("wggo-")?.to_owned();
            let bin = e.path().join("wireguard");
            bin.is_file().then_some((name, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(v, b)| (b, v))
}

/// Why `@latest` of the module could not be resolved.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    /// `go` did not start.
    #[error("running {}: {source}", go.display())]
    Run {
        /// The toolchain.
        go: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `go list` failed; its stderr, trimmed.
    #[error("{0}")]
    Failed(String),
    /// `go list` printed something else than JSON.
    #[error("go list printed bad JSON: {0}")]
    BadJson(#[source] serde_json::Error),
    /// The JSON has no `Version`.
    #[error("go list printed no Version")]
    NoVersion,
}

/// Resolves `@latest` of the module (a pseudo-version: the module has no tags).
fn resolve_latest(go: &Path, cache: &Path) -> Result<String, ResolveError> {
    let out = go_command(go, cache)
        .args(["list", "-m", "-json", &format!("{WGGO_MODULE}@latest")])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| ResolveError::Run {
            go: go.to_owned(),
            source,
        })?;
    if !out.status.success() {
        return Err(ResolveError::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(ResolveError::BadJson)?;
    v["Version"]
        .as_str()
        .map(str::to_owned)
        .ok_or(ResolveError::NoVersion)
}

pub(super) fn wggo_latest(
    cache: &Path,
    skip: bool,
) -> Result<((PathBuf, String), String), BenchError> {
    const WHAT: &str = "wireguard-go latest";
    if skip {
        return newest_cached_wggo(cache)
            .map(|found| (found, "present".into()))
            .ok_or_else(|| BenchError::Missing {
                what: "wireguard-go built from the Go module proxy".into(),
                path: cache.join("wggo-<version>/wireguard").display().to_string(),
            });
    }
    let go = go().ok_or_else(|| {
        install_err(
            WHAT,
            "no Go toolchain (go) in $PATH or /usr/local/go/bin; install Go >= 1.23",
        )
    })?;
    let version = match resolve_latest(&go, cache) {
        Ok(v) => v,
        Err(e) => {
            if let Some(found) = newest_cached_wggo(cache) {
                eprintln!(
                    "bench: cannot resolve {WGGO_MODULE}@latest ({e}); using the cached {}",
                    found.1
                );
                return Ok((found, "cached (latest not resolved)".into()));
            }
            return Err(install_err(
                WHAT,
                format!("cannot resolve {WGGO_MODULE}@latest on the Go module proxy: {e}"),
            ));
        }
    };
    let dir = cache.join(format!("wggo-{version}"));
    let bin = dir.join("wireguard");
    if bin.is_file() {
        return Ok(((bin, version), "present".into()));
    }
    eprintln!("bench: building {WGGO_MODULE}@{version} with go install ...");
    run_logged(
        &format!("{WGGO_MODULE}@{version}"),
        go_command(&go, cache)
            .env("GOBIN", &dir)
            .args(["install", &format!("{WGGO_MODULE}@{version}")]),
        &cache.join("wggo-install.log"),
    )?;
    if !bin.is_file() {
        return Err(install_err(
            WHAT,
            format!("go install left no {}", bin.display()),
        ));
    }
    let action = format!("built {version} with go install");
    Ok(((bin, version), action))
}
