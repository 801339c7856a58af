//! The gateway's desired state: a YAML file ([`File`], with its [`defaults`]), validated into
//! [`Config`] before anything changes.
//!
//! Every error names the field by its path (`peers[1].remotePodCIDR: ...`), and a file that
//! fails validation is never applied: the running state stays as it was.
//!
//! Endpoint mappings (`localExternalCIDR`, `endpoints`) are checked in `config/endpoints.rs`; a
//! mapping may list a peer the file does not configure (the IPAM keeps a mapping while its peer
//! comes or goes): it takes effect when that peer is configured. The range checks every CIDR
//! field shares are in `config/ranges.rs`.

mod endpoints;
mod ranges;

use std::{collections::BTreeMap, net::SocketAddr, path::PathBuf};

use ipnet::Ipv4Net;
pub use liqo_types::EndpointMapping;
pub use liqo_types::GatewayPeer as PeerFile;
/// A refused configuration (names the field by its path).
pub use liqo_types::field::FieldError as ConfigError;
use liqo_types::names::IfName;
use liqo_types::{Cidr, PublicKey, field::bad};
use serde::{Deserialize, Serialize};

pub use endpoints::Endpoint;
use ranges::{overlaps, range};

/// The file as written (camelCase keys; unknown keys refused).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct File {
    /// Name of the gateway's network namespace (created and owned by the gateway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UDP port of the WireGuard socket (in the namespace the gateway runs in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen_port: Option<u16>,
    /// The private key file (created with mode 0600 if missing at start, unless `publicKey` is
    /// set). Read again at every apply: a key written there is switched to live
    /// (`keys::rotation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<String>,
    /// The public key of the key `privateKeyFile` must hold: the gateway runs the file's key
    /// only when it matches (otherwise the configuration is refused and the running key stays).
    /// Written right after a new key file, it brings the rotation to the gateway at once;
    /// without it, the file's key runs as it is (a key changed by hand is taken at the next
    /// apply or resync).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<PublicKey>,
    /// MTU of the tunnel device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Persistent keepalive in seconds for every peer (0 disables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<u16>,
    /// Microseconds a data-path thread keeps checking for packets after its last one before it
    /// sleeps (0: sleep at once). Trades a little CPU after each burst for the wake-up latency
    /// of an answer; see `wg::poller`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_poll_micros: Option<u32>,
    /// While the data path is lightly loaded, each lane's two threads live on the lane's CPU
    /// and a packet takes the lane of the CPU that sent or received it (a wake-up then costs no
    /// inter-processor interrupt: lower latency, above all on virtual machines); under load the
    /// threads spread and lanes are picked by flow. Default true; see `wg::affinity` and
    /// `wg::steering`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pin_when_idle: Option<bool>,
    /// While pinned, the data threads run in the `SCHED_IDLE` scheduling class, so that an
    /// application woken by an answer stays on its CPU (on virtual machines waking another vCPU
    /// costs tens of microseconds per packet). The class is left, with a doubling back-off, as
    /// soon as packets wait for the threads (a busy neighbour on the CPU). Needs
    /// `CAP_SYS_NICE`; default true; see `wg::idleclass`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_class: Option<bool>,
    /// The local pod CIDR.
    #[serde(rename = "localPodCIDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_pod_cidr: Option<Cidr>,
    /// /30 for the veth between the host and the gateway namespace.
    #[serde(rename = "linkCIDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_cidr: Option<Cidr>,
    /// Install routes to the peers' ranges in the host namespace (through the veth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_routes: Option<bool>,
    /// Our external CIDR (the IPAM's `List.external_cidr`): where our mapped endpoints live.
    #[serde(rename = "localExternalCIDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_external_cidr: Option<Cidr>,
    /// Peers.
    pub peers: Vec<PeerFile>,
    /// Local addresses exposed to peers through our external CIDR (the IPAM's `List.endpoints`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointMapping>,
}

pub mod defaults;

/// A validated peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Cluster ID.
    pub id: String,
    /// Public key.
    pub public_key: PublicKey,
    /// Configured endpoint.
    pub endpoint: Option<SocketAddr>,
    /// Keepalive seconds (0 = off).
    pub keepalive: u16,
    /// Its pods here.
    pub remote_pod_cidr: Ipv4Net,
    /// Its external CIDR here.
    pub remote_external_cidr: Option<Ipv4Net>,
    /// Our pods there.
    pub local_pod_cidr_at_peer: Ipv4Net,
    /// Our external CIDR there (the peer reaches our endpoints in it).
    pub local_external_cidr_at_peer: Option<Ipv4Net>,
}

