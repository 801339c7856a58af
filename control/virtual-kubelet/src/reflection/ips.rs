//! The remote pods' IPs as the home cluster reaches them: `MapIp{REMOTE_TO_LOCAL}` of the
//! home IPAM (cluster = the provider), cached per (local pod, remote IP); without an IPAM,
//! the provider's own IPs.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use ipam::service::{
    client::{Client, ClientError},
    proto::{Direction, MapIpRequest},
};
use k8s_openapi::api::core::v1::PodStatus;

use super::Key;
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
        let client = match &cfg.ipam {
            Some(options) => {
                let prepared = options.prepare()?;
                let channel = prepared
                    .endpoint
                    .clone()
                    .timeout(IPAM_TIMEOUT)
                    .connect_lazy();
                Some(prepared.client(channel))
            }
            None => None,
        };
        Ok(Mapper {
            client,
            cluster: cfg.foreign.cluster_id.to_string(),
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
        self.cache().remove(key);
    }
}
