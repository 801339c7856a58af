//! The remote pods' IPs as the home cluster reaches them: `MapIp{REMOTE_TO_LOCAL}` of the
//! home IPAM (cluster = the provider), cached per (local pod, remote IP); without an IPAM,
//! the provider's own IPs.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use ipam::service::{
    client::{Client, ClientError, ClientOptions},
    proto::{Direction, MapIpRequest},
};
use k8s_openapi::api::core::v1::PodStatus;

use super::key::Key;
use crate::VkConfig;

/// How long one call to the IPAM may take.
pub const IPAM_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an IP could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum IpError {
    /// The IPAM refused or could not be reached.
    #[error("MapIp of remote pod IP {ip} (provider {cluster})")]
    MapIp {
        /// The remote IP.
        ip: String,
        /// The provider's cluster ID.
        cluster: String,
        /// The gRPC status.
        #[source]
        source: tonic::Status,
    },
}

/// The mapper: the IPAM client (if any) and the cache.
pub struct Mapper {
    client: Option<Client>,
    cluster: String,
    cache: Mutex<HashMap<Key, BTreeMap<String, String>>>,
}

/// A client of the IPAM at `options` (none without), its connection made on first use and
/// each call bounded by [`IPAM_TIMEOUT`]: pod reflection's and resource reflection's.
pub fn lazy_client(options: Option<&ClientOptions>) -> Result<Option<Client>, ClientError> {
    let Some(options) = options else {
        return Ok(None);
    };
    let prepared = options.prepare()?;
    let channel = prepared
        .endpoint
        .clone()
        .timeout(IPAM_TIMEOUT)
        .connect_lazy();
    Ok(Some(prepared.client(channel)))
}

/// The remote pod's IPs in order (`podIPs`, else `podIP`).
pub fn remote_ips(status: &PodStatus) -> Vec<String> {
    match status.pod_ips.as_deref() {
        Some(ips) if !ips.is_empty() => ips.iter().map(|p| p.ip.clone()).collect(),
        _ => status.pod_ip.iter().cloned().collect(),
    }
}

impl Mapper {
    /// The mapper of `cfg` (its IPAM connection made on first use).
    pub fn new(cfg: &VkConfig) -> Result<Mapper, ClientError> {
        Mapper::with(cfg.ipam.as_ref(), cfg.foreign.cluster_id.to_string())
    }

    /// The mapper of the provider `cluster` through the IPAM at `options` (none: the
    /// provider's IPs as they are).
    pub fn with(options: Option<&ClientOptions>, cluster: String) -> Result<Mapper, ClientError> {
        Ok(Mapper {
            client: lazy_client(options)?,
            cluster,
            cache: Mutex::new(HashMap::new()),
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<Key, BTreeMap<String, String>>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The home view of `remote` (the remote pod's IPs) for the local pod `key`.
    pub async fn map(&self, key: &Key, remote: &[String]) -> Result<Vec<String>, IpError> {
        let Some(client) = &self.client else {
            return Ok(remote.to_vec());
        };
        let mut out = Vec::with_capacity(remote.len());
        for ip in remote {
            let cached = self.cache().get(key).and_then(|m| m.get(ip)).cloned();
            let mapped = match cached {
                Some(m) => m,
                None => {
                    let answer = client
                        .clone()
                        .map_ip(MapIpRequest {
                            cluster_id: self.cluster.clone(),
                            ip: ip.clone(),
                            direction: Direction::RemoteToLocal as i32,
                            holder: String::new(),
                        })
                        .await
                        .map_err(|source| IpError::MapIp {
                            ip: ip.clone(),
                            cluster: self.cluster.clone(),
                            source,
                        })?
                        .into_inner()
                        .ip;
                    tracing::debug!(pod = %key, remote = %ip, local = %answer, "pod IP mapped");
                    let mut cache = self.cache();
                    let entry = cache.entry(key.clone()).or_default();
                    // Only the current IPs are kept.
                    entry.retain(|r, _| remote.contains(r));
                    entry.insert(ip.clone(), answer.clone());
                    answer
                }
            };
            out.push(mapped);
        }
        Ok(out)
    }

    /// Forgets the local pod `key`.
    pub fn forget(&self, key: &Key) {
        let mut cache = self.cache();
        cache.remove(key);
        liqo_auth::compact::shrink(&mut cache);
    }
}

#[cfg(test)]
mod tests {
    use ipam::service::{
        proto::RemapRequest,
        server::{Security, Server},
    };

    use super::*;

    const PEER: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";

    fn key() -> Key {
        Key {
            namespace: "demo".into(),
            name: "web".into(),
        }
    }

    #[tokio::test]
    async fn without_an_ipam_the_providers_ips_are_kept() {
        let m = Mapper::with(None, PEER.into()).unwrap();
        let ips = vec!["10.244.0.9".to_owned()];
        assert_eq!(m.map(&key(), &ips).await.unwrap(), ips);
    }

    #[tokio::test]
    async fn remote_ips_are_mapped_by_the_ipam_and_cached() {
        let cfg = ipam::Config::new(
            "10.244.0.0/16".parse().unwrap(),
            "10.96.0.0/16".parse().unwrap(),
        );
        let service = ipam::service::Service::open(
            cfg,
            ipam::service::Overrides::default(),
            Box::new(ipam::store::MemStore::default()),
        )
        .unwrap();
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), &Security::default())
            .await
            .unwrap();
        let options = ClientOptions::new(format!("http://{}", server.local_addr()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            server
                .run(&service, async {
                    match stopped.await {
                        Ok(()) => {}
                        // The test ended without saying so: stop as well.
                        Err(_dropped) => {}
                    }
                })
                .await
        });
        let mut admin = ipam::service::client::connect(&options).await.unwrap();
        // The peer's pod CIDR overlaps ours: it is remapped.
        let peer = admin
            .remap(RemapRequest {
                cluster_id: PEER.into(),
                pod_cidr: "10.244.0.0/16".into(),
                external_cidr: "10.245.0.0/16".into(),
            })
            .await
            .unwrap()
            .into_inner();
        let (net, len) = peer.pod_view.split_once('/').unwrap();
        assert_eq!(len, "16", "{peer:?}");
        assert_ne!(net, "10.244.0.0", "{peer:?}");
        let net: std::net::Ipv4Addr = net.parse().unwrap();

        let m = Mapper::with(Some(&options), PEER.into()).unwrap();
        let got = m.map(&key(), &["10.244.3.9".to_owned()]).await.unwrap();
        let ip: std::net::Ipv4Addr = got[0].parse().unwrap();
        assert_eq!(ip.octets()[..2], net.octets()[..2], "{ip} outside {peer:?}");
        assert_eq!(ip.octets()[2..], [3, 9], "host bits kept");

        // An unknown provider: the IPAM's refusal is the error (the key is retried).
        let other = Mapper::with(
            Some(&options),
            "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9".into(),
        )
        .unwrap();
        let err = other
            .map(&key(), &["10.244.3.9".to_owned()])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("10.244.3.9"), "{err}");

        // Cached: answered with the IPAM stopped; a forgotten pod asks again and fails.
        stop.send(()).unwrap();
        serving.await.unwrap().unwrap();
        assert_eq!(
            m.map(&key(), &["10.244.3.9".to_owned()]).await.unwrap(),
            got
        );
        m.forget(&key());
        assert!(m.map(&key(), &["10.244.3.9".to_owned()]).await.is_err());
    }
}
