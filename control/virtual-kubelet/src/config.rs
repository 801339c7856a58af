//! What one virtual kubelet runs with: the two API servers, the two clusters, the names of
//! its node and tenant namespace, its kubelet endpoint, the IPAM, and the tunables (upstream
//! `cmd/virtual-kubelet/root/flag.go`).

use std::{collections::BTreeMap, net::IpAddr, net::SocketAddr, path::PathBuf, time::Duration};

use control::{api::discovery::ClusterIdentity, names};
use kube::Client;

/// The clients of the provider's API server: `api` for requests (with a read timeout),
/// `watch` for watches (whose read timeout is above the server's watch timeout).
pub use liqo_auth::peer_client::PeerClient as Remote;

/// The configuration of one virtual kubelet.
#[derive(Clone)]
pub struct VkConfig {
    /// The home (local) API server, with the virtual kubelet's own identity.
    pub local: Client,
    /// The provider's API server, with our identity there.
    pub remote: Remote,
    /// The home cluster.
    pub home: ClusterIdentity,
    /// The provider.
    pub foreign: ClusterIdentity,
    /// Our tenant namespace for the provider (its ResourceOffer and NamespaceMap live there).
    pub tenant_namespace: String,
    /// The accepted ResourceOffer's name (in [`Self::tenant_namespace`]).
    pub offer: String,
    /// The virtual node's InternalIP: the address the home API server reaches the kubelet API
    /// at, and every offloaded pod's `hostIP`.
    pub node_ip: IpAddr,
    /// Where the kubelet API listens (its port is the node's kubelet endpoint).
    pub listen: SocketAddr,
    /// The CA of the client certificates the kubelet API accepts (the home API server's
    /// `--kubelet-client-certificate`); without it only `/healthz` is served.
    pub client_ca: Option<PathBuf>,
    /// The home IPAM (`MapIp` of the remote pods' IPs, the reflected EndpointSlices'
    /// addresses); without it pod IPs are reported as the provider sees them.
    pub ipam: Option<ipam::service::client::ClientOptions>,
    /// Whether the network to the provider is Liqo's (its TunnelEndpoint gates the node's
    /// readiness: `NetworkUnavailable`); not with another fabric, or none.
    pub liqo_network: bool,
    /// Pod reflection workers (`--pod-reflection-workers`).
    pub pod_workers: usize,
    /// The node Lease's duration (`--node-lease-duration`).
    pub lease_duration: Duration,
    /// How often the Lease is renewed and the provider pinged (`--node-ping-interval`).
    pub ping_interval: Duration,
    /// How long a ping may take (`--node-ping-timeout`).
    pub ping_timeout: Duration,
    /// Extra labels of the node (`--node-extra-labels`).
    pub extra_labels: BTreeMap<String, String>,
    /// API server support as asked for (`--enable-apiserver-support`): offloaded pods get
    /// tokens of their home ServiceAccounts and reach the home API server. Read it through
    /// [`VkConfig::api_support`] (a home API server given implies it).
    pub apiserver_support: bool,
    /// Where the provider's pods reach the home API server (`--home-api-server`; implies
    /// support); none with support on: found from `default/kubernetes` and the IPAM.
    pub home_api: Option<control::shadowpod::token::HomeApi>,
    /// Resource reflection workers per kind (`--<kind>-reflection-workers`; 0 turns the kind
    /// off).
    pub reflection: ReflectionWorkers,
}

/// Resource reflection workers per kind; 0 turns a kind's reflection off (its copies stay as
/// they are). EndpointSlices are reflected only with Services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReflectionWorkers {
    /// Services (`--service-reflection-workers`).
    pub service: usize,
    /// EndpointSlices (`--endpointslice-reflection-workers`).
    pub endpointslice: usize,
    /// Ingresses (`--ingress-reflection-workers`).
    pub ingress: usize,
    /// ConfigMaps (`--configmap-reflection-workers`).
    pub configmap: usize,
    /// Secrets (`--secret-reflection-workers`).
    pub secret: usize,
    /// ServiceAccounts (`--serviceaccount-reflection-workers`).
    pub serviceaccount: usize,
    /// PersistentVolumeClaims of class `liqo` bound on the virtual node
    /// (`--persistentvolumeclaim-reflection-workers`).
    pub persistentvolumeclaim: usize,
}

impl Default for ReflectionWorkers {
    /// Upstream's defaults: 10 for EndpointSlices, 3 for the others.
    fn default() -> Self {
        ReflectionWorkers {
            service: 3,
            endpointslice: 10,
            ingress: 3,
            configmap: 3,
            secret: 3,
            serviceaccount: 3,
            persistentvolumeclaim: 3,
        }
    }
}

/// A `kind=n,...` list refused, naming the item at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReflectionWorkers {
    /// Not `kind=count`.
    #[error("{0:?} is not kind=count")]
    NotAPair(String),
    /// The count does not parse.
    #[error("{item:?}: count {count:?}")]
    Count {
        /// The item.
        item: String,
        /// The count as given.
        count: String,
        /// Why.
        #[source]
        source: std::num::ParseIntError,
    },
    /// Not a reflected kind.
    #[error(
        "{0:?} is not a reflected kind (service, endpointslice, ingress, configmap, secret, \
         serviceaccount, persistentvolumeclaim)"
    )]
    Kind(String),
}

