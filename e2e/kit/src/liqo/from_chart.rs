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

mod plumb;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use dataplane::supervisor::Spec;
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        apps::v1::Deployment,
        core::v1::{ConfigMap, Container, EnvVar, Pod, Secret, Service, Volume},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};

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
    let services = service_ports(&client, &wanted, &ports).await?;
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
        webhooks(&client, *port).await?;
    }
    load_balancers(c, &client).await?;
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

fn name_of(d: &Deployment) -> String {
    d.metadata.name.clone().unwrap_or_default()
}

fn containers(d: &Deployment) -> &[Container] {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map_or(&[][..], |p| p.containers.as_slice())
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

/// Every name and port of the Services in front of `wanted`, with the loopback port of the
/// container port behind it.
async fn service_ports(
    client: &Client,
    wanted: &[Deployment],
    ports: &BTreeMap<(String, u16), u16>,
) -> Result<BTreeMap<(String, u16), u16>, LiqoError> {
    let svcs = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(LiqoError::kube(format!(
            "listing the Services of {NAMESPACE}"
        )))?;
    let mut out = BTreeMap::new();
    for svc in svcs.items {
        let Some(spec) = svc.spec.as_ref() else {
            continue;
        };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let behind = wanted.iter().find(|d| {
            let labels = d
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref());
            labels.is_some_and(|l| selector.iter().all(|(k, v)| l.get(k) == Some(v)))
        });
        let Some(d) = behind else { continue };
        for sp in spec.ports.iter().flatten() {
            let target = containers(d)
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| match &sp.target_port {
                    Some(IntOrString::String(n)) => p.name.as_deref() == Some(n),
                    Some(IntOrString::Int(n)) => p.container_port == *n,
                    None => p.container_port == sp.port,
                });
            let Some(local) = target
                .and_then(|p| u16::try_from(p.container_port).ok())
                .and_then(|p| ports.get(&(name_of(d), p)))
            else {
                continue;
            };
            let port = u16::try_from(sp.port).unwrap_or(0);
            for n in plumb::service_names(&svc.metadata.name.clone().unwrap_or_default(), NAMESPACE)
            {
                out.insert((n, port), *local);
            }
        }
    }
    Ok(out)
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
    let identity = pod_of(client, d).await?;
    let env = env(
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
        volume(client, c, &sa, vol, &local).await?;
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

/// The pod of Deployment `d` (kwok runs its status): its name and node, for the downward API.
async fn pod_of(client: &Client, d: &Deployment) -> Result<(String, String), LiqoError> {
    let name = name_of(d);
    let selector = d
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(LiqoError::kube(format!(
            "listing the pods of Deployment {name}"
        )))?;
    pods.items
        .iter()
        .find_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            Some((p.metadata.name.clone()?, node))
        })
        .ok_or_else(|| LiqoError::Chart {
            path: PathBuf::from(format!("Deployment {NAMESPACE}/{name}")),
            problem: "no scheduled pod".into(),
        })
}

/// The container's environment, resolved as the kubelet would for a pod of the harness
/// (`status.podIP` is 127.0.0.1, the pod's name and node are its kwok pod's; a field the
/// harness cannot give is an error naming it).
async fn env(
    client: &Client,
    deployment: &str,
    (pod, node): &(String, String),
    vars: &[EnvVar],
) -> Result<BTreeMap<String, String>, LiqoError> {
    let mut out = BTreeMap::new();
    for v in vars {
        let value = match (&v.value, &v.value_from) {
            (Some(x), _) => plumb::expand(x, &out),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    match f.field_path.as_str() {
                        "status.podIP" | "status.hostIP" => "127.0.0.1".to_owned(),
                        "metadata.name" => pod.clone(),
                        "spec.nodeName" => node.clone(),
                        "metadata.namespace" => NAMESPACE.to_owned(),
                        other => {
                            return Err(LiqoError::Chart {
                                path: PathBuf::from(format!("Deployment {NAMESPACE}/{deployment}")),
                                problem: format!("env {}: fieldRef {other} is not plumbed", v.name),
                            });
                        }
                    }
                } else if let Some(k) = &from.secret_key_ref {
                    let s = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
                        .get(&k.name)
                        .await
                        .map_err(LiqoError::kube(format!("reading Secret {}", k.name)))?;
                    let data = s.data.unwrap_or_default();
                    String::from_utf8_lossy(
                        &data.get(&k.key).map(|b| b.0.clone()).unwrap_or_default(),
                    )
                    .into_owned()
                } else if let Some(k) = &from.config_map_key_ref {
                    let m = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
                        .get(&k.name)
                        .await
                        .map_err(LiqoError::kube(format!("reading ConfigMap {}", k.name)))?;
                    m.data
                        .unwrap_or_default()
                        .get(&k.key)
                        .cloned()
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            }
            (None, None) => String::new(),
        };
        out.insert(v.name.clone(), value);
    }
    Ok(out)
}

