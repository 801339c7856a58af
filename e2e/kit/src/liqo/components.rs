//! The components as processes: one table row per program (its package, ServiceAccount,
//! command line and readiness check), started detached through [`dataplane::supervisor`] with
//! `KUBECONFIG` set to the component's own kubeconfig, and waited on until they serve.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use dataplane::supervisor::{Proc, Spec};

use super::{error::LiqoError, objects::NAMESPACE, probe::probe, record::Running};
use crate::{
    k8s::Cluster,
    programs::{AUTH, CONTROLLER_MANAGER, IPAM, VIRTUAL_KUBELET},
};

/// How long a component may take to serve.
const READY_SECS: u64 = 60;

/// What a component's command line is made from.
pub(super) struct Ctx<'a> {
    /// The cluster.
    pub(super) cluster: &'a Cluster,
    /// Liqo's files of that cluster.
    pub(super) dir: &'a Path,
    /// The cluster's CA.
    pub(super) ca: &'a Path,
    /// A free loopback port for its service.
    pub(super) port: u16,
    /// A free loopback port for its metrics.
    pub(super) metrics: u16,
    /// Subnets the IPAM must never hand out.
    pub(super) reserved: &'a [ipnet::Ipv4Net],
    /// The IPAM's gRPC address (`http://127.0.0.1:<port>`), if it was started before.
    pub(super) ipam: Option<&'a str>,
    /// The controller-manager's `--cluster-labels`, if any.
    pub(super) cluster_labels: Option<&'a str>,
    /// The loopback port of the controller-manager's webhooks (the chart's webhook
    /// configurations are rewritten to it).
    pub(super) webhook: u16,
    /// How the controller-manager runs the virtual kubelets.
    pub(super) vk_mode: VkMode,
    /// The kubeconfig of ServiceAccount `liqo-virtual-kubelet-local` (process mode).
    pub(super) vk_kubeconfig: Option<&'a Path>,
    /// The controller-manager's `--resource-sharing-percentage`.
    pub(super) sharing: Option<u8>,
    /// The controller-manager's `--virtual-kubelet-pod-workers`.
    pub(super) vk_pod_workers: Option<usize>,
    /// The IPAM's address for the virtual kubelets alone (`--virtual-kubelet-ipam-address`).
    pub(super) vk_ipam: Option<String>,
    /// `--virtual-kubelet-apiserver-support`.
    pub(super) vk_apiserver_support: bool,
    /// The controller-manager's replica number when several run (`--leader-elect`, identity
    /// `<cluster>-<n>`), `None` for a lone one.
    pub(super) replica: Option<usize>,
}

/// How the controller-manager runs the virtual kubelets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VkMode {
    /// A child process per peering (`liqo-virtual-kubelet`), with the token of ServiceAccount
    /// `liqo-virtual-kubelet-local` (the chart's RBAC for it) and its own pid (its memory and
    /// CPU can be measured).
    #[default]
    Process,
    /// A task of the controller-manager (its identity).
    InProcess,
}

impl VkMode {
    /// The value of `--virtual-kubelet-mode`.
    pub fn flag(self) -> &'static str {
        match self {
            VkMode::Process => "process",
            VkMode::InProcess => "in-process",
        }
    }
}

