//! The addresses of the reflected EndpointSlices as the provider reaches them: the home IPAM's
//! `MapIp{ENDPOINT}` (a home pod → the provider's view of our pods; any other address → an
//! address of our external CIDR, which the IPAM holds for this provider until
//! `UnmapEndpoint`). Answers are cached per slice, and each copy records them (an annotation)
//! so that a restarted virtual kubelet releases what a copy held. An address is released when
//! no slice of this virtual kubelet uses it any more (the IPAM counts per provider, so slices
//! of one provider sharing an address are counted here). Every map and release is one
//! critical section, IPAM calls included: a release never races a new use of its address.
//! The IPAM's holds are this mapper's own (its holder): another component's hold of the same
//! address for the same provider is never dropped here. At startup a sweep drops the holds no
//! slice uses (one taken just before a crash, before its copy recorded it). Without an IPAM,
//! addresses are kept as they are.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ipam::service::{
    client::{Client, ClientError, ClientOptions},
    proto::{Direction, Empty, MapIpRequest},
};
use tokio::sync::Mutex;

use crate::reflection::key::Key;

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
    /// The copies' recorded addresses could not be read (the sweep drops nothing then).
    #[error("reading the recorded addresses of the EndpointSlice copies on provider {cluster}")]
    Copies {
        /// The provider's cluster ID.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A copy's record of its addresses does not read (the sweep drops nothing then).
    #[error("EndpointSlice {namespace}/{name} on provider {cluster}")]
    Recorded {
        /// The provider's cluster ID.
        cluster: String,
        /// The copy's namespace.
        namespace: String,
        /// The copy.
        name: String,
        /// The annotation at fault.
        #[source]
        source: liqo_types::FieldError,
    },
    /// The IPAM's mappings could not be listed (the sweep drops nothing then).
    #[error("listing the IPAM's endpoint mappings")]
    List(#[source] tonic::Status),
}

/// Of the IPAM's endpoint mappings, the addresses `holder` holds for `cluster` that are not
/// in `used`.
pub fn strays(
    listed: &[ipam::service::proto::Endpoint],
    cluster: &str,
    holder: &str,
    used: &BTreeSet<String>,
) -> Vec<String> {
    listed
        .iter()
        .filter(|e| {
            e.holds
                .iter()
                .any(|h| h.cluster_id == cluster && h.holder == holder)
        })
        .filter(|e| !used.contains(&e.ip))
        .map(|e| e.ip.clone())
        .collect()
}

#[derive(Default)]
struct State {
    /// Per slice: address → its mapping.
    slices: HashMap<Key, BTreeMap<String, String>>,
    /// Per address: the slices using it.
    users: HashMap<String, usize>,
    /// Per slice: the addresses it no longer lists, still counted until its copy is written
    /// without them (the provider keeps reaching them meanwhile).
    retiring: HashMap<Key, BTreeMap<String, String>>,
    /// Addresses no slice uses whose release failed (retried by the next call).
    pending: Vec<String>,
}

/// The mapper of one provider.
pub struct Endpoints {
    client: Option<Client>,
    cluster: String,
    holder: &'static str,
    state: Mutex<State>,
}

impl State {
    /// Takes the slice's entry, seeded from what its copy recorded if none is cached (after a
    /// restart: those addresses count as used); whether it was seeded (its answers are to be
    /// asked again: the IPAM may have released them since).
    fn take(
        &mut self,
        key: &Key,
        recorded: &BTreeMap<String, String>,
    ) -> (BTreeMap<String, String>, bool) {
        if let Some(known) = self.slices.remove(key) {
            return (known, false);
        }
        for ip in recorded.keys() {
            *self.users.entry(ip.clone()).or_insert(0) += 1;
            // In use again: a failed release must not be retried.
            self.pending.retain(|p| p != ip);
        }
        (recorded.clone(), true)
    }

    /// One use of each of `gone` ended: those no slice uses any more are to be released.
    fn drop_uses(&mut self, gone: impl IntoIterator<Item = String>) {
        for ip in gone {
            let n = self.users.entry(ip.clone()).or_insert(1);
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.users.remove(&ip);
                self.pending.push(ip);
            }
        }
    }
}

