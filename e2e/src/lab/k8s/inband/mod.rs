//! The in-band lab (`liqo-lab up --k8s --in-band`): each cluster's API server and auth
//! service are reachable only from inside the cluster, so the clusters can only be peered
//! in-band (`liqoctl peer in-band`). In every cluster's gateway node:
//! - the ClusterIPs of `liqo-auth` and `liqo-proxy` are local addresses (a minimal
//!   kube-proxy), dropped when they come from the WAN (table `inband-kube-proxy`);
//! - a relay (`liqo-lab relay`, tagged under the lab directory) carries the auth service's
//!   ClusterIP to the auth process;
//! - `liqo-proxy` listens on its ClusterIP and CONNECTs only to the API server (through the
//!   node's relay of the API server);
//! - the controller-manager runs there as a host-network pod would (API server and IPAM
//!   through the node's relay, the peer through the tunnel), instead of in the root namespace.
//!
//! What it records ([`InBand`], `inband.json` in the lab directory) lets `status` show it and
//! tests dial it; `down` finds everything: the relays by their tag, the rest is killed with
//! the node's namespace. What is reachable where, and what unpeering must leave: [`report`].

pub mod report;

pub use report::{InBand, load, peer_command, render};

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use control::consts::objects::{AUTH_SERVICE, PROXY_SERVICE};
use dataplane::{
    Netns,
    supervisor::{self, Proc, Spec},
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{Patch, PatchParams},
};

use super::{
    K8sLab, K8sLabError,
    relay::{self, API_LISTEN, Forward, IPAM_LISTEN},
};
use crate::{
    k8s::{self, MANAGER},
    lab::WAN0,
    liqo::NAMESPACE,
    topology::Cluster,
};

/// The port of `liqo-proxy`'s Service (Liqo's chart).
pub const PROXY_PORT: u16 = 8118;
/// The controller-manager's program.
const MANAGER_PROGRAM: &str = "liqo-controller-manager";
/// The nft table that plays kube-proxy's part for the WAN.
const TABLE: &str = "inband-kube-proxy";
/// How long a moved process gets to serve, and the old controller-manager to stop.
const START: Duration = Duration::from_secs(20);

/// Makes every cluster of `k` reachable only in-band (see the module doc) and records it.
/// `k.liqo` (and `liqo.json`) then name the moved controller-managers.
pub async fn setup(k: &mut K8sLab) -> Result<Vec<InBand>, K8sLabError> {
    let mut out = Vec::new();
    let mut liqo = k.liqo.clone();
    for c in &k.lab.topology.clusters {
        let (made, manager) = cluster(k, c).await?;
        // The install's record names the moved controller-manager, not the stopped one.
        let running = liqo
            .clusters
            .iter_mut()
            .filter(|i| i.cluster == made.cluster)
            .flat_map(|i| i.running.iter_mut())
            .find(|r| r.program == MANAGER_PROGRAM);
        if let Some(r) = running {
            r.proc = manager;
        }
        out.push(made);
    }
    crate::liqo::save(&k.set, &liqo)
        .map_err(|e| K8sLabError::lab("recording the moved controller-managers", e))?;
    k.liqo = liqo;
    let text = serde_json::to_string_pretty(&out)
        .map_err(|e| K8sLabError::lab("encoding the in-band record", e))?;
    crate::lab::state::write_atomic(&report::record(&k.lab.prefix), &text)?;
    Ok(out)
}