/// Writes the files volume `vol` shows its container into `local`.
async fn volume(
    client: &Client,
    c: &Cluster,
    sa: &str,
    vol: &Volume,
    local: &Path,
) -> Result<(), LiqoError> {
    std::fs::create_dir_all(local).map_err(|e| LiqoError::io(local, e))?;
    let write = |name: &str, bytes: &[u8]| -> Result<(), LiqoError> {
        let path = local.join(name);
        crate::k8s::write_file(&path, &String::from_utf8_lossy(bytes), true)?;
        Ok(())
    };
    if let Some(s) = &vol.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let secret = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
            .get(&name)
            .await
            .map_err(LiqoError::kube(format!("reading Secret {name}")))?;
        let data = secret.data.unwrap_or_default();
        let items: Vec<(String, String)> = match &s.items {
            Some(items) => items
                .iter()
                .map(|i| (i.key.clone(), i.path.clone()))
                .collect(),
            None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
        };
        for (key, path) in items {
            write(
                &path,
                &data.get(&key).map(|b| b.0.clone()).unwrap_or_default(),
            )?;
        }
    } else if let Some(m) = &vol.config_map {
        config_map(client, &m.name, m.items.as_deref(), &write).await?;
    } else if let Some(p) = &vol.projected {
        for src in p.sources.iter().flatten() {
            if let Some(t) = &src.service_account_token {
                let kc = token_kubeconfig(client, c, sa, local, None).await?;
                let token = token_of(&kc)?;
                write(&t.path, token.as_bytes())?;
                std::fs::remove_file(&kc).map_err(|e| LiqoError::io(&kc, e))?;
            }
            if let Some(m) = &src.config_map {
                config_map(client, &m.name, m.items.as_deref(), &write).await?;
            }
            if let Some(d) = &src.downward_api {
                for i in d.items.iter().flatten() {
                    if i.field_ref.as_ref().map(|f| f.field_path.as_str())
                        == Some("metadata.namespace")
                    {
                        write(&i.path, NAMESPACE.as_bytes())?;
                    }
                }
            }
        }
    }
    // emptyDir: the directory itself.
    Ok(())
}

async fn config_map(
    client: &Client,
    name: &str,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    write: &impl Fn(&str, &[u8]) -> Result<(), LiqoError>,
) -> Result<(), LiqoError> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get(name)
        .await
        .map_err(LiqoError::kube(format!("reading ConfigMap {name}")))?;
    let data = cm.data.unwrap_or_default();
    let pairs: Vec<(String, String)> = match items {
        Some(items) => items
            .iter()
            .map(|i| (i.key.clone(), i.path.clone()))
            .collect(),
        None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
    };
    for (key, path) in pairs {
        write(
            &path,
            data.get(&key).map(String::as_bytes).unwrap_or_default(),
        )?;
    }
    Ok(())
}

/// The token of a kubeconfig [`token_kubeconfig`] wrote.
fn token_of(kubeconfig: &Path) -> Result<String, LiqoError> {
    let text = std::fs::read_to_string(kubeconfig).map_err(|e| LiqoError::io(kubeconfig, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| LiqoError::Chart {
        path: kubeconfig.to_owned(),
        problem: e.to_string(),
    })?;
    Ok(v["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// The webhook configurations call the controller-manager at `https://127.0.0.1:<port>`
/// (the API server has no route to a Service of the harness); their caBundle is kept.
async fn webhooks(client: &Client, port: u16) -> Result<(), LiqoError> {
    let name = control::consts::webhook::CONFIGURATION;
    let url = |path: Option<&str>| format!("https://127.0.0.1:{port}{}", path.unwrap_or("/"));
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut m = mutating.get(name).await.map_err(LiqoError::kube(format!(
        "reading MutatingWebhookConfiguration {name}"
    )))?;
    for w in m.webhooks.iter_mut().flatten() {
        let path = w
            .client_config
            .service
            .as_ref()
            .and_then(|s| s.path.clone());
        w.client_config.service = None;
        w.client_config.url = Some(url(path.as_deref()));
    }
    m.metadata.managed_fields = None;
    mutating
        .replace(name, &PostParams::default(), &m)
        .await
        .map_err(LiqoError::kube(format!(
            "pointing MutatingWebhookConfiguration {name} at 127.0.0.1"
        )))?;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mut v = validating.get(name).await.map_err(LiqoError::kube(format!(
        "reading ValidatingWebhookConfiguration {name}"
    )))?;
    for w in v.webhooks.iter_mut().flatten() {
        let path = w
            .client_config
            .service
            .as_ref()
            .and_then(|s| s.path.clone());
        w.client_config.service = None;
        w.client_config.url = Some(url(path.as_deref()));
    }
    v.metadata.managed_fields = None;
    validating
        .replace(name, &PostParams::default(), &v)
        .await
        .map_err(LiqoError::kube(format!(
            "pointing ValidatingWebhookConfiguration {name} at 127.0.0.1"
        )))?;
    Ok(())
}

/// The status a cloud load balancer writes on every LoadBalancer Service of the namespace:
/// ingress 127.0.0.1 for `liqo-auth` (the peer's processes reach it there), an address of
/// TEST-NET-1 for the others (the gateway's: a peer's endpoint must be an address it can send
/// to, never loopback, and the harness's nodes say 127.0.0.1; no packet goes there on kwok's
/// nodes), one per cluster (from its API server's port).
async fn load_balancers(c: &Cluster, client: &Client) -> Result<(), LiqoError> {
    let api = Api::<Service>::namespaced(client.clone(), NAMESPACE);
    let svcs = api
        .list(&ListParams::default())
        .await
        .map_err(LiqoError::kube(format!(
            "listing the Services of {NAMESPACE}"
        )))?;
    let port: u32 = c
        .server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let node_ip = format!("192.0.2.{}", 1 + port % 254);
    for svc in svcs.items {
        let kind = svc.spec.as_ref().and_then(|s| s.type_.as_deref());
        if kind != Some("LoadBalancer") {
            continue;
        }
        let name = svc.metadata.name.unwrap_or_default();
        let ip = if name == control::consts::objects::AUTH_SERVICE {
            "127.0.0.1"
        } else {
            node_ip.as_str()
        };
        let status = serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(LiqoError::kube(format!(
                "writing the load-balancer status of {name}"
            )))?;
    }
    Ok(())
}
