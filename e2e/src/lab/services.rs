//! The per-cluster services the lab runs: an IPAM service and a gateway, as real processes
//! (`liqo-ipam serve`, `liqo-gateway run`) inside the cluster's gateway node, detached from the
//! `liqo-lab` process so they outlive it. `down` kills them with everything else in the lab's
//! namespaces.

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::Stdio,
    thread,
    time::{Duration, Instant},
};

use dataplane::Netns;

use super::{Lab, LabError, state};
use crate::topology::Cluster;

/// gRPC address of a cluster's IPAM service, inside its gateway node.
pub const IPAM_SERVER: &str = "http://127.0.0.1:6000";
/// WireGuard UDP port of the lab's gateways.
pub const GATEWAY_PORT: u16 = 51840;

/// Where the project's binaries are: `$LIQO_BIN_DIR`, else next to the running executable (or
/// one level up, for test executables in `target/*/deps`).
pub fn bin(name: &str) -> Result<PathBuf, LabError> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("LIQO_BIN_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(d) = exe.parent()
    {
        dirs.push(d.to_owned());
        if let Some(up) = d.parent() {
            dirs.push(up.to_owned());
        }
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| LabError::Build {
            what: format!("finding the {name} binary"),
            source: format!(
                "not found in {dirs:?}; build it (cargo build --bins) or set LIQO_BIN_DIR"
            )
            .into(),
        })
}

fn fail(what: String) -> impl FnOnce(std::io::Error) -> LabError {
    move |e| LabError::Build {
        what,
        source: Box::new(e),
    }
}

/// Starts `program args` inside `ns`, detached (own process group, output to `log`); returns
/// its pid.
pub(crate) fn spawn_detached(
    ns: &Netns,
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<u32, LabError> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(fail(format!("opening {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(fail(format!("opening {}", log.display())))?;
    let mut cmd = ns.command(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let child = cmd
        .spawn()
        .map_err(fail(format!("starting {}", program.display())))?;
    Ok(child.id())
}

/// Writes `text` to `path` atomically (a temporary file renamed over it): daemons watching the
/// file never read half of it.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), LabError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(fail(format!("writing {}", path.display())))
}

/// Runs `program args` inside `ns` and returns its stdout, or its stderr as the error.
pub(crate) fn run_in(ns: &Netns, program: &Path, args: &[&str]) -> Result<String, LabError> {
    let what = format!(
        "{} {}",
        program.file_name().unwrap_or_default().to_string_lossy(),
        args.join(" ")
    );
    let out = ns
        .command(program)
        .args(args)
        .output()
        .map_err(fail(what.clone()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Build {
            what,
            source: String::from_utf8_lossy(&out.stderr)
                .trim()
                .to_owned()
                .into(),
        })
    }
}

/// Polls `f` until it succeeds or `secs` pass; returns the last error.
pub(crate) fn wait_for<T>(
    secs: u64,
    what: &str,
    mut f: impl FnMut() -> Result<T, LabError>,
) -> Result<T, LabError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => {
                return Err(LabError::Build {
                    what: format!("waiting for {what}"),
                    source: Box::new(e),
                });
            }
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The gateway configuration file of a cluster.
pub(crate) fn gateway_config_path(lab: &Lab, cluster: &str) -> PathBuf {
    state::cluster_dir(&lab.prefix, cluster).join("gateway.yaml")
}

/// Writes a cluster's gateway configuration atomically (the gateway reloads it).
pub(crate) fn write_gateway_config(
    lab: &Lab,
    cluster: &str,
    file: &gateway::config::File,
) -> Result<(), LabError> {
    let path = gateway_config_path(lab, cluster);
    let text = serde_saphyr::to_string(file).map_err(|e| LabError::Build {
        what: "encoding a gateway config".into(),
        source: Box::new(e),
    })?;
    write_atomic(&path, &text)
}

/// Reads a cluster's gateway configuration.
pub(crate) fn read_gateway_config(
    lab: &Lab,
    cluster: &str,
) -> Result<gateway::config::File, LabError> {
    let path = gateway_config_path(lab, cluster);
    let text = fs::read_to_string(&path).map_err(fail(format!("reading {}", path.display())))?;
    gateway::config::File::parse(&text).map_err(|e| LabError::Build {
        what: format!("parsing {}", path.display()),
        source: Box::new(e),
    })
}

/// The namespace of the node running the IPAM service of `c` (`nodes[0]`; it stays there when
/// the gateway moves).
pub(crate) fn ipam_netns(lab: &Lab, c: &Cluster) -> Result<Netns, LabError> {
    lab.netns(&format!("{}/{}", c.name, c.gateway().name).parse()?)
}

/// Starts the IPAM service on `nodes[0]`, the gateway there, and an overlay agent on every node
/// of `c`, and waits until all answer.
pub(crate) fn start(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let dir = state::cluster_dir(&lab.prefix, c.name.as_str());
    fs::create_dir_all(&dir).map_err(fail(format!("creating {}", dir.display())))?;
    let node = ipam_netns(lab, c)?;
    let ipam = bin("liqo-ipam")?;

    let reserved: Vec<String> = c.reserved_subnets.iter().map(ToString::to_string).collect();
    let mut args = vec![
        "serve".to_owned(),
        "--listen".into(),
        "127.0.0.1:6000".into(),
        "--metrics-listen".into(),
        "127.0.0.1:9106".into(),
        "--state".into(),
        dir.join("ipam.json").display().to_string(),
        "--pod-cidr".into(),
        c.pod_cidr.to_string(),
        "--service-cidr".into(),
        c.service_cidr.to_string(),
    ];
    if !reserved.is_empty() {
        args.extend(["--reserved-subnets".into(), reserved.join(",")]);
    }
    spawn_detached(&node, &ipam, &args, &dir.join("ipam.log"))?;

    let file = gateway::config::File {
        namespace: Some(super::names::netns(&lab.prefix, &[c.name.as_str(), "gw"]).to_string()),
        private_key_file: Some(dir.join("private.key").display().to_string()),
        local_pod_cidr: Some(liqo_types::Cidr::new(c.pod_cidr).expect("validated topology")),
        listen_port: Some(GATEWAY_PORT),
        ..Default::default()
    };
    write_gateway_config(lab, c.name.as_str(), &file)?;
    super::placement::start_gateway(lab, c, c.gateway().name.as_str())?;
    super::overlay::start(lab, c)?;
    wait_for(20, "the IPAM service", || {
        run_in(&node, &ipam, &["list", "--server", IPAM_SERVER])
    })?;
    Ok(())
}