async fn cluster(k: &K8sLab, c: &Cluster) -> Result<(InBand, Proc), K8sLabError> {
    let name = c.name.as_str();
    let kc = k
        .set
        .get(name)
        .ok_or_else(|| K8sLabError::lab(format!("cluster {name}"), "no control plane"))?;
    let installed = k
        .liqo
        .get(name)
        .ok_or_else(|| K8sLabError::lab(format!("cluster {name}"), "Liqo is not installed"))?;
    let node = c.gateway().name.to_string();
    let ns = k.lab.node(c, &node)?;
    let netns = k.lab.node_netns(name, &node);
    let paths = super::fabric::Paths::of(&k.lab, c);

    // The Services (liqo-proxy has no selector: it is a lab process).
    let svcs: Api<Service> = Api::namespaced(kc.client().await?, NAMESPACE);
    let proxy_svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": PROXY_SERVICE, "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": PROXY_PORT}]},
    }))
    .expect("a literal Service");
    let proxy_svc = svcs
        .patch(
            PROXY_SERVICE,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&proxy_svc),
        )
        .await
        .map_err(K8sLabError::kube(format!(
            "applying Service {PROXY_SERVICE}"
        )))?;
    let auth_svc = svcs
        .get(AUTH_SERVICE)
        .await
        .map_err(K8sLabError::kube(format!("reading Service {AUTH_SERVICE}")))?;
    let auth = service_addr(&auth_svc, name)?;
    let proxy = service_addr(&proxy_svc, name)?;

    // kube-proxy's part: the ClusterIPs local in the node, never from the WAN.
    for a in [auth.ip(), proxy.ip()] {
        let mut cmd = ns.command("ip");
        cmd.args(["addr", "replace", &format!("{a}/32"), "dev", "lo"]);
        run(cmd, None, &format!("adding {a} in {netns}"))?;
    }
    let rules = format!(
        "table ip {TABLE} {{\n  chain input {{\n    type filter hook input priority 0; \
         policy accept;\n    iifname \"{WAN0}\" ip daddr {{ {}, {} }} drop\n  }}\n}}\n",
        auth.ip(),
        proxy.ip()
    );
    run(
        ns.command("nft"),
        Some(&rules),
        &format!("loading table {TABLE} in {netns}"),
    )?;

    // The auth relay.
    let auth_listen = installed
        .get("liqo-auth")
        .and_then(|r| r.listen.as_deref())
        .ok_or_else(|| K8sLabError::lab(format!("liqo-auth of {name}"), "not running"))?
        .parse::<SocketAddr>()
        .map_err(|e| K8sLabError::lab(format!("the liqo-auth address of {name}"), e))?;
    let p = relay::spawn(
        &netns,
        &[Forward {
            listen: auth,
            connect: auth_listen,
        }],
        None,
        &paths.relay_tag("inband-auth"),
        &paths.log("relay-auth", &node),
    )?;
    wait_listening(&ns, &p, auth).await?;

    // liqo-proxy: CONNECT only to the API server (the name the peer dials) through the relay.
    let authority = kc.server.trim_start_matches("https://");
    let proxy_log = paths.log("liqo-proxy", &node);
    let bin =
        crate::lab::bin("liqo-proxy").map_err(|e| K8sLabError::lab("finding liqo-proxy", e))?;
    let p = Spec::new("liqo-proxy", bin, &proxy_log)
        .env("RUST_LOG", "info")
        .netns(&ns)
        .args([
            "--listen".to_owned(),
            proxy.to_string(),
            "--allow".to_owned(),
            format!("{authority}={API_LISTEN}"),
        ])
        .detached()
        .map_err(|e| K8sLabError::lab(format!("starting liqo-proxy in {netns}"), e))?;
    wait_listening(&ns, &p, proxy).await?;

    let manager_log = paths.log(MANAGER_PROGRAM, &node);
    let manager = move_manager(k, c, &ns, &manager_log).await?;
    let made = InBand {
        cluster: name.to_owned(),
        netns: netns.to_string(),
        auth,
        proxy,
        api_server: kc.server.clone(),
        proxy_log,
        manager_log,
        manager_pid: manager.pid,
    };
    Ok((made, manager))
}

