//! The peers and tools the bench needs, installed by the bench itself (idempotently): Debian
//! packages with apt, boringtun-cli with `cargo install`, and the latest wireguard-go with
//! `go install` from the Go module proxy. Each records what it did and how long it took.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use super::{
    BenchError, Options, Profile, Variant,
    fetch::{boringtun, wggo_latest},
    report_core::{Install, Tool},
    tooling::{install_err, run_logged},
};
use e2e::lab;

pub use super::tooling::{BORINGTUN_VERSION, WGGO_MODULE, which};

/// Paths of everything the bench runs, and what it installed.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// `liqo-gateway`.
    pub gateway: Option<PathBuf>,
    /// `boringtun-cli`.
    pub boringtun: Option<PathBuf>,
    /// Debian's `wireguard-go`.
    pub wggo_debian: Option<PathBuf>,
    /// wireguard-go built from the Go module proxy.
    pub wggo_latest: Option<PathBuf>,
    /// `wg`, to configure the WireGuard daemons.
    pub wg: Option<PathBuf>,
    /// `iperf3`.
    pub iperf3: PathBuf,
    /// `ping`.
    pub ping: PathBuf,
    /// `taskset`, to pin processes.
    pub taskset: Option<PathBuf>,
    /// Versions, for the header.
    pub tools: Vec<Tool>,
    /// What was installed, for the header.
    pub installs: Vec<Install>,
}

impl Peers {
    /// The daemon binary of a tunnel variant.
    pub fn daemon(&self, v: Variant) -> Option<&Path> {
        match v {
            Variant::Plain => None,
            Variant::Ours => self.gateway.as_deref(),
            Variant::Boringtun => self.boringtun.as_deref(),
            Variant::WgGoDebian => self.wggo_debian.as_deref(),
            Variant::WgGoLatest => self.wggo_latest.as_deref(),
        }
    }
}

fn timed<T>(
    what: &str,
    installs: &mut Vec<Install>,
    f: impl FnOnce() -> Result<(T, String), BenchError>,
) -> Result<T, BenchError> {
    let t = Instant::now();
    let (v, action) = f()?;
    let secs = t.elapsed().as_secs_f64();
    if action != "present" {
        eprintln!("bench: {what}: {action} in {secs:.1} s");
    }
    installs.push(Install {
        what: what.into(),
        action,
        secs,
    });
    Ok(v)
}

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "install ok installed")
}

/// Installs the missing Debian packages (`apt-get update` once, only if one is missing).
fn apt(pkgs: &[&str], cache: &Path) -> Result<String, BenchError> {
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok("present".into());
    }
    let what = format!("Debian packages {}", missing.join(" "));
    eprintln!("bench: installing {what} with apt-get ...");
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    run_logged(
        "apt-get update (is the Debian archive reachable?)",
        &mut apt(&["update"]),
        &cache.join("apt-update.log"),
    )?;
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(&missing);
    run_logged(&what, &mut apt(&args), &cache.join("apt-install.log"))?;
    Ok(format!("installed {}", missing.join(" ")))
}

fn need(what: &str) -> Result<PathBuf, BenchError> {
    which(what).ok_or_else(|| BenchError::Missing {
        what: what.into(),
        path: "$PATH".into(),
    })
}

/// Finds, and unless `skip_install` installs, everything `opts` needs.
pub fn prepare(opts: &Options) -> Result<Peers, BenchError> {
    let has = |v| opts.variants.contains(&v);
    let cache = &opts.cache;
    fs::create_dir_all(cache)
        .map_err(|e| install_err("the cache", format!("{}: {e}", cache.display())))?;
    let mut p = Peers::default();
    let mut pkgs = vec!["iperf3", "iputils-ping"];
    let wg_tools = has(Variant::Boringtun) || has(Variant::WgGoDebian) || has(Variant::WgGoLatest);
    if wg_tools {
        pkgs.push("wireguard-tools");
    }
    if has(Variant::WgGoDebian) {
        pkgs.push("wireguard-go");
    }
    if !opts.skip_install {
        timed(&format!("apt: {}", pkgs.join(" ")), &mut p.installs, || {
            Ok(((), apt(&pkgs, cache)?))
        })?;
    }
    p.iperf3 = need("iperf3")?;
    p.ping = need("ping")?;
    p.tools.push(Tool::probe("iperf3", &p.iperf3, "--version"));
    p.tools.push(Tool::probe("ping", &p.ping, "-V"));
    if opts.profiles.contains(&Profile::Split) {
        p.taskset = Some(need("taskset")?);
    }
    if wg_tools {
        let wg = need("wg")?;
        p.tools.push(Tool::probe("wg", &wg, "--version"));
        p.wg = Some(wg);
    }
    if has(Variant::Ours) {
        let gw = lab::bin("liqo-gateway")?;
        p.tools
            .push(Tool::probe("ours (liqo-gateway)", &gw, "--version"));
        p.gateway = Some(gw);
    }
    if has(Variant::Boringtun) {
        let what = format!("boringtun-cli {BORINGTUN_VERSION} (cargo install)");
        let bin = timed(&what, &mut p.installs, || {
            boringtun(cache, opts.skip_install)
        })?;
        p.tools
            .push(Tool::probe("boringtun-cli", &bin, "--version"));
        p.boringtun = Some(bin);
    }
    if has(Variant::WgGoDebian) {
        let bin = need("wireguard-go")?;
        p.tools
            .push(Tool::probe("wireguard-go Debian", &bin, "--version"));
        p.wggo_debian = Some(bin);
    }
    if has(Variant::WgGoLatest) {
        let what = format!("wireguard-go latest ({WGGO_MODULE}@latest, go install)");
        let (bin, module) = timed(&what, &mut p.installs, || {
            wggo_latest(cache, opts.skip_install)
        })?;
        let mut t = Tool::probe("wireguard-go latest", &bin, "--version");
        t.version = format!("{} (module {module})", t.version);
        p.tools.push(t);
        p.wggo_latest = Some(bin);
    }
    Ok(p)
}