impl Peer {
    /// The ranges routed to this peer (its allowed IPs).
    pub fn allowed(&self) -> Vec<Ipv4Net> {
        std::iter::once(self.remote_pod_cidr)
            .chain(self.remote_external_cidr)
            .collect()
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Gateway namespace.
    pub namespace: liqo_types::names::NetnsName,
    /// UDP port.
    pub listen_port: u16,
    /// Private key file.
    pub private_key_file: PathBuf,
    /// See [`File::public_key`].
    pub public_key: Option<PublicKey>,
    /// Tunnel MTU.
    pub mtu: u32,
    /// See [`File::busy_poll_micros`].
    pub busy_poll_micros: u32,
    /// See [`File::pin_when_idle`].
    pub pin_when_idle: bool,
    /// See [`File::idle_class`].
    pub idle_class: bool,
    /// Local pod CIDR.
    pub local_pod_cidr: Ipv4Net,
    /// Host-gateway link network.
    pub link_cidr: Ipv4Net,
    /// Install host routes.
    pub host_routes: bool,
    /// Our external CIDR.
    pub local_external_cidr: Option<Ipv4Net>,
    /// Peers by ID.
    pub peers: BTreeMap<String, Peer>,
    /// Endpoint mappings, in the file's order (real and external addresses each unique).
    pub endpoints: Vec<Endpoint>,
    /// Tunnel device name.
    pub tun: IfName,
    /// veth end in the host namespace.
    pub host_link: IfName,
    /// veth end in the gateway namespace.
    pub gateway_link: IfName,
}

impl Config {
    /// Host-side address of the link.
    pub fn host_addr(&self) -> Ipv4Net {
        Ipv4Net::new(
            self.link_cidr.hosts().next().expect("validated /30"),
            self.link_cidr.prefix_len(),
        )
        .expect("len")
    }

    /// Gateway-side address of the link.
    pub fn gateway_addr(&self) -> Ipv4Net {
        Ipv4Net::new(
            self.link_cidr.hosts().nth(1).expect("validated /30"),
            self.link_cidr.prefix_len(),
        )
        .expect("len")
    }
}

/// Whether a peer can be reached at `a` (not unspecified, broadcast, multicast or loopback).
fn usable_endpoint(a: SocketAddr) -> bool {
    match a.ip() {
        std::net::IpAddr::V4(ip) => {
            !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback())
        }
        std::net::IpAddr::V6(_) => false,
    }
}

impl File {
    /// Parses YAML text.
    pub fn parse(text: &str) -> Result<File, ConfigError> {
        liqo_types::field::yaml(text)
    }

