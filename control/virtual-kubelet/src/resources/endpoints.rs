//! The addresses of the reflected EndpointSlices as the provider reaches them: the home IPAM's
//! `MapIp{ENDPOINT}` (a home pod → the provider's view of our pods; any other address → an
//! address of our external CIDR, which the IPAM holds for this provider until
//! `UnmapEndpoint`). Answers are cached per slice; an external mapping is released when no
//! slice of this virtual kubelet uses its address any more (the IPAM counts per provider, so
//! two slices of one provider sharing an address are counted here). Without an IPAM, the
//! addresses are kept as they are.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use ipam::service::{
    client::{Client, ClientError, ClientOptions},
    proto::{Direction, MapIpRequest},
};

use crate::reflection::{ips::IPAM_TIMEOUT, key::Key};

/// Why an address could not be mapped or released.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The IPAM refused or could not be reached.
    #[error("{what} of endpoint address {ip} (provider {cluster})")]
    Ipam {
        /// `MapIp` or `UnmapEndpoint`.
        what: &'static str,
        /// The address.
        ip: String,
        /// The provider's cluster ID.
        cluster: String,
        /// The gRPC status.
        #[source]
        source: tonic::Status,
    },
}

#[derive(Default)]
struct State {
    /// Per slice: address → (its mapping, whether the IPAM holds an external address for it).
    slices: HashMap<Key, BTreeMap<String, (String, bool)>>,
    /// Per external-mapped address: the slices using it.
    users: HashMap<String, usize>,
    /// External-mapped addresses no slice uses whose release failed (retried by the next
    /// call).
    pending: Vec<String>,
}

/// The mapper of one provider.
pub struct Endpoints {
    client: Option<Client>,
    cluster: String,
    state: Mutex<State>,
}

impl Endpoints {
    /// The mapper of the provider `cluster` through the IPAM at `options` (none: addresses
    /// kept as they are).
    pub fn new(options: Option<&ClientOptions>, cluster: String) -> Result<Self, ClientError> {
        let client = match options {
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
        Ok(Endpoints {
            client,
            cluster,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update is whole under the lock: a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mappings of `addresses` for the slice `key`; the slice's addresses no longer listed
    /// are released.
    pub async fn map(
        &self,
        key: &Key,
        addresses: &[String],
    ) -> Result<BTreeMap<String, String>, EndpointError> {
        let Some(client) = &self.client else {
            return Ok(addresses.iter().map(|a| (a.clone(), a.clone())).collect());
        };
        let known = self.state().slices.get(key).cloned().unwrap_or_default();
        let mut next: BTreeMap<String, (String, bool)> = BTreeMap::new();
        for ip in addresses {
            if let Some(m) = known.get(ip) {
                next.insert(ip.clone(), m.clone());
                continue;
            }
            let answer = client
                .clone()
                .map_ip(MapIpRequest {
                    cluster_id: self.cluster.clone(),
                    ip: ip.clone(),
                    direction: Direction::Endpoint as i32,
                })
                .await
                .map_err(|source| EndpointError::Ipam {
                    what: "MapIp",
                    ip: ip.clone(),
                    cluster: self.cluster.clone(),
                    source,
                })?
                .into_inner();
            let external = !answer.external_ip.is_empty();
            tracing::debug!(slice = %key, %ip, seen = %answer.ip, external, "endpoint address mapped");
            if external {
                *self.state().users.entry(ip.clone()).or_insert(0) += 1;
            }
            // Recorded at once: a later failure in this call must not lose the count.
            self.state()
                .slices
                .entry(key.clone())
                .or_default()
                .insert(ip.clone(), (answer.ip.clone(), external));
            next.insert(ip.clone(), (answer.ip, external));
        }
        let gone: Vec<(String, bool)> = {
            let mut s = self.state();
            let entry = s.slices.entry(key.clone()).or_default();
            let gone = entry
                .iter()
                .filter(|(ip, _)| !next.contains_key(*ip))
                .map(|(ip, (_, ext))| (ip.clone(), *ext))
                .collect();
            *entry = next.clone();
            gone
        };
        self.release_addresses(gone).await?;
        Ok(next.into_iter().map(|(ip, (m, _))| (ip, m)).collect())
    }

    /// Releases every address of the slice `key` (its copy is gone).
    pub async fn release(&self, key: &Key) -> Result<(), EndpointError> {
        let gone: Vec<(String, bool)> = self
            .state()
            .slices
            .remove(key)
            .unwrap_or_default()
            .into_iter()
            .map(|(ip, (_, ext))| (ip, ext))
            .collect();
        self.release_addresses(gone).await
    }

    async fn release_addresses(&self, gone: Vec<(String, bool)>) -> Result<(), EndpointError> {
        let Some(client) = &self.client else {
            return Ok(());
        };
        let unmap: Vec<String> = {
            let mut s = self.state();
            for (ip, external) in gone {
                if !external {
                    continue;
                }
                let n = s.users.entry(ip.clone()).or_insert(1);
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.users.remove(&ip);
                    s.pending.push(ip);
                }
            }
            // Used again since a release failed: not released after all.
            let State { users, pending, .. } = &mut *s;
            pending.retain(|ip| !users.contains_key(ip));
            std::mem::take(pending)
        };
        let mut first_error = None;
        for ip in unmap {
            let r = client
                .clone()
                .unmap_endpoint(MapIpRequest {
                    cluster_id: self.cluster.clone(),
                    ip: ip.clone(),
                    direction: Direction::Endpoint as i32,
                })
                .await;
            match r {
                Ok(_) => tracing::debug!(%ip, "endpoint address released"),
                // Not held for this provider (released already, e.g. before a restart): done.
                Err(s) if s.code() == tonic::Code::InvalidArgument => {
                    tracing::debug!(%ip, answer = %s.message(), "endpoint address not held");
                }
                Err(source) => {
                    // Kept for the next call (the key is retried).
                    self.state().pending.push(ip.clone());
                    first_error.get_or_insert(EndpointError::Ipam {
                        what: "UnmapEndpoint",
                        ip,
                        cluster: self.cluster.clone(),
                        source,
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The addresses with an external mapping held, and how many slices use each.
    pub fn external(&self) -> BTreeMap<String, usize> {
        self.state()
            .users
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}