impl Endpoints {
    /// The mapper of the provider `cluster` through the IPAM at `options` (none: addresses
    /// kept as they are).
    pub fn new(
        options: Option<&ClientOptions>,
        cluster: String,
        holder: &'static str,
    ) -> Result<Self, ClientError> {
        let client = crate::reflection::ips::lazy_client(options)?;
        Ok(Endpoints {
            client,
            cluster,
            holder,
            state: Mutex::new(State::default()),
        })
    }

    fn error(&self, what: &'static str, ip: &str, source: tonic::Status) -> EndpointError {
        EndpointError::Ipam {
            what,
            ip: ip.to_owned(),
            cluster: self.cluster.clone(),
            source,
        }
    }

    /// The mappings of `addresses` for the slice `key` (whose copy recorded `recorded`); the
    /// slice's addresses no longer listed are released.
    pub async fn map(
        &self,
        key: &Key,
        addresses: &[String],
        recorded: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, EndpointError> {
        let Some(client) = &self.client else {
            return Ok(addresses.iter().map(|a| (a.clone(), a.clone())).collect());
        };
        let mut s = self.state.lock().await;
        let (mut known, seeded) = s.take(key, recorded);
        // Addresses retiring from this slice that it lists again: still counted.
        let mut retiring = s.retiring.remove(key).unwrap_or_default();
        for ip in addresses {
            if let Some(m) = retiring.remove(ip) {
                known.insert(ip.clone(), m);
            }
        }
        if !retiring.is_empty() {
            s.retiring.insert(key.clone(), retiring);
        }
        let mut failure = None;
        for ip in addresses {
            let counted = known.contains_key(ip);
            if counted && !seeded {
                continue;
            }
            let answer = client
                .clone()
                .map_ip(MapIpRequest {
                    cluster_id: self.cluster.clone(),
                    ip: ip.clone(),
                    direction: Direction::Endpoint as i32,
                    holder: self.holder.into(),
                })
                .await;
            match answer {
                Ok(a) => {
                    let a = a.into_inner();
                    tracing::debug!(slice = %key, %ip, seen = %a.ip, "endpoint address mapped");
                    if !counted {
                        *s.users.entry(ip.clone()).or_insert(0) += 1;
                    }
                    s.pending.retain(|p| p != ip);
                    known.insert(ip.clone(), a.ip);
                }
                Err(source) => {
                    failure = Some(self.error("MapIp", ip, source));
                    break;
                }
            }
        }
        if let Some(e) = failure {
            // What was mapped stays counted: the next call carries on.
            s.slices.insert(key.clone(), known);
            return Err(e);
        }
        // The addresses no longer listed retire: released once the copy is written
        // without them ([`Endpoints::written`]).
        let (kept, gone): (BTreeMap<_, _>, BTreeMap<_, _>) = known
            .into_iter()
            .partition(|(ip, _)| addresses.contains(ip));
        if !gone.is_empty() {
            s.retiring.entry(key.clone()).or_default().extend(gone);
        }
        s.slices.insert(key.clone(), kept.clone());
        self.flush(client, &mut s).await;
        Ok(kept)
    }

    /// The copy of slice `key` is written as last mapped: the addresses it no longer holds
    /// are released.
    pub async fn written(&self, key: &Key) {
        let Some(client) = &self.client else { return };
        let mut s = self.state.lock().await;
        if let Some(gone) = s.retiring.remove(key) {
            s.drop_uses(gone.into_keys());
            self.flush(client, &mut s).await;
        }
    }

    /// Releases every address of the slice `key` (its copy, which recorded `recorded`, is
    /// gone or never was).
    pub async fn release(&self, key: &Key, recorded: &BTreeMap<String, String>) {
        let Some(client) = &self.client else { return };
        let mut s = self.state.lock().await;
        let (known, _) = s.take(key, recorded);
        let retiring = s.retiring.remove(key).unwrap_or_default();
        s.drop_uses(known.into_keys().chain(retiring.into_keys()));
        self.flush(client, &mut s).await;
    }

    /// Releases the slices of the local namespace `namespace` (no longer offloaded).
    pub async fn release_namespace(&self, namespace: &str) {
        let Some(client) = &self.client else { return };
        let mut s = self.state.lock().await;
        let keys: Vec<Key> = s
            .slices
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        let retiring: Vec<Key> = s
            .retiring
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        for k in keys {
            let known = s.slices.remove(&k).unwrap_or_default();
            s.drop_uses(known.into_keys());
        }
        for k in retiring {
            let gone = s.retiring.remove(&k).unwrap_or_default();
            s.drop_uses(gone.into_keys());
        }
        self.flush(client, &mut s).await;
    }

    /// Drops the holds no slice uses: `recorded` reads the addresses the copies on the
    /// provider record (before the lock: a copy written since was mapped by this process, so
    /// its addresses are counted), then, under the lock, the counted addresses and the IPAM's
    /// listing (no map or release runs meanwhile). Returns the addresses dropped; a failure to
    /// read either side drops nothing.
    pub async fn sweep<F, Fut>(&self, recorded: F) -> Result<Vec<String>, EndpointError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<BTreeSet<String>, EndpointError>>,
    {
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let mut used = recorded().await?;
        let mut s = self.state.lock().await;
        used.extend(s.users.keys().cloned());
        let listed = client
            .clone()
            .list(Empty {})
            .await
            .map_err(EndpointError::List)?
            .into_inner();
        let strays = strays(&listed.endpoints, &self.cluster, self.holder, &used);
        s.pending.extend(strays.iter().cloned());
        self.flush(client, &mut s).await;
        Ok(strays)
    }

    /// Releases the addresses no slice uses; a failure keeps the address for the next call
    /// (logged: it is no caller's own error).
    async fn flush(&self, client: &Client, s: &mut State) {
        for ip in std::mem::take(&mut s.pending) {
            let r = client
                .clone()
                .unmap_endpoint(MapIpRequest {
                    cluster_id: self.cluster.clone(),
                    ip: ip.clone(),
                    direction: Direction::Endpoint as i32,
                    holder: self.holder.into(),
                })
                .await;
            match r {
                Ok(_) => tracing::debug!(%ip, "endpoint address released"),
                // Not held for this provider (a pod address, or released already): done.
                Err(st) if st.code() == tonic::Code::InvalidArgument => {
                    tracing::debug!(%ip, answer = %st.message(), "endpoint address not held");
                }
                Err(source) => {
                    let e = self.error("UnmapEndpoint", &ip, source);
                    tracing::warn!(error = %liqo_types::chain(&e), "releasing an endpoint address, retried later");
                    s.pending.push(ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ipam::service::proto::{Endpoint, Hold};

    use super::*;

    fn endpoint(ip: &str, holds: &[(&str, &str)]) -> Endpoint {
        Endpoint {
            ip: ip.into(),
            external_ip: String::new(),
            peers: Vec::new(),
            holds: holds
                .iter()
                .map(|(c, h)| Hold {
                    cluster_id: (*c).into(),
                    holder: (*h).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn strays_are_our_holds_for_our_provider_that_nothing_uses() {
        let listed = [
            endpoint("192.168.0.1", &[("milan", "virtual-kubelet")]),
            endpoint("192.168.0.2", &[("milan", "virtual-kubelet")]),
            endpoint("192.168.0.3", &[("milan", "liqoctl-in-band")]),
            endpoint("192.168.0.4", &[("turin", "virtual-kubelet")]),
            endpoint(
                "192.168.0.5",
                &[("milan", "virtual-kubelet"), ("milan", "liqoctl-in-band")],
            ),
        ];
        let used = BTreeSet::from(["192.168.0.2".to_owned()]);
        assert_eq!(
            strays(&listed, "milan", "virtual-kubelet", &used),
            ["192.168.0.1", "192.168.0.5"]
        );
        assert!(strays(&listed, "rome", "virtual-kubelet", &used).is_empty());
    }
}
