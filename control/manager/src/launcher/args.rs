//! The controller-manager's `--virtual-kubelet-*` flags and the [`Settings`] they make.

use std::{net::IpAddr, path::PathBuf};

use clap::{Args, ValueEnum};

use liqo_virtual_kubelet::config::ReflectionWorkers;

use super::vk::{Mode, Settings};

/// How virtual kubelets run (`--virtual-kubelet-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeFlag {
    /// A task of the controller-manager, with its identity.
    InProcess,
    /// A child process `liqo-virtual-kubelet` each, with `--virtual-kubelet-kubeconfig`.
    Process,
}

/// The flags.
#[derive(Debug, Clone, Args)]
pub struct VkArgs {
    /// How virtual kubelets run.
    #[arg(
        long = "virtual-kubelet-mode",
        value_enum,
        default_value = "in-process"
    )]
    pub mode: ModeFlag,
    /// The `liqo-virtual-kubelet` binary (process mode; default: next to this one).
    #[arg(long = "virtual-kubelet-binary")]
    pub binary: Option<PathBuf>,
    /// The kubeconfig the children use for the home API server (process mode; default: ours).
    #[arg(long = "virtual-kubelet-kubeconfig")]
    pub kubeconfig: Option<PathBuf>,
    /// Where the children's provider kubeconfigs are written (process mode): a directory per
    /// peer, 0700, files 0600, removed when the virtual kubelet stops.
    #[arg(
        long = "virtual-kubelet-state-dir",
        default_value = "/var/lib/liqo/virtual-kubelet"
    )]
    pub state_dir: PathBuf,
    /// The virtual nodes' InternalIP: where the API server reaches their kubelet API (the
    /// pod's IP in a cluster).
    #[arg(long = "virtual-kubelet-node-ip", default_value = "127.0.0.1")]
    pub node_ip: IpAddr,
    /// The kubelet API's port; 0 (the default) picks a free one per virtual kubelet, as
    /// several share the node IP (one per peering), and keeps it across its restarts while
    /// it is free (its last run's port, else the one its Node advertises).
    #[arg(long = "virtual-kubelet-port", default_value_t = 0)]
    pub port: u16,
    /// The CA of the client certificates the kubelet API accepts (the API server's
    /// `--kubelet-client-certificate`); without it only `/healthz` is served (no logs, no exec).
    #[arg(long = "virtual-kubelet-client-ca-file")]
    pub client_ca: Option<PathBuf>,
    /// Pod reflection workers per virtual kubelet.
    #[arg(long = "virtual-kubelet-pod-workers", default_value_t = liqo_virtual_kubelet::config::DEFAULT_POD_WORKERS,
          value_parser = workers)]
    pub pod_workers: usize,
    /// Worker threads of each virtual kubelet run as its own process (its `--worker-threads`;
    /// default: its own default, 1). An in-process one runs on the controller-manager's
    /// threads (`--worker-threads`).
    #[arg(long = "virtual-kubelet-worker-threads")]
    pub worker_threads: Option<std::num::NonZeroUsize>,
    /// API server support in the virtual kubelets: offloaded pods get tokens of their home
    /// ServiceAccounts and reach the home API server through the tunnel. Needs the virtual
    /// kubelets' own identity (`--virtual-kubelet-mode process`): the controller-manager's role
    /// does not mint tokens (refused in-process).
    #[arg(long = "virtual-kubelet-apiserver-support", default_value_t = false, action = clap::ArgAction::Set)]
    pub apiserver_support: bool,
    /// The liqo-ipam the virtual kubelets map the reflected EndpointSlices' addresses through
    /// (default: `--ipam-address`). Given alone, the network manager stays off: for clusters
    /// whose network another fabric builds, each peer's view of ours told to that IPAM by hand
    /// (`liqo-ipam set-peer-view`).
    #[arg(long = "virtual-kubelet-ipam-address", value_parser = plain_ipam_address)]
    pub vk_ipam_address: Option<String>,
    /// Where offloaded pods reach the home API server (`host:port` as the provider's pods see
    /// it), instead of the address `default/kubernetes` publishes, mapped through the IPAM
    /// (an API server behind a load balancer, another network fabric). Implies API server
    /// support; process mode only.
    #[arg(long = "virtual-kubelet-home-api-server")]
    pub home_api: Option<control::shadowpod::token::HomeApi>,
    /// Resource reflection workers per kind in the virtual kubelets (`kind=n,...` over the
    /// defaults; 0 turns a kind off), e.g. `ingress=0,secret=5`. An in-process virtual kubelet
    /// (the controller-manager's identity, whose role reads Services and Secrets only)
    /// reflects Services, Secrets and the root CA; any other kind is refused there.
    #[arg(long = "virtual-kubelet-reflection-workers", value_parser = reflection_workers)]
    pub reflection: Option<String>,
}