/// Stops the controller-manager the install started and starts it again, same flags, in the
/// gateway node `ns`: its kubeconfig pointed at the node's relay of the API server, its IPAM
/// at the node's relay of the IPAM; returns its process.
async fn move_manager(
    k: &K8sLab,
    c: &Cluster,
    ns: &Netns,
    log: &Path,
) -> Result<Proc, K8sLabError> {
    let name = c.name.as_str();
    let kc = k.set.get(name).expect("checked by the caller");
    let was = k
        .liqo
        .get(name)
        .and_then(|i| i.get(MANAGER_PROGRAM))
        .ok_or_else(|| K8sLabError::lab(format!("{MANAGER_PROGRAM} of {name}"), "not running"))?;
    let command = k8s::command_line(was.proc.pid)
        .filter(|_| supervisor::is_ours(was.proc.pid, MANAGER_PROGRAM))
        .ok_or_else(|| K8sLabError::lab(format!("{MANAGER_PROGRAM} of {name}"), "exited"))?;
    if supervisor::stop(&was.proc, START) == supervisor::Stopped::Stuck {
        return Err(K8sLabError::lab(
            format!("{MANAGER_PROGRAM} of {name} (pid {})", was.proc.pid),
            "survived SIGKILL",
        ));
    }
    let own = command
        .env
        .iter()
        .find(|(k, _)| k == "KUBECONFIG")
        .map(|(_, v)| PathBuf::from(v))
        .ok_or_else(|| K8sLabError::lab(format!("{MANAGER_PROGRAM} of {name}"), "no KUBECONFIG"))?;
    let text = std::fs::read_to_string(&own)
        .map_err(|e| K8sLabError::lab(format!("reading {}", own.display()), e))?;
    let moved = text.replace(&kc.server, &format!("https://{API_LISTEN}"));
    if moved == text {
        return Err(K8sLabError::lab(
            format!("{} of {MANAGER_PROGRAM}", own.display()),
            format!("it does not name the API server {}", kc.server),
        ));
    }
    let moved_path = own.with_file_name("inband-controller-manager.kubeconfig");
    // It holds the ServiceAccount's token: 0600 from its creation.
    k8s::write_file(&moved_path, &moved, true)
        .map_err(|e| K8sLabError::lab(format!("writing {}", moved_path.display()), e))?;
    let mut args = command.args.clone();
    // Its virtual kubelets run beside it, in the node: their kubeconfig too.
    if let Some(i) = args
        .iter()
        .position(|a| a == "--virtual-kubelet-kubeconfig")
        && let Some(vk) = args.get(i + 1).map(PathBuf::from)
    {
        let text = std::fs::read_to_string(&vk)
            .map_err(|e| K8sLabError::lab(format!("reading {}", vk.display()), e))?;
        let path = vk.with_file_name("inband-virtual-kubelet.kubeconfig");
        let moved = text.replace(&kc.server, &format!("https://{API_LISTEN}"));
        k8s::write_file(&path, &moved, true)
            .map_err(|e| K8sLabError::lab(format!("writing {}", path.display()), e))?;
        args[i + 1] = path.into();
    }
    match args.iter().position(|a| a == "--ipam-address") {
        Some(i) if i + 1 < args.len() => args[i + 1] = format!("http://{IPAM_LISTEN}").into(),
        _ => args.extend([
            "--ipam-address".into(),
            format!("http://{IPAM_LISTEN}").into(),
        ]),
    }
    let mut spec = Spec::new(MANAGER_PROGRAM, &command.program, log)
        .args(args)
        .netns(ns);
    for (key, v) in &command.env {
        if key != "KUBECONFIG" {
            spec = spec.env(key, v);
        }
    }
    let p = spec
        .env("KUBECONFIG", &moved_path)
        .detached()
        .map_err(|e| {
            K8sLabError::lab(
                format!("starting {MANAGER_PROGRAM} in {name}'s gateway node"),
                e,
            )
        })?;
    // It serves its metrics once its clients are built; the address is its flag's.
    let metrics = command
        .args
        .iter()
        .position(|a| a == "--metrics-listen")
        .and_then(|i| command.args.get(i + 1))
        .and_then(|a| a.to_str()?.parse::<SocketAddr>().ok());
    match metrics {
        Some(addr) => wait_listening(ns, &p, addr).await?,
        None => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !supervisor::alive(p.pid) {
                return Err(K8sLabError::lab(
                    format!(
                        "{MANAGER_PROGRAM} in {name}'s gateway node exited; {}",
                        p.log
                    ),
                    supervisor::tail(log, 10),
                ));
            }
        }
    }
    Ok(p)
}

/// The ClusterIP and first port of `svc`.
fn service_addr(svc: &Service, cluster: &str) -> Result<SocketAddr, K8sLabError> {
    let spec = svc.spec.as_ref();
    let ip = spec
        .and_then(|s| s.cluster_ip.as_deref())
        .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok());
    let port = spec
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| u16::try_from(p.port).ok());
    match (ip, port) {
        (Some(ip), Some(port)) => Ok(SocketAddr::from((ip, port))),
        _ => Err(K8sLabError::lab(
            format!(
                "Service {} of {cluster}",
                svc.metadata.name.as_deref().unwrap_or("?")
            ),
            "no IPv4 ClusterIP and port",
        )),
    }
}

/// Runs `cmd` (with `stdin` if given) and fails naming `what` and its stderr.
fn run(mut cmd: std::process::Command, stdin: Option<&str>, what: &str) -> Result<(), K8sLabError> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.args(["-f", "-"]);
    }
    let mut child = cmd.spawn().map_err(|e| K8sLabError::lab(what, e))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|e| K8sLabError::lab(what, e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| K8sLabError::lab(what, e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(K8sLabError::lab(
            what,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// Waits until something listens at `addr` inside `ns`, or `p` exited.
async fn wait_listening(
    ns: &Netns,
    p: &supervisor::Proc,
    addr: SocketAddr,
) -> Result<(), K8sLabError> {
    let what = format!("{} in {}", p.name, ns.name());
    super::fabric::listening(ns, p, addr, START, &what).await
}