    /// Checks every field and resolves defaults. `own_key` is the gateway's public key (a peer
    /// with the same key is refused, as is one with the key `publicKey` names).
    pub fn validate(&self, own_key: Option<PublicKey>) -> Result<Config, ConfigError> {
        let namespace = self.namespace.as_deref().unwrap_or(defaults::NAMESPACE);
        let namespace = namespace
            .parse()
            .map_err(|e| bad("namespace", format!("{e}")))?;
        let listen_port = self.listen_port.unwrap_or(defaults::LISTEN_PORT);
        if listen_port == 0 {
            return Err(bad("listenPort", "must be 1 to 65535"));
        }
        let mtu = self.mtu.unwrap_or(defaults::MTU);
        if !(576..=9000).contains(&mtu) {
            return Err(bad("mtu", format!("{mtu} is outside 576..=9000")));
        }
        let keepalive = self.keepalive.unwrap_or(defaults::KEEPALIVE);
        if keepalive > 3600 {
            return Err(bad(
                "keepalive",
                format!("{keepalive} s is more than an hour"),
            ));
        }
        let busy_poll_micros = self.busy_poll_micros.unwrap_or(defaults::BUSY_POLL_MICROS);
        if busy_poll_micros > 10_000 {
            return Err(bad(
                "busyPollMicros",
                format!("{busy_poll_micros} µs is more than 10 ms (a core spent for nothing)"),
            ));
        }
        let local = range(
            "localPodCIDR",
            self.local_pod_cidr
                .ok_or_else(|| bad("localPodCIDR", "is required"))?,
        )?;
        let link = match self.link_cidr {
            Some(c) => c.net(),
            None => defaults::LINK_CIDR.parse().expect("valid default"),
        };
        if link.prefix_len() != 30 {
            return Err(bad(
                "linkCIDR",
                format!("{link} must be a /30 (two host addresses)"),
            ));
        }
        if overlaps(&link, &local) {
            return Err(bad(
                "linkCIDR",
                format!("{link} overlaps localPodCIDR {local}"),
            ));
        }
        let mut peers = BTreeMap::new();
        let mut taken: Vec<(String, Ipv4Net)> =
            vec![("localPodCIDR".into(), local), ("linkCIDR".into(), link)];
        let external = self
            .local_external_cidr
            .map(|c| range("localExternalCIDR", c))
            .transpose()?;
        if let Some(n) = external {
            if let Some((who, t)) = taken.iter().find(|(_, t)| overlaps(t, &n)) {
                return Err(bad("localExternalCIDR", format!("{n} overlaps {who} {t}")));
            }
            taken.push(("localExternalCIDR".into(), n));
        }
        let mut keys: Vec<(PublicKey, String)> = Vec::new();
        for (i, p) in self.peers.iter().enumerate() {
            let f = |name: &str| format!("peers[{i}].{name}");
            let id = p.id.to_string();
            if peers.contains_key(&id) {
                return Err(bad(f("id"), format!("duplicate peer {id:?}")));
            }
            let public_key = p.public_key;
            if Some(public_key) == own_key || Some(public_key) == self.public_key {
                return Err(bad(f("publicKey"), "is this gateway's own public key"));
            }
            if let Some((_, other)) = keys.iter().find(|(k, _)| *k == public_key) {
                return Err(bad(f("publicKey"), format!("same key as peer {other:?}")));
            }
            keys.push((public_key, id.clone()));
            let endpoint = match p.endpoint {
                Some(a) if a.port() == 0 => return Err(bad(f("endpoint"), format!("{a}: port 0"))),
                Some(a) if a.is_ipv6() => {
                    return Err(bad(
                        f("endpoint"),
                        format!("{a}: IPv6 endpoints are not supported yet"),
                    ));
                }
                Some(a) if !usable_endpoint(a) => {
                    return Err(bad(
                        f("endpoint"),
                        format!("{a}: not a unicast address a peer can listen on"),
                    ));
                }
                e => e,
            };
            let keepalive = p.keepalive.unwrap_or(keepalive);
            if keepalive > 3600 {
                return Err(bad(
                    f("keepalive"),
                    format!("{keepalive} s is more than an hour"),
                ));
            }
            let remote_pod = range(&f("remotePodCIDR"), p.remote_pod_cidr)?;
            let remote_ext = p
                .remote_external_cidr
                .map(|c| range(&f("remoteExternalCIDR"), c))
                .transpose()?;
            for (name, n) in std::iter::once(("remotePodCIDR", remote_pod))
                .chain(remote_ext.map(|e| ("remoteExternalCIDR", e)))
            {
                if let Some((who, t)) = taken.iter().find(|(_, t)| overlaps(t, &n)) {
                    return Err(bad(f(name), format!("{n} overlaps {who} {t}")));
                }
                taken.push((f(name), n));
            }
            let at_peer = range(&f("localPodCIDRAtPeer"), p.local_pod_cidr_at_peer)?;
            if at_peer.prefix_len() != local.prefix_len() {
                return Err(bad(
                    f("localPodCIDRAtPeer"),
                    format!("{at_peer} must have the length of localPodCIDR {local}"),
                ));
            }
            let ext_at_peer = (p.local_external_cidr_at_peer)
                .map(|c| endpoints::external_at_peer(&f, c, external, at_peer))
                .transpose()?;
            peers.insert(
                id.clone(),
                Peer {
                    id,
                    public_key,
                    endpoint,
                    keepalive,
                    remote_pod_cidr: remote_pod,
                    remote_external_cidr: remote_ext,
                    local_pod_cidr_at_peer: at_peer,
                    local_external_cidr_at_peer: ext_at_peer,
                },
            );
        }
        let endpoints = endpoints::check(&self.endpoints, external, &taken)?;
        let ifname = |s: &str| s.parse::<IfName>().expect("constant names are valid");
        Ok(Config {
            namespace,
            listen_port,
            private_key_file: PathBuf::from(
                self.private_key_file
                    .as_deref()
                    .unwrap_or(defaults::PRIVATE_KEY_FILE),
            ),
            public_key: self.public_key,
            mtu,
            busy_poll_micros,
            pin_when_idle: self.pin_when_idle.unwrap_or(true),
            idle_class: self.idle_class.unwrap_or(true),
            local_pod_cidr: local,
            link_cidr: link,
            host_routes: self.host_routes.unwrap_or(true),
            local_external_cidr: external,
            peers,
            endpoints,
            tun: ifname(defaults::TUN),
            host_link: ifname(defaults::HOST_LINK),
            gateway_link: ifname(defaults::GATEWAY_LINK),
        })
    }
}

#[cfg(test)]
mod tests;