/// How to tell a component serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// `GET http://127.0.0.1:<metrics><path>` answers 200.
    Metrics(&'static str),
    /// `GET https://127.0.0.1:<port><path>` answers 200 (any certificate: it is self-signed).
    Https(&'static str),
}

/// One component.
#[derive(Debug)]
pub struct Component {
    /// Its program.
    pub program: &'static str,
    /// The package that builds it.
    pub package: &'static str,
    /// Its ServiceAccount (and ClusterRole) in `liqo`, if it talks to the API server.
    pub service_account: Option<&'static str>,
    /// Its readiness check.
    pub ready: Ready,
    args: fn(&Ctx<'_>) -> Vec<String>,
}

fn s(x: impl std::fmt::Display) -> String {
    x.to_string()
}

fn ipam_args(c: &Ctx<'_>) -> Vec<String> {
    let mut args = vec![
        s("serve"),
        s("--listen"),
        format!("127.0.0.1:{}", c.port),
        s("--metrics-listen"),
        format!("127.0.0.1:{}", c.metrics),
        s("--state"),
        s(c.dir.join("ipam-state.json").display()),
        s("--pod-cidr"),
        s(c.cluster.pod_cidr),
        s("--service-cidr"),
        s(c.cluster.service_cidr),
    ];
    if !c.reserved.is_empty() {
        let r: Vec<String> = c.reserved.iter().map(ToString::to_string).collect();
        args.extend([s("--reserved-subnets"), r.join(",")]);
    }
    args
}

fn auth_args(c: &Ctx<'_>) -> Vec<String> {
    vec![
        s("--namespace"),
        s(NAMESPACE),
        s("--listen"),
        format!("127.0.0.1:{}", c.port),
        s("--api-server-url"),
        s(&c.cluster.server),
        s("--api-server-ca-file"),
        s(c.ca.display()),
        s("--metrics-listen"),
        format!("127.0.0.1:{}", c.metrics),
    ]
}

fn manager_args(c: &Ctx<'_>) -> Vec<String> {
    let mut args = vec![
        s("--namespace"),
        s(NAMESPACE),
        s("--metrics-listen"),
        format!("127.0.0.1:{}", c.metrics),
        s("--webhook-listen"),
        format!("127.0.0.1:{}", c.webhook),
        s("--webhook-cert-names"),
        s("127.0.0.1,localhost"),
        // The storage fabric, as the chart turns it on (files/liqo-storage.yaml is applied).
        s("--enable-storage=true"),
    ];
    if let Some(ipam) = c.ipam {
        args.extend([s("--ipam-address"), s(ipam)]);
    }
    if let Some(labels) = c.cluster_labels {
        args.extend([s("--cluster-labels"), s(labels)]);
    }
    if let Some(p) = c.sharing {
        args.extend([s("--resource-sharing-percentage"), s(p)]);
    }
    if let Some(w) = c.vk_pod_workers {
        args.extend([s("--virtual-kubelet-pod-workers"), s(w)]);
    }
    if let Some(ipam) = &c.vk_ipam {
        args.extend([s("--virtual-kubelet-ipam-address"), s(ipam)]);
    }
    if c.vk_apiserver_support {
        args.push(s("--virtual-kubelet-apiserver-support=true"));
    }
    if let Some(n) = c.replica {
        args.extend([
            s("--leader-elect"),
            s("--leader-elect-identity"),
            format!("{}-{n}", c.cluster.name),
        ]);
    }
    // Virtual kubelets: a free kubelet port each (several on this host), the cluster's CA
    // (which signed the API server's kubelet client certificate) for the kubelet API.
    args.extend([
        s("--virtual-kubelet-mode"),
        s(c.vk_mode.flag()),
        s("--virtual-kubelet-port"),
        s(0),
        s("--virtual-kubelet-client-ca-file"),
        s(c.ca.display()),
    ]);
    if c.vk_mode == VkMode::Process {
        // Next to the controller-manager's binary (both from $LIQO_BIN_DIR or the build).
        if let Ok(bin) = crate::bin(VIRTUAL_KUBELET) {
            args.extend([s("--virtual-kubelet-binary"), s(bin.display())]);
        }
        args.extend([
            s("--virtual-kubelet-state-dir"),
            s(c.dir.join("virtual-kubelets").display()),
        ]);
        if let Some(k) = c.vk_kubeconfig {
            args.extend([s("--virtual-kubelet-kubeconfig"), s(k.display())]);
        }
    }
    args
}

/// Its ServiceAccount and ClusterRole (the chart's `liqo-virtual-kubelet-local`).
pub(super) const VIRTUAL_KUBELET_SA: &str = "liqo-virtual-kubelet-local";

/// Every component, in start order. Adding one is one row.
pub const COMPONENTS: &[Component] = &[
    Component {
        program: IPAM,
        package: "ipam",
        service_account: None,
        ready: Ready::Metrics("/status"),
        args: ipam_args,
    },
    Component {
        program: AUTH,
        package: "liqo-auth",
        service_account: Some("liqo-auth"),
        ready: Ready::Https(control::consts::auth::IDS_PATH),
        args: auth_args,
    },
    Component {
        program: CONTROLLER_MANAGER,
        package: "liqo-controller-manager",
        service_account: Some("liqo-controller-manager"),
        ready: Ready::Metrics("/metrics"),
        args: manager_args,
    },
];

impl Component {
    /// Its binary ([`crate::bin`]: `$LIQO_BIN_DIR`, else next to the running executable).
    pub(super) fn binary(&self) -> Result<PathBuf, LiqoError> {
        crate::bin(self.program).map_err(|source| LiqoError::Binary {
            program: self.program,
            package: self.package,
            source,
        })
    }

    /// Starts it and waits until it serves.
    pub(super) async fn start(
        &'static self,
        ctx: &Ctx<'_>,
        program: &Path,
        kubeconfig: Option<&PathBuf>,
    ) -> Result<Running, LiqoError> {
        let log = match ctx.replica.filter(|n| *n > 0) {
            Some(n) => ctx.dir.join(format!("{}-{n}.log", self.program)),
            None => ctx.dir.join(format!("{}.log", self.program)),
        };
        let mut spec = Spec::new(self.program, program, &log)
            .args((self.args)(ctx))
            .env("RUST_LOG", "info");
        spec = match kubeconfig {
            // The cluster's directory is in KUBECONFIG: teardown finds the process by it.
            Some(k) => spec.env("KUBECONFIG", k),
            None => spec.env_remove("KUBECONFIG"),
        };
        let proc = spec.detached().map_err(|source| LiqoError::Spawn {
            program: self.program,
            cluster: ctx.cluster.name.clone(),
            source,
        })?;
        let url = match self.ready {
            Ready::Metrics(p) => format!("http://127.0.0.1:{}{p}", ctx.metrics),
            Ready::Https(p) => format!("https://127.0.0.1:{}{p}", ctx.port),
        };
        wait_ready(self.program, &ctx.cluster.name, &proc, &url).await?;
        Ok(Running {
            program: self.program.to_owned(),
            proc,
            url,
            listen: Some(format!("127.0.0.1:{}", ctx.port)),
            metrics: Some(format!("127.0.0.1:{}", ctx.metrics)),
        })
    }
}

/// Waits until `proc` (component `program` of `cluster`) answers at `url`; fails at once if it
/// exits, else after [`READY_SECS`] with the end of its log.
pub(super) async fn wait_ready(
    program: &'static str,
    cluster: &str,
    proc: &Proc,
    url: &str,
) -> Result<(), LiqoError> {
    let deadline = Instant::now() + Duration::from_secs(READY_SECS);
    loop {
        let why = match probe(url).await {
            Ok(()) => return Ok(()),
            Err(why) => why.to_string(),
        };
        let dead = !dataplane::supervisor::alive(proc.pid);
        if dead || Instant::now() > deadline {
            return Err(LiqoError::NotReady {
                program,
                cluster: cluster.to_owned(),
                secs: READY_SECS,
                why: if dead { "it exited".into() } else { why },
                log: proc.log.clone(),
                tail: dataplane::supervisor::tail(Path::new(&proc.log), 20),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_is_a_program_the_teardown_finds() {
        for c in COMPONENTS {
            assert!(
                crate::programs::LIQO.contains(&c.program),
                "{} is not in programs::LIQO: a cluster's teardown would leave it running",
                c.program
            );
        }
    }
}