/// A worker count refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidWorkers {
    /// Zero.
    #[error("at least one worker is needed")]
    Zero,
    /// Not a count; the message carries the cause (a flag's error is shown alone).
    #[error("{text:?}: {cause}")]
    NotACount {
        /// The text given.
        text: String,
        /// Why it does not parse.
        cause: std::num::ParseIntError,
    },
}

/// A `kind=n,...` list that parses (applied over the mode's defaults by [`VkArgs::settings`]).
fn reflection_workers(
    s: &str,
) -> Result<String, liqo_virtual_kubelet::config::InvalidReflectionWorkers> {
    s.parse::<ReflectionWorkers>()?;
    Ok(s.to_owned())
}

/// An IPAM address the client accepts (`http://host:port`).
fn plain_ipam_address(s: &str) -> Result<String, ipam::service::client::ClientError> {
    ipam::service::client::ClientOptions::new(s).prepare()?;
    Ok(s.to_owned())
}

/// A worker count: at least 1.
fn workers(s: &str) -> Result<usize, InvalidWorkers> {
    match s.parse::<usize>() {
        Ok(0) => Err(InvalidWorkers::Zero),
        Ok(n) => Ok(n),
        Err(cause) => Err(InvalidWorkers::NotACount {
            text: s.to_owned(),
            cause,
        }),
    }
}

/// Why the flags make no settings.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The default binary could not be located.
    #[error("--virtual-kubelet-binary: no default (the path of this program is unknown)")]
    NoBinary(#[source] std::io::Error),
    /// A flag that needs the virtual kubelets' own identity, given in-process.
    #[error(
        "{flag}: needs the virtual kubelets' own identity (--virtual-kubelet-mode process); \
         an in-process virtual kubelet has the controller-manager's, whose role {why}"
    )]
    NeedsOwnIdentity {
        /// The flag.
        flag: &'static str,
        /// What the role lacks.
        why: &'static str,
    },
    /// A bad `--virtual-kubelet-reflection-workers` (checked when parsed already).
    #[error("--virtual-kubelet-reflection-workers")]
    Reflection(#[source] liqo_virtual_kubelet::config::InvalidReflectionWorkers),
    /// A process-mode flag given with in-process virtual kubelets.
    #[error(
        "{flag}: only for virtual kubelets run as their own processes (--virtual-kubelet-mode process); {why}"
    )]
    ProcessOnly {
        /// The flag.
        flag: &'static str,
        /// What to do instead.
        why: &'static str,
    },
    /// A process-mode file that does not exist.
    #[error("{flag} {}: not found", path.display())]
    Missing {
        /// The flag.
        flag: &'static str,
        /// Its value.
        path: PathBuf,
    },
}

impl VkArgs {
    /// `--virtual-kubelet-reflection-workers` over `base`.
    fn reflection(&self, base: ReflectionWorkers) -> Result<ReflectionWorkers, ArgsError> {
        ReflectionWorkers::parse_over(base, self.reflection.as_deref().unwrap_or_default())
            .map_err(ArgsError::Reflection)
    }

