//! Finding a cluster's pod and service CIDRs where the distribution publishes them: kubeadm's
//! (and KinD's) `kube-system/kubeadm-config`, kube-proxy's `kube-system/kube-proxy`, the
//! API server's ServiceCIDR objects; K3s's documented defaults. The parsers are pure; [`detect`]
//! reads the objects.

use control::api::Cidr;
use k8s_openapi::api::{core::v1::ConfigMap, networking::v1::ServiceCIDR};
use kube::{Api, Client, api::ListParams};
use serde_json::Value;

use super::args::Provider;

/// K3s's default pod CIDR (`--cluster-cidr`).
pub const K3S_POD_CIDR: &str = "10.42.0.0/16";
/// K3s's default service CIDR (`--service-cidr`).
pub const K3S_SERVICE_CIDR: &str = "10.43.0.0/16";

/// Which CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The pod CIDR (`--pod-cidr`).
    Pod,
    /// The service CIDR (`--service-cidr`).
    Service,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Pod => "pod CIDR (give --pod-cidr)",
            Which::Service => "service CIDR (give --service-cidr)",
        })
    }
}

/// Why a CIDR was not found.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// Nothing the cluster publishes says it.
    #[error("the cluster's {which} could not be found: {tried}")]
    NotFound {
        /// Which one.
        which: Which,
        /// What was looked at.
        tried: String,
    },
    /// A published value is not an IPv4 CIDR.
    #[error("{source_name} says the {which} is {value:?}, which is not an IPv4 CIDR")]
    Invalid {
        /// Which one.
        which: Which,
        /// Where it was read.
        source_name: String,
        /// What it says.
        value: String,
    },
}

/// The first IPv4 CIDR of a comma-separated list (dual-stack settings list both families).
pub fn first_v4(list: &str) -> Option<Result<Cidr, String>> {
    list.split(',')
        .map(str::trim)
        .find(|c| c.contains('.'))
        .map(|c| crate::install::args::parse_cidr(c).map_err(|_| c.to_owned()))
}

/// `networking.podSubnet` / `serviceSubnet` of kubeadm's ClusterConfiguration (YAML).
pub fn from_kubeadm(cluster_configuration: &str, which: Which) -> Option<String> {
    let v: Value = serde_saphyr::from_str(cluster_configuration).ok()?;
    let key = match which {
        Which::Pod => "podSubnet",
        Which::Service => "serviceSubnet",
    };
    v.get("networking")?.get(key)?.as_str().map(str::to_owned)
}

/// `clusterCIDR` of kube-proxy's configuration (YAML): the pod CIDR.
pub fn from_kube_proxy(config: &str) -> Option<String> {
    let v: Value = serde_saphyr::from_str(config).ok()?;
    v.get("clusterCIDR")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// One lookup's outcome: a value and where it came from, or what was looked at.
type Found = Result<(String, String), String>;

/// Key `key` of ConfigMap kube-system/`name`: `Err` says why not (absent, no such key, or
/// the API server's refusal, e.g. Forbidden).
async fn config_map_key(client: &Client, name: &str, key: &str) -> Result<String, String> {
    let what = format!("ConfigMap kube-system/{name}");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match api.get_opt(name).await {
        Ok(Some(cm)) => cm
            .data
            .and_then(|d| d.get(key).cloned())
            .ok_or(format!("{what} has no key {key}")),
        Ok(None) => Err(format!("no {what}")),
        Err(e) => Err(format!("reading {what}: {e}")),
    }
}

async fn kubeadm(client: &Client, which: Which) -> Found {
    let what = "ConfigMap kube-system/kubeadm-config";
    let cfg = config_map_key(client, "kubeadm-config", "ClusterConfiguration").await?;
    from_kubeadm(&cfg, which)
        .map(|v| (v, what.to_owned()))
        .ok_or(format!("{what} has no networking subnet"))
}

async fn kube_proxy(client: &Client) -> Found {
    let what = "ConfigMap kube-system/kube-proxy";
    let cfg = config_map_key(client, "kube-proxy", "config.conf").await?;
    from_kube_proxy(&cfg)
        .map(|v| (v, what.to_owned()))
        .ok_or(format!("{what} has no clusterCIDR"))
}

async fn service_cidrs(client: &Client) -> Found {
    let api: Api<ServiceCIDR> = Api::all(client.clone());
    let what = "the API server's ServiceCIDR kubernetes";
    match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some("kubernetes"))
            .and_then(|s| s.spec.as_ref()?.cidrs.as_ref())
            .map(|c| (c.join(","), what.to_owned()))
            .ok_or(format!("no {what}")),
        Err(e) => Err(format!("listing ServiceCIDRs: {e}")),
    }
}

/// The CIDR `which` of a `provider` cluster: the first source that says it, checked.
pub async fn detect(
    client: &Client,
    provider: Provider,
    which: Which,
) -> Result<Cidr, DetectError> {
    let mut tried = Vec::new();
    let mut attempts: Vec<Found> = Vec::new();
    match (provider, which) {
        (Provider::K3s, Which::Pod) => {
            attempts.push(Ok((K3S_POD_CIDR.into(), "K3s's default".into())))
        }
        (Provider::K3s, Which::Service) => {
            attempts.push(service_cidrs(client).await);
            attempts.push(Ok((K3S_SERVICE_CIDR.into(), "K3s's default".into())));
        }
        (_, Which::Pod) => {
            attempts.push(kubeadm(client, which).await);
            attempts.push(kube_proxy(client).await);
        }
        (_, Which::Service) => {
            attempts.push(kubeadm(client, which).await);
            attempts.push(service_cidrs(client).await);
        }
    }
    for a in attempts {
        match a {
            Ok((value, source_name)) => {
                return match first_v4(&value) {
                    Some(Ok(c)) => {
                        tracing::info!(cidr = %c, source = %source_name, "detected");
                        Ok(c)
                    }
                    _ => Err(DetectError::Invalid {
                        which,
                        source_name,
                        value,
                    }),
                };
            }
            Err(why) => tried.push(why),
        }
    }
    Err(DetectError::NotFound {
        which,
        tried: tried.join("; "),
    })
}