impl std::str::FromStr for ReflectionWorkers {
    type Err = InvalidReflectionWorkers;

    /// `kind=n,...` over the defaults (`service`, `endpointslice`, `ingress`, `configmap`,
    /// `secret`, `serviceaccount`, `persistentvolumeclaim`); an unknown kind or a bad count is refused, naming it.
    fn from_str(text: &str) -> Result<Self, InvalidReflectionWorkers> {
        ReflectionWorkers::parse_over(ReflectionWorkers::default(), text)
    }
}

impl ReflectionWorkers {
    /// Every kind off (ConfigMaps still reflect the root CA, which offloaded pods name).
    pub const NONE: ReflectionWorkers = ReflectionWorkers {
        service: 0,
        endpointslice: 0,
        ingress: 0,
        configmap: 0,
        secret: 0,
        serviceaccount: 0,
        persistentvolumeclaim: 0,
    };

    /// An in-process virtual kubelet's (the controller-manager's identity, whose role reads
    /// Services, Secrets and claims only): those, with the defaults' workers; the root CA.
    pub const IN_PROCESS: ReflectionWorkers = ReflectionWorkers {
        service: 3,
        secret: 3,
        persistentvolumeclaim: 3,
        ..ReflectionWorkers::NONE
    };

    /// `kind=n,...` over `base`; an unknown kind or a bad count is refused, naming it.
    pub fn parse_over(
        base: ReflectionWorkers,
        text: &str,
    ) -> Result<Self, InvalidReflectionWorkers> {
        let mut w = base;
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (kind, n) = item
                .split_once('=')
                .ok_or_else(|| InvalidReflectionWorkers::NotAPair(item.to_owned()))?;
            let n: usize = n
                .trim()
                .parse()
                .map_err(|source| InvalidReflectionWorkers::Count {
                    item: item.to_owned(),
                    count: n.to_owned(),
                    source,
                })?;
            let slot = match kind.trim() {
                "service" => &mut w.service,
                "endpointslice" => &mut w.endpointslice,
                "ingress" => &mut w.ingress,
                "configmap" => &mut w.configmap,
                "secret" => &mut w.secret,
                "serviceaccount" => &mut w.serviceaccount,
                "persistentvolumeclaim" => &mut w.persistentvolumeclaim,
                other => return Err(InvalidReflectionWorkers::Kind(other.to_owned())),
            };
            *slot = n;
        }
        Ok(w)
    }

    /// The flags of a `liqo-virtual-kubelet` process with these workers.
    pub fn args(&self) -> Vec<String> {
        [
            ("--service-reflection-workers", self.service),
            ("--endpointslice-reflection-workers", self.endpointslice),
            ("--ingress-reflection-workers", self.ingress),
            ("--configmap-reflection-workers", self.configmap),
            ("--secret-reflection-workers", self.secret),
            ("--serviceaccount-reflection-workers", self.serviceaccount),
            (
                "--persistentvolumeclaim-reflection-workers",
                self.persistentvolumeclaim,
            ),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_owned(), v.to_string()])
        .collect()
    }

    /// The workers of `kind`.
    pub fn of(&self, kind: control::reflection::Kind) -> usize {
        use control::reflection::Kind;
        match kind {
            Kind::Service => self.service,
            Kind::EndpointSlice => self.endpointslice,
            Kind::Ingress => self.ingress,
            Kind::ConfigMap => self.configmap,
            Kind::Secret => self.secret,
            Kind::ServiceAccount => self.serviceaccount,
            Kind::PersistentVolumeClaim => self.persistentvolumeclaim,
        }
    }
}

/// Pod reflection workers by default.
pub const DEFAULT_POD_WORKERS: usize = 10;
/// The Lease duration by default.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(40);
/// The ping and renewal interval by default.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);
/// The ping timeout by default.
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(1);
/// The kubelet API's port by default.
pub const DEFAULT_PORT: u16 = 10250;

impl VkConfig {
    /// Whether API server support is on (asked for, or implied by a given home API server).
    pub fn api_support(&self) -> bool {
        self.apiserver_support || self.home_api.is_some()
    }

    /// The virtual node's name: `liqo-<provider name>`.
    pub fn node_name(&self) -> String {
        names::virtual_node(&self.foreign.cluster_name).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_parse_over_the_defaults_and_refuse_naming_the_bad_part() {
        let w: ReflectionWorkers = "service=0, secret=7".parse().unwrap();
        assert_eq!(
            w,
            ReflectionWorkers {
                service: 0,
                secret: 7,
                ..ReflectionWorkers::default()
            }
        );
        assert_eq!(
            "".parse::<ReflectionWorkers>().unwrap(),
            ReflectionWorkers::default()
        );
        let e = "pods=3"
            .parse::<ReflectionWorkers>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"pods\""), "{e}");
        let e = "secret=many"
            .parse::<ReflectionWorkers>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("many"), "{e}");
        let e = "secret"
            .parse::<ReflectionWorkers>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("kind=count"), "{e}");
        let args = ReflectionWorkers::default().args();
        assert_eq!(args.len(), 14);
        assert_eq!(
            args[12..],
            ["--persistentvolumeclaim-reflection-workers", "3"]
        );
        assert_eq!(args[..2], ["--service-reflection-workers", "3"]);
    }
}
