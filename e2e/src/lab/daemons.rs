//! The lab's per-cluster daemons as real processes, started through [`dataplane::supervisor`]
//! detached (so they outlive `liqo-lab`): `liqo-ipam serve` and `liqo-gateway run` on a node,
//! `liqo-overlay run` on every node. Their files are written and their `/status` is read typed
//! with [`liqo_netops::files`] (shared with the operators), and the IPAM is spoken to with its
//! typed gRPC client, dialled inside the node's namespace. `down` kills them with
//! everything else in the lab's namespaces.

use std::{
    fs,
    future::Future,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use dataplane::{
    Netns,
    supervisor::{self, Proc, Spec, Stopped},
};
use ipam::service::client::{Client, ClientOptions};
use liqo_daemon::status::ReloadStatus;
use liqo_netops::files::{self, Look};
use tonic::transport::Uri;

use super::{Lab, LabError, state::write_atomic};
use crate::topology::Cluster;

/// Where a cluster's IPAM service listens, inside its node.
pub const IPAM_LISTEN: &str = "127.0.0.1:6000";
/// Where it serves its metrics.
const IPAM_METRICS: &str = "127.0.0.1:9106";
/// WireGuard UDP port of the lab's gateways.
pub const GATEWAY_PORT: u16 = 51840;
/// Where a gateway serves `/status`, inside its node.
pub(crate) const GATEWAY_STATUS: &str = "127.0.0.1:9107";
/// Where each overlay agent serves `/status`, inside its node.
pub(crate) const OVERLAY_STATUS: &str = "127.0.0.1:9108";
/// How long a gateway may take to exit on SIGTERM (it removes what it created).
const GATEWAY_GRACE: Duration = Duration::from_secs(10);

/// Where the project's binary `name` is ([`testkit::bin`]), as a lab error.
pub fn bin(name: &str) -> Result<PathBuf, LabError> {
    testkit::bin(name).map_err(|e| LabError::build(format!("finding the {name} binary"), e))
}

/// What one look at a daemon found.
#[derive(Debug)]
pub(crate) enum Poll<T> {
    /// Done.
    Ready(T),
    /// Not yet; why (reported if time runs out).
    NotYet(String),
    /// It will not happen: stop waiting.
    Failed(LabError),
}

/// Looks with `f` every 50 ms until it is ready, fails, or `secs` pass.
pub(crate) async fn wait_for<T>(
    secs: u64,
    what: &str,
    mut f: impl FnMut() -> Poll<T>,
) -> Result<T, LabError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f() {
            Poll::Ready(v) => return Ok(v),
            Poll::Failed(e) => return Err(e),
            Poll::NotYet(why) if Instant::now() >= deadline => {
                return Err(LabError::build(
                    format!("waiting {secs} s for {what}"),
                    format!("still {why}"),
                ));
            }
            Poll::NotYet(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One look of [`files`] as a step of [`wait_for`]: a refusal of the text of digest `want`
/// fails the wait at once (naming the field and the problem).
pub(crate) fn poll(look: Look, want: &str) -> Poll<()> {
    match look {
        Look::Ready => Poll::Ready(()),
        Look::NotYet(why) => Poll::NotYet(why),
        Look::Refused(e) => Poll::Failed(LabError::build(
            format!("configuration {want} was refused"),
            e,
        )),
    }
}

/// Whether the daemon whose reload state is `r` runs the file text of digest `want`
/// ([`files::runs`], as a step of [`wait_for`]).
pub(crate) fn runs(r: &ReloadStatus, want: &str) -> Poll<()> {
    poll(files::runs(r, want), want)
}

/// Writes a daemon's config file atomically and returns the digest of the text written
/// ([`files::write_config`]).
pub(crate) fn write_config(path: &Path, text: &str) -> Result<String, LabError> {
    Ok(files::write_config(path, text)?)
}

fn get(ns: &Netns, addr: &str, what: &str) -> Result<String, LabError> {
    let addr: SocketAddr = addr.parse().expect("literal");
    ns.run(|| liqo_daemon::localhttp::get(addr, "/status"))?
        .map_err(|e| LabError::build(format!("asking the {what} in {}", ns.name()), e))
}

/// What the gateway in `ns` reports.
pub(crate) fn gateway_status(ns: &Netns) -> Result<gateway::status::Status, LabError> {
    let body = get(ns, GATEWAY_STATUS, "gateway")?;
    Ok(files::decode(
        &body,
        &format!("the gateway in {}", ns.name()),
    )?)
}

/// What the overlay agent in `ns` reports.
pub fn overlay_status(ns: &Netns) -> Result<overlay::status::Status, LabError> {
    let body = get(ns, OVERLAY_STATUS, "overlay agent")?;
    Ok(files::decode(
        &body,
        &format!("the overlay agent in {}", ns.name()),
    )?)
}

/// Starts the IPAM service of `c` on `nodes[0]` (it stays there when the gateway moves).
pub(crate) fn start_ipam(lab: &Lab, c: &Cluster) -> Result<Proc, LabError> {
    let files = lab.files(c);
    let mut args = vec![
        "serve".to_owned(),
        "--listen".into(),
        IPAM_LISTEN.into(),
        "--metrics-listen".into(),
        IPAM_METRICS.into(),
        "--state".into(),
        files.ipam_state().display().to_string(),
        "--pod-cidr".into(),
        c.pod_cidr.to_string(),
        "--service-cidr".into(),
        c.service_cidr.to_string(),
    ];
    let reserved: Vec<String> = c.reserved_subnets.iter().map(ToString::to_string).collect();
    if !reserved.is_empty() {
        args.extend(["--reserved-subnets".into(), reserved.join(",")]);
    }
    let node = ipam_node(lab, c)?;
    Spec::new("liqo-ipam", bin("liqo-ipam")?, files.ipam_log())
        .args(args)
        .netns(&node)
        .detached()
        .map_err(|e| LabError::build(format!("starting the IPAM service of {}", c.name), e))
}

/// The namespace of the node running the IPAM service of `c`.
pub(crate) fn ipam_node(lab: &Lab, c: &Cluster) -> Result<Netns, LabError> {
    lab.node(c, c.gateway().name.as_str())
}

/// The typed client of `c`'s IPAM service, dialled inside its node (the service listens on
/// that node's loopback only); waits up to `secs` for it to answer.
pub(crate) async fn ipam_client(lab: &Lab, c: &Cluster, secs: u64) -> Result<Client, LabError> {
    let ns = ipam_node(lab, c)?;
    let addr: SocketAddr = IPAM_LISTEN.parse().expect("literal");
    // The service's one client set-up (TLS and token when configured), dialled through a
    // connector that opens the TCP connection inside the node's namespace.
    let prepared = ClientOptions::new(format!("http://{IPAM_LISTEN}"))
        .prepare()
        .map_err(|e| LabError::build(format!("the IPAM client of {}", c.name), e))?;
    let endpoint = prepared
        .endpoint
        .clone()
        .connect_timeout(Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let ns = ns.clone();
        let connector = tower::service_fn(move |_: Uri| {
            let ns = ns.clone();
            async move {
                let s = ns
                    .run(|| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
                    .map_err(std::io::Error::other)??;
                s.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::TcpStream::from_std(s)?,
                ))
            }
        });
        match endpoint.connect_with_connector(connector).await {
            Ok(ch) => return Ok(prepared.client(ch)),
            Err(e) if Instant::now() >= deadline => {
                return Err(LabError::build(
                    format!(
                        "connecting to the IPAM service of {} (see {})",
                        c.name,
                        lab.files(c).ipam_log().display()
                    ),
                    e,
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The environment variable of a command prefix the lab runs each gateway through (a container
/// runtime running the gateway's image, a profiler): words separated by whitespace, in each of
/// which `{netns}` is the node's namespace, `{dir}` the cluster's files directory (the config,
/// the key, the log) and `{gateway}` the liqo-gateway binary; the gateway's arguments
/// (`run --config ... --status-listen ...`) follow. Its first word is the process the lab
/// records and stops with SIGTERM (which a container runtime passes on). Unset or empty: the
/// binary itself. Every `liqo-lab` command that starts a gateway (`up`, `move-gateway`) reads it.
pub const GATEWAY_RUN_ENV: &str = "LIQO_LAB_GATEWAY_RUN";

/// What starts a gateway: the program, its file name (what [`supervisor::is_ours`] checks) and
/// the arguments before the gateway's own.
#[derive(Debug, PartialEq, Eq)]
struct Launch {
    program: String,
    name: String,
    args: Vec<String>,
}

/// The [`Launch`] of the prefix `words` ([`GATEWAY_RUN_ENV`]) with these values of `{netns}`,
/// `{dir}` and `{gateway}`; `None` for no prefix. Any other `{...}` is refused, naming it.
fn launch(
    words: &str,
    netns: &str,
    dir: &Path,
    gateway: &Path,
) -> Result<Option<Launch>, LabError> {
    let mut out = Vec::new();
    for w in words.split_whitespace() {
        let w = w
            .replace("{netns}", netns)
            .replace("{dir}", &dir.display().to_string())
            .replace("{gateway}", &gateway.display().to_string());
        if let Some(at) = w.find('{')
            && let Some(len) = w[at..].find('}')
        {
            return Err(LabError::build(
                format!("{GATEWAY_RUN_ENV}={words:?}"),
                format!(
                    "{:?} is not a placeholder (there are {{netns}}, {{dir}} and {{gateway}})",
                    &w[at..=at + len]
                ),
            ));
        }
        out.push(w);
    }
    let mut words = out.into_iter();
    Ok(words.next().map(|program| Launch {
        name: Path::new(&program)
            .file_name()
            .map_or_else(|| program.clone(), |f| f.to_string_lossy().into_owned()),
        program,
        args: words.collect(),
    }))
}

/// Starts `c`'s gateway on `node` with its config file (through [`GATEWAY_RUN_ENV`]'s prefix
/// when set); records its pid and program name.
pub(crate) fn spawn_gateway(lab: &Lab, c: &Cluster, node: &str) -> Result<Proc, LabError> {
    let files = lab.files(c);
    let ns = lab.node(c, node)?;
    let gateway = bin("liqo-gateway")?;
    let prefix = match std::env::var(GATEWAY_RUN_ENV) {
        Ok(words) => launch(&words, ns.name().as_str(), files.dir(), &gateway)?,
        Err(std::env::VarError::NotPresent) => None,
        Err(e) => return Err(LabError::build(format!("reading {GATEWAY_RUN_ENV}"), e)),
    };
    let spec = match prefix {
        Some(l) => Spec::new(l.name, l.program, files.gateway_log()).args(l.args),
        None => Spec::new("liqo-gateway", gateway, files.gateway_log()),
    };
    let p = spec
        .args(["run", "--config"])
        .args([files.gateway_config()])
        .args(["--status-listen", GATEWAY_STATUS])
        .netns(&ns)
        .detached()
        .map_err(|e| LabError::build(format!("starting the gateway of {} on {node}", c.name), e))?;
    write_atomic(&files.gateway_pid(), &format!("{}\n{}\n", p.pid, p.name))?;
    Ok(p)
}

/// Stops `c`'s gateway with SIGTERM (it removes what it created) and waits for it; an error if
/// it had to be killed (its namespace, rules and routes may be left; a restart adopts them).
pub(crate) fn stop_gateway(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let path = lab.files(c).gateway_pid();
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        // Never started: nothing to stop.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(LabError::build(format!("reading {}", path.display()), e)),
    };
    // The pid, then the program's name (a file without it: liqo-gateway itself).
    let mut lines = text.lines();
    let pid = lines.next().unwrap_or("").trim();
    let pid = pid.parse().map_err(|_| {
        LabError::build(
            format!("reading {}", path.display()),
            format!("{pid:?} is not a pid"),
        )
    })?;
    let p = Proc {
        name: lines
            .next()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or("liqo-gateway")
            .into(),
        pid,
        log: lab.files(c).gateway_log().display().to_string(),
    };
    match supervisor::stop(&p, GATEWAY_GRACE) {
        Stopped::NotRunning | Stopped::Exited => Ok(()),
        Stopped::Killed => Err(LabError::build(
            format!("stopping the gateway of {}", c.name),
            format!(
                "it did not exit within {} s of SIGTERM; killed",
                GATEWAY_GRACE.as_secs()
            ),
        )),
        Stopped::Stuck => Err(LabError::build(
            format!("stopping the gateway of {}", c.name),
            "it survived SIGKILL",
        )),
    }
}

/// Waits until the gateway of `c` in `ns` serves its status, or reports its log if it exited.
pub(crate) async fn gateway_up(
    lab: &Lab,
    c: &Cluster,
    ns: &Netns,
    p: &Proc,
) -> Result<(), LabError> {
    let log = lab.files(c).gateway_log();
    wait_for(20, &format!("the gateway of {} to serve", c.name), || {
        if !supervisor::alive(p.pid) {
            return Poll::Failed(LabError::build(
                format!(
                    "the gateway of {} exited; the end of {}",
                    c.name,
                    log.display()
                ),
                supervisor::tail(&log, 10),
            ));
        }
        match gateway_status(ns) {
            Ok(_) => Poll::Ready(()),
            Err(e) => Poll::NotYet(e.to_string()),
        }
    })
    .await
}

/// Starts an overlay agent on `node` of `c` with its config file.
pub(crate) fn spawn_overlay(lab: &Lab, c: &Cluster, node: &str) -> Result<Proc, LabError> {
    let files = lab.files(c);
    Spec::new(
        "liqo-overlay",
        bin("liqo-overlay")?,
        files.overlay_log(node),
    )
    .args(["run", "--config"])
    .args([files.overlay_config(node)])
    .args(["--status-listen", OVERLAY_STATUS])
    .netns(&lab.node(c, node)?)
    .detached()
    .map_err(|e| {
        LabError::build(
            format!("starting the overlay agent on {}/{node}", c.name),
            e,
        )
    })
}

/// Runs `fut` to completion on a runtime of its own, on a thread of its own: the lab's
/// synchronous entry points drive the async peering core this way, inside or outside a
/// runtime.
pub(crate) fn block_on<F>(fut: F) -> Result<F::Output, LabError>
where
    F: Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| LabError::build("starting a runtime", e))?;
            Ok(rt.block_on(fut))
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Launch, launch};

    #[test]
    fn a_gateway_prefix_gets_the_node_the_directory_and_the_binary() {
        let dir = Path::new("/run/liqo-lab/lq.d/rome");
        let gw = Path::new("/t/liqo-gateway");
        let l = launch(
            " podman run --network ns:/run/netns/{netns} -v {dir}:{dir}  img\n",
            "lq-rome-n0",
            dir,
            gw,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            l,
            Launch {
                program: "podman".into(),
                name: "podman".into(),
                args: [
                    "run",
                    "--network",
                    "ns:/run/netns/lq-rome-n0",
                    "-v",
                    "/run/liqo-lab/lq.d/rome:/run/liqo-lab/lq.d/rome",
                    "img"
                ]
                .map(String::from)
                .to_vec(),
            }
        );
        let l = launch("/usr/bin/strace -f {gateway}", "n", dir, gw)
            .unwrap()
            .unwrap();
        assert_eq!(
            (l.program.as_str(), l.name.as_str()),
            ("/usr/bin/strace", "strace")
        );
        assert_eq!(l.args, ["-f", "/t/liqo-gateway"]);
        assert_eq!(launch(" \t", "n", dir, gw).unwrap(), None);
    }

    #[test]
    fn an_unknown_placeholder_is_refused_naming_it() {
        let e = launch(
            "podman -v {dirr}:/x img",
            "n",
            Path::new("/d"),
            Path::new("/g"),
        )
        .unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(text.contains("\"{dirr}\" is not a placeholder"), "{text}");
        assert!(text.contains("LIQO_LAB_GATEWAY_RUN"), "{text}");
    }
}
