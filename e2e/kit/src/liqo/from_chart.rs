//! Liqo's components run from what the chart created (`liqoctl install` on a harness cluster),
//! as local processes: the program of each container's image, the container's arguments and
//! environment read back from its Deployment, a token of the Deployment's ServiceAccount (a
//! TokenRequest, as the kubelet mounts one), and each mounted volume's files (Secret,
//! ConfigMap, projected token and CA, emptyDir) under the cluster's directory; the pod's name
//! and node are those of the Deployment's pod (kwok's). Nothing of the chart is written again.
//! The gateway's Deployment runs its operator alone: kwok's nodes have no data plane, so the
//! gateway container is not run and the operator gets `--fake-dataplane` instead of the flags
//! that reach it (it reports a rendered peer Connected, as it does in the other harness tests).
//!
//! What a pod would get from the cluster's network is plumbed instead ([`plumb`]): a port the
//! container serves on `0.0.0.0` gets a free loopback port; a Service address in an argument
//! (`liqo-ipam.liqo:6000`) keeps its name and gets the port of the process behind it, the name
//! resolving to 127.0.0.1 through a hosts file of the process's own (a private mount namespace,
//! `unshare --mount`), so TLS checks the chart's names; the API server reaches the
//! controller-manager's webhooks at `https://127.0.0.1:<port>` (the configurations' clientConfig
//! rewritten, `--webhook-cert-names=127.0.0.1` added) and the virtual kubelets' ports are free
//! ones (`--virtual-kubelet-port=0`); the LoadBalancer Services get the status a cloud load
//! balancer would write ([`load_balancers`]). The processes are found and stopped with the
//! cluster, as [`super::install`]'s are (their `KUBECONFIG` is in its directory).

mod net;
mod plumb;
mod pod;

use pod::{containers, name_of};

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use dataplane::supervisor::Spec;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

use super::{
    NAMESPACE, components::wait_ready, error::LiqoError, objects::token_kubeconfig, record::Running,
};
use crate::k8s::Cluster;
pub use plumb::Plumbing;

/// One container the harness runs: its Deployment and name, how it tells it serves (the flag
/// whose address answers, the scheme and path), and the plumbing it gets besides its arguments
/// (flags dropped by prefix, flags added).
struct Run {
    deployment: &'static str,
    container: &'static str,
    program: &'static str,
    /// The package that builds it (for the error when the binary is missing).
    package: &'static str,
    ready: (&'static str, &'static str, &'static str),
    drop: &'static [&'static str],
    add: &'static [&'static str],
}

/// What runs, in start order (the IPAM before its clients).
const RUNS: [Run; 4] = [
    Run {
        deployment: "liqo-ipam",
        container: "ipam",
        program: "liqo-ipam",
        package: "ipam",
        ready: ("--metrics-listen", "http", "/status"),
        drop: &[],
        add: &[],
    },
    Run {
        deployment: "liqo-auth",
        container: "auth",
        program: "liqo-auth",
        package: "liqo-auth",
        ready: ("--listen", "https", control::consts::auth::IDS_PATH),
        drop: &[],
        add: &[],
    },
    Run {
        deployment: "liqo-controller-manager",
        container: "controller-manager",
        program: "liqo-controller-manager",
        package: "liqo-controller-manager",
        ready: ("--metrics-listen", "http", "/metrics"),
        drop: &[],
        add: &["--webhook-cert-names=127.0.0.1", "--virtual-kubelet-port=0"],
    },
    Run {
        deployment: "liqo-gateway",
        container: "gateway-operator",
        program: "liqo-gateway-operator",
        package: "liqo-netops",
        ready: ("--metrics-listen", "http", "/metrics"),
        drop: &["--config=", "--gateway-status-url=", "--private-key-file="],
        add: &["--fake-dataplane"],
    },
];

/// The Deployments whose containers run (one each).
pub const DEPLOYMENTS: [&str; 4] = [
    RUNS[0].deployment,
    RUNS[1].deployment,
    RUNS[2].deployment,
    RUNS[3].deployment,
];

/// Loopback ports chosen by the caller: (Deployment, container port name) → port (e.g. the
/// auth service's, which the test also gives the chart as `auth.config.portOverride`, as a
/// cloud load balancer's port would be).
pub type Pinned = BTreeMap<(String, String), u16>;

/// Runs the containers of [`DEPLOYMENTS`] of cluster `c` (installed by the chart in
/// [`NAMESPACE`]) and waits until each serves.
pub async fn run(c: &Cluster, pinned: &Pinned) -> Result<Vec<Running>, LiqoError> {
    let client = c.client().await?;
    let dir = c.dir.join("liqo").join("pods");
    std::fs::create_dir_all(&dir).map_err(|e| LiqoError::io(&dir, e))?;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let mut wanted = Vec::new();
    for name in DEPLOYMENTS {
        let d = deploys.get(name).await.map_err(LiqoError::kube(format!(
            "reading Deployment {NAMESPACE}/{name}"
        )))?;
        wanted.push(d);
    }
    // Every container port gets a loopback port.
    let mut ports: BTreeMap<(String, u16), u16> = BTreeMap::new();
    for d in &wanted {
        for ct in containers(d) {
            for p in ct.ports.iter().flatten() {
                let port = u16::try_from(p.container_port).unwrap_or(0);
                let pin = p
                    .name
                    .as_ref()
                    .and_then(|n| pinned.get(&(name_of(d), n.clone())));
                let local = match pin {
                    Some(l) => *l,
                    None => crate::k8s::free_port()?,
                };
                ports.insert((name_of(d), port), local);
            }
        }
    }
    let services = net::service_ports(&client, &wanted, &ports).await?;
    let names: Vec<String> = services.keys().map(|(h, _)| h.clone()).collect();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, plumb::hosts(names.iter())).map_err(|e| LiqoError::io(&hosts, e))?;
    let mut running = Vec::new();
    for (r, d) in RUNS.iter().zip(&wanted) {
        let at = Where {
            cluster: c,
            client: &client,
            dir: &dir,
            hosts: &hosts,
            ports: &ports,
            services: &services,
        };
        running.push(start(&at, r, d).await?);
    }
    let manager = "liqo-controller-manager".to_owned();
    if let Some(port) = ports.get(&(manager, webhook_port(&wanted)?)) {
        net::webhooks(&client, *port).await?;
    }
    net::load_balancers(c, &client).await?;
    Ok(running)
}

