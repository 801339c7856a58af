//! The persisted state: configuration, every peer's ranges and views, every endpoint mapping.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::{ClusterId, Holder};

/// The default pools (as upstream Liqo): every private IPv4 range.
pub const DEFAULT_POOLS: [&str; 3] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];

/// The default local external CIDR (as upstream Liqo), used unless it collides.
pub const DEFAULT_EXTERNAL_CIDR: &str = "10.70.0.0/16";

/// What the operator configures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The local pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// The local service CIDR.
    pub service_cidr: Ipv4Net,
    /// The requested local external CIDR (remapped like any other range if it collides).
    pub external_cidr: Ipv4Net,
    /// Pools remapped ranges are taken from; must not overlap each other.
    pub pools: Vec<Ipv4Net>,
    /// Subnets never handed out.
    pub reserved: Vec<Ipv4Net>,
}

impl Config {
    /// A configuration with the default pools and external CIDR.
    pub fn new(pod_cidr: Ipv4Net, service_cidr: Ipv4Net) -> Config {
        Config {
            pod_cidr,
            service_cidr,
            external_cidr: DEFAULT_EXTERNAL_CIDR.parse().expect("literal"),
            pools: DEFAULT_POOLS
                .iter()
                .map(|p| p.parse().expect("literal"))
                .collect(),
            reserved: Vec::new(),
        }
    }
}

/// One peer: what it announced, how we see it, and how it sees us.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Peer {
    /// Its cluster ID.
    pub id: ClusterId,
    /// Its pod CIDR, as it announced it.
    pub pod_cidr: Ipv4Net,
    /// Its external CIDR, as it announced it.
    pub external_cidr: Ipv4Net,
    /// Where its pods appear here.
    pub pod_view: Ipv4Net,
    /// Where its external CIDR appears here.
    pub external_view: Ipv4Net,
    /// Where our pods appear in the peer (its decision), once known.
    pub our_pod_view: Option<Ipv4Net>,
    /// Where our external CIDR appears in the peer, once known.
    pub our_external_view: Option<Ipv4Net>,
}

/// A local non-pod IP exposed to peers through the external CIDR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The real IP (a node, an external service).
    pub ip: Ipv4Addr,
    /// Its address in the local external CIDR.
    pub external_ip: Ipv4Addr,
    /// Peers that use the mapping, each with the holders that took it for that peer (state
    /// written before holders lists the peers: each held by the unnamed holder).
    #[serde(deserialize_with = "holders")]
    pub peers: BTreeMap<ClusterId, BTreeSet<Holder>>,
}

/// The peers of an endpoint: a map of holders, or the list of peers written before holders.
fn holders<'de, D>(d: D) -> Result<BTreeMap<ClusterId, BTreeSet<Holder>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Peers {
        Held(BTreeMap<ClusterId, BTreeSet<Holder>>),
        Listed(BTreeSet<ClusterId>),
    }
    Ok(match Peers::deserialize(d)? {
        Peers::Held(m) => m,
        Peers::Listed(l) => l
            .into_iter()
            .map(|id| (id, BTreeSet::from([Holder::default()])))
            .collect(),
    })
}

/// Everything the IPAM must keep across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Format version.
    pub version: u32,
    /// The configuration in force.
    pub config: Config,
    /// The local external CIDR actually in use.
    pub external_cidr: Ipv4Net,
    /// Peers, by cluster ID.
    pub peers: Vec<Peer>,
    /// Endpoint mappings, by IP.
    pub endpoints: Vec<Endpoint>,
    /// Recently released peers, oldest first: a peer that comes back with the same CIDRs gets
    /// its old ranges again when they are still free.
    #[serde(default)]
    pub released: Vec<Peer>,
}
