//! The home API server as the provider's pods reach it (API server support): its address
//! ([`HomeApi`], found in `default/kubernetes`'s EndpointSlices by [`api_endpoint`]), the names
//! its certificate holds resolved to it ([`host_aliases`]), and the variables a kubelet gives
//! every container to locate its API server, all set to it ([`with_api_env`]).

use k8s_openapi::api::core::v1::{EnvVar, HostAlias};

/// The environment variables that locate the API server.
pub const HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// Its port.
pub const PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";

/// The home API server as the provider's pods reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeApi {
    /// Its address (through the tunnel).
    pub host: String,
    /// Its port.
    pub port: u16,
}

/// A `host:port` refused, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidHomeApi {
    /// No `:port`.
    #[error("{0:?} is not host:port")]
    NotHostPort(String),
    /// Nothing before the port.
    #[error("{0:?} has no host")]
    NoHost(String),
    /// The port does not parse.
    #[error("{text:?}: port {port:?}")]
    Port {
        /// As given.
        text: String,
        /// The port as given.
        port: String,
        /// Why.
        #[source]
        source: std::num::ParseIntError,
    },
}

impl std::str::FromStr for HomeApi {
    type Err = InvalidHomeApi;

    /// `host:port` (`10.70.0.1:6443`, `api.rome.example:443`).
    fn from_str(text: &str) -> Result<Self, InvalidHomeApi> {
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| InvalidHomeApi::NotHostPort(text.to_owned()))?;
        let port = port.parse::<u16>().map_err(|source| InvalidHomeApi::Port {
            text: text.to_owned(),
            port: port.to_owned(),
            source,
        })?;
        if host.is_empty() {
            return Err(InvalidHomeApi::NoHost(text.to_owned()));
        }
        Ok(HomeApi {
            host: host.to_owned(),
            port,
        })
    }
}

impl std::fmt::Display for HomeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The names the home API server's certificate holds for it in every cluster: the remote pod
/// resolves them to the home API server's address ([`host_aliases`]), so that its clients'
/// TLS checks pass and the provider's own `kubernetes` Service is not used by mistake.
pub const API_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The host the remote pod's clients dial: the certificate's `kubernetes.default.svc` when
/// the address is an IP (aliased to it), else the given name.
pub fn dial_host(api: &HomeApi) -> &str {
    if api.host.parse::<std::net::IpAddr>().is_ok() {
        API_NAMES[2]
    } else {
        &api.host
    }
}

/// `aliases` plus the home API server's names at its address (an IP; a name needs none).
pub fn host_aliases(aliases: Option<Vec<HostAlias>>, api: &HomeApi) -> Option<Vec<HostAlias>> {
    if api.host.parse::<std::net::IpAddr>().is_err() {
        return aliases;
    }
    let mut aliases: Vec<HostAlias> = aliases
        .unwrap_or_default()
        .into_iter()
        .map(|mut a| {
            // Ours win: the names point at the home API server only.
            if let Some(h) = a.hostnames.as_mut() {
                h.retain(|n| !API_NAMES.contains(&n.as_str()));
            }
            a
        })
        .filter(|a| a.hostnames.as_ref().is_some_and(|h| !h.is_empty()))
        .collect();
    aliases.push(HostAlias {
        ip: api.host.clone(),
        hostnames: Some(API_NAMES.iter().map(|n| (*n).to_owned()).collect()),
    });
    Some(aliases)
}

/// The port of the `kubernetes` Service (443, as kube-apiserver makes it): the kubelet names
/// its service-link variables after it (`KUBERNETES_PORT_443_TCP`).
pub const SERVICE_PORT: u16 = 443;

/// The variables a kubelet gives every container to locate its API server (the `kubernetes`
/// Service's links), as `(name, value)` pointing at `api`: [`HOST_ENV`] the name its clients
/// dial ([`dial_host`]), the address variables (`KUBERNETES_PORT*`) its address, every port
/// its port. The provider's kubelet sets none of these over a pod's own.
pub fn api_env(api: &HomeApi) -> Vec<(String, String)> {
    let port = api.port.to_string();
    let url = format!("tcp://{}:{}", api.host, api.port);
    let link = format!("KUBERNETES_PORT_{SERVICE_PORT}_TCP");
    vec![
        (HOST_ENV.to_owned(), dial_host(api).to_owned()),
        (PORT_ENV.to_owned(), port.clone()),
        (format!("{PORT_ENV}_HTTPS"), port.clone()),
        ("KUBERNETES_PORT".to_owned(), url.clone()),
        (link.clone(), url),
        (format!("{link}_PROTO"), "tcp".to_owned()),
        (format!("{link}_PORT"), port),
        (format!("{link}_ADDR"), api.host.clone()),
    ]
}

/// `env` with the API server variables ([`api_env`]) set to `api` (replacing any).
pub fn with_api_env(env: Option<Vec<EnvVar>>, api: &HomeApi) -> Option<Vec<EnvVar>> {
    let ours = api_env(api);
    let mut env: Vec<EnvVar> = env
        .unwrap_or_default()
        .into_iter()
        .filter(|e| !ours.iter().any(|(n, _)| *n == e.name))
        .collect();
    env.extend(ours.into_iter().map(|(name, value)| EnvVar {
        name,
        value: Some(value),
        value_from: None,
    }));
    Some(env)
}

/// The home API server's address and HTTPS port from the EndpointSlices of
/// `default/kubernetes`: the lowest ready address (the same on every restart), the port named
/// `https` (else the first); none when no slice publishes one.
pub fn api_endpoint(
    slices: &[k8s_openapi::api::discovery::v1::EndpointSlice],
) -> Option<(String, u16)> {
    slices
        .iter()
        .filter_map(|s| {
            let port = s
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some("https"))
                .or_else(|| s.ports.iter().flatten().next())?
                .port?;
            let port = u16::try_from(port).ok()?;
            let ip = s
                .endpoints
                .iter()
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                .flat_map(|e| e.addresses.iter())
                .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
                .min()?;
            Some((ip, port))
        })
        .min()
        .map(|(ip, port)| (ip.to_string(), port))
}