/// Where the containers run: the cluster, its files and the ports handed out.
struct Where<'a> {
    cluster: &'a Cluster,
    client: &'a Client,
    dir: &'a Path,
    hosts: &'a Path,
    ports: &'a BTreeMap<(String, u16), u16>,
    services: &'a BTreeMap<(String, u16), u16>,
}

/// The container port the controller-manager serves its webhooks on (named `webhook`).
fn webhook_port(wanted: &[Deployment]) -> Result<u16, LiqoError> {
    wanted
        .iter()
        .filter(|d| name_of(d) == "liqo-controller-manager")
        .flat_map(containers)
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some("webhook"))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .ok_or_else(|| LiqoError::Chart {
            path: PathBuf::from("Deployment liqo/liqo-controller-manager"),
            problem: "no container port named webhook".into(),
        })
}

/// Starts container `r` of Deployment `d` and waits until it serves.
async fn start(at: &Where<'_>, r: &Run, d: &Deployment) -> Result<Running, LiqoError> {
    let (c, client) = (at.cluster, at.client);
    let name = name_of(d);
    let bad = |problem: String| LiqoError::Chart {
        path: PathBuf::from(format!("Deployment {NAMESPACE}/{name}")),
        problem,
    };
    let pod = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .ok_or_else(|| bad("no pod template".into()))?;
    let ct = pod
        .containers
        .iter()
        .find(|x| x.name == r.container)
        .ok_or_else(|| bad(format!("no container {}", r.container)))?;
    let image = ct.image.clone().unwrap_or_default();
    if plumb::program_of(&image) != Some(r.program) {
        return Err(bad(format!(
            "container {} runs {image:?}, not {}",
            r.container, r.program
        )));
    }
    let binary = crate::bin(r.program).map_err(|source| LiqoError::Binary {
        program: r.program,
        package: r.package,
        source,
    })?;
    let sa = pod
        .service_account_name
        .clone()
        .ok_or_else(|| bad("no serviceAccountName".into()))?;
    let own = at.dir.join(&name);
    std::fs::create_dir_all(&own).map_err(|e| LiqoError::io(&own, e))?;
    let kubeconfig = token_kubeconfig(client, c, &sa, &own, None).await?;
    let identity = pod::pod_of(client, d).await?;
    let env = pod::env(
        client,
        &name,
        &identity,
        ct.env.as_deref().unwrap_or_default(),
    )
    .await?;
    let mut mounts = Vec::new();
    for m in ct.volume_mounts.iter().flatten() {
        let vol = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == m.name)
            .ok_or_else(|| bad(format!("volume {} is not declared", m.name)))?;
        let local = own.join(&m.name);
        pod::volume(client, c, &sa, vol, &local).await?;
        mounts.push((m.mount_path.clone(), local.display().to_string()));
    }
    let given: Vec<String> = ct
        .args
        .iter()
        .flatten()
        .filter(|a| !r.drop.iter().any(|p| a.starts_with(p)))
        .cloned()
        .collect();
    let mut loopbacks = BTreeMap::new();
    for p in plumb::loopback_ports(&given) {
        loopbacks.insert(p, crate::k8s::free_port()?);
    }
    let plumbing = Plumbing {
        env: env.clone(),
        mounts,
        listens: at
            .ports
            .iter()
            .filter(|((d, _), _)| *d == name)
            .map(|((_, p), l)| (*p, *l))
            .collect(),
        services: at.services.clone(),
        loopbacks,
    };
    let args: Vec<String> = given
        .iter()
        .map(|a| plumbing.arg(a))
        .chain(r.add.iter().map(|a| (*a).to_owned()))
        .collect();
    let (flag, scheme, path) = r.ready;
    let address = args
        .iter()
        .find_map(|a| a.strip_prefix(flag).and_then(|v| v.strip_prefix('=')))
        .ok_or_else(|| bad(format!("{} has no {flag}=<address>", r.container)))?
        .to_owned();
    let url = format!("{scheme}://{address}{path}");
    let log = own.join(format!("{}.log", r.program));
    // A private mount namespace whose /etc/hosts names the Services.
    let script = r#"mount --bind "$0" /etc/hosts && exec "$@""#;
    let mut spec = Spec::new(r.program, "unshare", &log)
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .args([at.hosts, binary.as_path()])
        .args(&args)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info");
    for (k, v) in &env {
        spec = spec.env(k, v);
    }
    let proc = spec.detached().map_err(|source| LiqoError::Spawn {
        program: r.program,
        cluster: c.name.clone(),
        source,
    })?;
    wait_ready(r.program, &c.name, &proc, &url).await?;
    let metrics = args
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-listen="))
        .map(str::to_owned);
    let listen = args
        .iter()
        .find_map(|a| a.strip_prefix("--listen="))
        .map(str::to_owned);
    Ok(Running {
        program: r.program.to_owned(),
        proc,
        url,
        listen,
        metrics,
    })
}