    /// The launcher's settings; `ipam` is the controller-manager's own.
    pub fn settings(
        &self,
        ipam: Option<ipam::service::client::ClientOptions>,
    ) -> Result<Settings, ArgsError> {
        let exists = |flag: &'static str, p: &PathBuf| {
            if p.exists() {
                Ok(())
            } else {
                Err(ArgsError::Missing {
                    flag,
                    path: p.clone(),
                })
            }
        };
        if let Some(ca) = &self.client_ca {
            exists("--virtual-kubelet-client-ca-file", ca)?;
        }
        let mode = match self.mode {
            ModeFlag::InProcess => {
                if self.apiserver_support {
                    return Err(ArgsError::NeedsOwnIdentity {
                        flag: "--virtual-kubelet-apiserver-support",
                        why: "does not mint ServiceAccount tokens",
                    });
                }
                if self.home_api.is_some() {
                    return Err(ArgsError::NeedsOwnIdentity {
                        flag: "--virtual-kubelet-home-api-server",
                        why: "does not mint ServiceAccount tokens",
                    });
                }
                if self.worker_threads.is_some() {
                    return Err(ArgsError::ProcessOnly {
                        flag: "--virtual-kubelet-worker-threads",
                        why: "in-process ones run on the controller-manager's threads \
                              (--worker-threads)",
                    });
                }
                let w = self.reflection(ReflectionWorkers::IN_PROCESS)?;
                if w.endpointslice + w.ingress + w.serviceaccount + w.configmap > 0 {
                    return Err(ArgsError::NeedsOwnIdentity {
                        flag: "--virtual-kubelet-reflection-workers",
                        why: "reads no EndpointSlice, Ingress, ServiceAccount nor ConfigMap (but \
                              the root CA) of the offloaded namespaces",
                    });
                }
                Mode::InProcess
            }
            ModeFlag::Process => {
                let binary = match &self.binary {
                    Some(b) => b.clone(),
                    None => std::env::current_exe()
                        .map_err(ArgsError::NoBinary)?
                        .with_file_name("liqo-virtual-kubelet"),
                };
                exists("--virtual-kubelet-binary", &binary)?;
                if let Some(k) = &self.kubeconfig {
                    exists("--virtual-kubelet-kubeconfig", k)?;
                }
                Mode::Process {
                    binary,
                    kubeconfig: self.kubeconfig.clone(),
                    state_dir: self.state_dir.clone(),
                }
            }
        };
        Ok(Settings {
            mode,
            node_ip: self.node_ip,
            port: self.port,
            client_ca: self.client_ca.clone(),
            liqo_network: ipam.is_some(),
            ipam: match &self.vk_ipam_address {
                Some(a) => Some(ipam::service::client::ClientOptions::new(a.clone())),
                None => ipam,
            },
            pod_workers: self.pod_workers,
            worker_threads: self.worker_threads,
            apiserver_support: self.apiserver_support,
            home_api: self.home_api.clone(),
            // In-process: Services, Secrets and the root CA (ConfigMaps at 0 keep that one).
            reflection: self.reflection(match self.mode {
                ModeFlag::InProcess => ReflectionWorkers::IN_PROCESS,
                ModeFlag::Process => ReflectionWorkers::default(),
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        vk: VkArgs,
    }

    fn args(flags: &[&str]) -> VkArgs {
        Cli::try_parse_from(std::iter::once("m").chain(flags.iter().copied()))
            .unwrap()
            .vk
    }

    #[test]
    fn in_process_reflects_services_secrets_and_the_root_ca() {
        let s = args(&[]).settings(None).unwrap();
        assert!(matches!(s.mode, Mode::InProcess));
        assert_eq!(s.reflection, ReflectionWorkers::IN_PROCESS);
        assert!(!s.apiserver_support);
        let s = args(&["--virtual-kubelet-reflection-workers", "service=5,secret=0"])
            .settings(None)
            .unwrap();
        assert_eq!((s.reflection.service, s.reflection.secret), (5, 0));
        let s = args(&[
            "--virtual-kubelet-mode",
            "process",
            "--virtual-kubelet-binary",
            "/bin/sh",
            "--virtual-kubelet-reflection-workers",
            "ingress=0",
        ])
        .settings(None)
        .unwrap();
        assert_eq!(s.reflection.endpointslice, 10, "over the defaults");
        assert_eq!(s.reflection.ingress, 0);
    }

    #[test]
    fn in_process_refuses_what_needs_a_virtual_kubelet_of_its_own() {
        for flags in [
            &["--virtual-kubelet-reflection-workers", "endpointslice=2"][..],
            &["--virtual-kubelet-apiserver-support", "true"][..],
            &["--virtual-kubelet-home-api-server", "10.70.0.1:6443"][..],
            &["--virtual-kubelet-worker-threads", "2"][..],
        ] {
            let e = args(flags).settings(None).unwrap_err().to_string();
            assert!(e.starts_with(flags[0]), "{e}");
            assert!(e.contains("--virtual-kubelet-mode process"), "{e}");
        }
    }

    #[test]
    fn the_virtual_kubelets_ipam_is_their_own_when_given() {
        let ours = ipam::service::client::ClientOptions::new("http://127.0.0.1:7000");
        let s = args(&[]).settings(Some(ours.clone())).unwrap();
        assert_eq!(s.ipam.unwrap().server, ours.server);
        let s = args(&["--virtual-kubelet-ipam-address", "http://127.0.0.1:7001"])
            .settings(Some(ours))
            .unwrap();
        assert_eq!(s.ipam.unwrap().server, "http://127.0.0.1:7001");
        let e = Cli::try_parse_from(["m", "--virtual-kubelet-ipam-address", "ftp://x"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ftp://x"), "{e}");
    }

    #[test]
    fn a_bad_reflection_workers_list_is_refused_naming_the_item() {
        let e = Cli::try_parse_from(["m", "--virtual-kubelet-reflection-workers", "pods=3"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("\"pods\" is not a reflected kind"), "{e}");
    }
}
