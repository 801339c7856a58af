//! The agent's desired state: the cluster's nodes, which one is the gateway, and the remote
//! ranges, from a YAML file validated before anything changes (errors name the field).

use std::{collections::BTreeMap, net::Ipv4Addr};

use ipnet::Ipv4Net;
pub use liqo_types::OverlayNode as NodeFile;
/// A refused configuration (names the field by its path).
pub use liqo_types::field::FieldError as ConfigError;
use liqo_types::names::IfName;
use liqo_types::{Cidr, field::bad};
use serde::{Deserialize, Serialize};

/// Defaults (as upstream Liqo's v0.5 overlay).
pub mod defaults {
    /// VXLAN device.
    pub const DEVICE: &str = "liqo.vxlan";
    /// VXLAN network identifier.
    pub const VNI: u32 = 18952;
    /// VXLAN UDP port (not 4789, to stay clear of CNIs using VXLAN).
    pub const PORT: u16 = 4879;
    /// Overlay MTU (1500 minus VXLAN's 50 bytes).
    pub const MTU: u32 = 1450;
    /// The gateway's tunnel MTU (`liqo-gateway`'s default `mtu`).
    pub const TUNNEL_MTU: u32 = 1420;
    /// Routing table and rule priority.
    pub const TABLE: u32 = 18952;
    /// The gateway's host-side link (the gateway's own default).
    pub const GATEWAY_INTERFACE: &str = liqo_types::GATEWAY_HOST_LINK;
}

/// The file as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct File {
    /// This node's name.
    pub node: String,
    /// The node running the gateway.
    pub gateway: String,
    /// Every node of the cluster.
    pub nodes: Vec<NodeFile>,
    /// The remote clusters' ranges as they appear here (pods and external CIDRs of every peer).
    #[serde(rename = "remoteCIDRs")]
    pub remote_cidrs: Vec<Cidr>,
    /// VXLAN device name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// VXLAN network identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vni: Option<u32>,
    /// VXLAN UDP port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Overlay MTU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// MTU of the gateway's tunnel (the gateway's `mtu`): packets to remote ranges larger than
    /// this (or than the overlay MTU) are refused with "fragmentation needed" by the node that
    /// sends them, so every sender learns the path MTU.
    #[serde(rename = "tunnelMTU", skip_serializing_if = "Option::is_none")]
    pub tunnel_mtu: Option<u32>,
    /// Underlay interface the VXLAN device sends through (optional).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub underlay_interface: Option<String>,
    /// On the gateway node: the link through which traffic from remote clusters arrives from
    /// the gateway (the gateway's host-side veth, `liqo.host` by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_interface: Option<String>,
}

/// A validated node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Underlay address.
    pub address: Ipv4Addr,
    /// Pod CIDR.
    pub pod_cidr: Ipv4Net,
}

impl Node {
    /// The node's overlay address: 240.b.c.d for underlay a.b.c.d (as upstream Liqo).
    pub fn overlay_ip(&self) -> Ipv4Addr {
        let o = self.address.octets();
        Ipv4Addr::new(240, o[1], o[2], o[3])
    }

    /// The node's VXLAN MAC, derived from its overlay address (locally administered), so every
    /// node knows every other's without ARP.
    pub fn mac(&self) -> [u8; 6] {
        let o = self.address.octets();
        [0x02, 0x4c, 0x51, o[1], o[2], o[3]]
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// This node.
    pub me: String,
    /// The gateway node.
    pub gateway: String,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Node>,
    /// Remote ranges.
    pub remote_cidrs: Vec<Ipv4Net>,
    /// Device.
    pub device: IfName,
    /// VNI.
    pub vni: u32,
    /// Port.
    pub port: u16,
    /// MTU of the VXLAN device.
    pub mtu: u32,
    /// MTU of the gateway's tunnel.
    pub tunnel_mtu: u32,
    /// Underlay interface.
    pub underlay: Option<IfName>,
    /// See [`File::gateway_interface`].
    pub gateway_interface: IfName,
}

impl Config {
    /// This node.
    pub fn me(&self) -> &Node {
        &self.nodes[&self.me]
    }

    /// The gateway node.
    pub fn gateway(&self) -> &Node {
        &self.nodes[&self.gateway]
    }

    /// Whether this node runs the gateway.
    pub fn is_gateway(&self) -> bool {
        self.me == self.gateway
    }

    /// The other nodes.
    pub fn others(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().filter(|n| n.name != self.me)
    }

    /// The largest packet that reaches a remote range: through the overlay to the gateway node,
    /// then through the tunnel.
    pub fn remote_mtu(&self) -> u32 {
        self.mtu.min(self.tunnel_mtu)
    }
}

/// The overlay's own addresses (240.b.c.d for node a.b.c.d).
pub const OVERLAY_RANGE: Ipv4Net = match Ipv4Net::new(Ipv4Addr::new(240, 0, 0, 0), 8) {
    Ok(n) => n,
    Err(_) => panic!("valid"),
};

pub use liqo_types::addr::unusable_node_address;

impl File {
    /// Parses YAML.
    pub fn parse(text: &str) -> Result<File, ConfigError> {
        liqo_types::field::yaml(text)
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let mut nodes = BTreeMap::new();
        let mut overlay: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let f = |x: &str| format!("nodes[{i}].{x}");
            if n.name.is_empty() {
                return Err(bad(f("name"), "is empty"));
            }
            if nodes.contains_key(&n.name) {
                return Err(bad(f("name"), format!("duplicate node {:?}", n.name)));
            }
            let address = n.address;
            if let Some(why) = unusable_node_address(address) {
                return Err(bad(
                    f("address"),
                    format!("{address} cannot carry the overlay: {why}"),
                ));
            }
            let node = Node {
                name: n.name.clone(),
                address,
                pod_cidr: n
                    .pod_cidr
                    .range()
                    .map_err(|e| bad(f("podCIDR"), e.to_string()))?
                    .net(),
            };
            if node.pod_cidr.contains(&OVERLAY_RANGE) || OVERLAY_RANGE.contains(&node.pod_cidr) {
                return Err(bad(
                    f("podCIDR"),
                    format!("{} covers the overlay range {OVERLAY_RANGE}", node.pod_cidr),
                ));
            }
            if let Some(other) = overlay.insert(node.overlay_ip(), n.name.clone()) {
                return Err(bad(
                    f("address"),
                    format!(
                        "{address} gives the same overlay address {} as node {other:?}",
                        node.overlay_ip()
                    ),
                ));
            }
            if let Some(o) = nodes.values().find(|o: &&Node| {
                o.pod_cidr.contains(&node.pod_cidr) || node.pod_cidr.contains(&o.pod_cidr)
            }) {
                return Err(bad(
                    f("podCIDR"),
                    format!(
                        "{} overlaps node {:?}'s {}",
                        node.pod_cidr, o.name, o.pod_cidr
                    ),
                ));
            }
            nodes.insert(n.name.clone(), node);
        }
        if !nodes.contains_key(&self.node) {
            return Err(bad("node", format!("{:?} is not in nodes", self.node)));
        }
        if !nodes.contains_key(&self.gateway) {
            return Err(bad(
                "gateway",
                format!("{:?} is not in nodes", self.gateway),
            ));
        }
        let mut remote_cidrs: Vec<Ipv4Net> = Vec::new();
        for (i, r) in self.remote_cidrs.iter().enumerate() {
            let n = r
                .range()
                .map_err(|e| bad(format!("remoteCIDRs[{i}]"), e.to_string()))?
                .net();
            if n.contains(&OVERLAY_RANGE) || OVERLAY_RANGE.contains(&n) {
                return Err(bad(
                    format!("remoteCIDRs[{i}]"),
                    format!("{n} overlaps the overlay range {OVERLAY_RANGE}"),
                ));
            }
            if let Some(node) = nodes
                .values()
                .find(|x| x.pod_cidr.contains(&n) || n.contains(&x.pod_cidr))
            {
                return Err(bad(
                    format!("remoteCIDRs[{i}]"),
                    format!(
                        "{n} overlaps node {:?}'s pod CIDR {}",
                        node.name, node.pod_cidr
                    ),
                ));
            }
            if let Some(o) = remote_cidrs
                .iter()
                .find(|o| o.contains(&n) || n.contains(*o))
            {
                return Err(bad(
                    format!("remoteCIDRs[{i}]"),
                    format!("{n} overlaps {o}"),
                ));
            }
            remote_cidrs.push(n);
        }
        let device: IfName = self
            .device
            .as_deref()
            .unwrap_or(defaults::DEVICE)
            .parse()
            .map_err(|e| bad("device", format!("{e}")))?;
        let vni = self.vni.unwrap_or(defaults::VNI);
        if vni == 0 || vni >= 1 << 24 {
            return Err(bad("vni", format!("{vni} is outside 1..16777215")));
        }
        let port = self.port.unwrap_or(defaults::PORT);
        if port == 0 {
            return Err(bad("port", "must be 1 to 65535"));
        }
        let mtu = self.mtu.unwrap_or(defaults::MTU);
        if !(576..=9000).contains(&mtu) {
            return Err(bad("mtu", format!("{mtu} is outside 576..=9000")));
        }
        let tunnel_mtu = self.tunnel_mtu.unwrap_or(defaults::TUNNEL_MTU);
        if !(576..=9000).contains(&tunnel_mtu) {
            return Err(bad(
                "tunnelMTU",
                format!("{tunnel_mtu} is outside 576..=9000"),
            ));
        }
        let underlay = self
            .underlay_interface
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e| bad("underlayInterface", format!("{e}")))?;
        let gateway_interface = self
            .gateway_interface
            .as_deref()
            .unwrap_or(defaults::GATEWAY_INTERFACE)
            .parse()
            .map_err(|e| bad("gatewayInterface", format!("{e}")))?;
        Ok(Config {
            me: self.node.clone(),
            gateway: self.gateway.clone(),
            nodes,
            remote_cidrs,
            device,
            vni,
            port,
            mtu,
            tunnel_mtu,
            underlay,
            gateway_interface,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "node: n1\ngateway: n0\nremoteCIDRs: [10.71.0.0/16]\nnodes:\n  - {name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}\n  - {name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}\n";

    fn err(text: &str) -> ConfigError {
        File::parse(text)
            .and_then(|f| f.validate())
            .expect_err(text)
    }

    #[test]
    fn unusable_node_addresses_are_refused_naming_the_field() {
        assert!(File::parse(GOOD).unwrap().validate().is_ok());
        for (addr, why) in [
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("239.1.2.3", "multicast"),
            ("127.0.0.1", "loopback"),
            ("169.254.1.1", "link-local"),
            ("240.18.0.9", "reserved"),
            ("250.1.1.1", "reserved"),
            ("0.1.2.3", "this network"),
        ] {
            let e = err(&GOOD.replace("172.18.0.2", addr));
            assert_eq!(e.field, "nodes[1].address", "{addr}: {e}");
            assert!(e.problem.contains(why), "{addr}: {e}");
        }
        let e = err(&GOOD.replace("172.18.0.2", "::1"));
        assert_eq!(e.field, "nodes[1].address", "{e}");
    }

    #[test]
    fn the_tunnel_mtu_defaults_to_the_gateways_and_bounds_the_remote_mtu() {
        let c = File::parse(GOOD).unwrap().validate().unwrap();
        assert_eq!((c.mtu, c.tunnel_mtu, c.remote_mtu()), (1450, 1420, 1420));
        let c = File::parse(&format!("tunnelMTU: 1500\n{GOOD}"))
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(c.remote_mtu(), 1450, "the overlay is the narrower");
        let c = File::parse(&format!("tunnelMTU: 1280\nmtu: 8950\n{GOOD}"))
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(c.remote_mtu(), 1280);
        for bad in ["0", "575", "9001", "-1", "1e9", "\"1420\"", "[1420]"] {
            let e = err(&format!("tunnelMTU: {bad}\n{GOOD}"));
            assert_eq!(e.field, "tunnelMTU", "{bad}: {e}");
        }
        // Written back under its own name, and absent when unset.
        let mut f = File::parse(GOOD).unwrap();
        assert!(!serde_saphyr::to_string(&f).unwrap().contains("tunnelMTU"));
        f.tunnel_mtu = Some(1400);
        let text = serde_saphyr::to_string(&f).unwrap();
        assert!(text.contains("tunnelMTU: 1400"), "{text}");
        assert_eq!(File::parse(&text).unwrap(), f);
    }

    #[test]
    fn ranges_over_the_overlay_are_refused() {
        let e = err(&GOOD.replace("[10.71.0.0/16]", "[0.0.0.0/0]"));
        assert_eq!(e.field, "remoteCIDRs[0]", "{e}");
        let e = err(&GOOD.replace("[10.71.0.0/16]", "[240.18.0.0/16]"));
        assert_eq!(e.field, "remoteCIDRs[0]", "{e}");
        let e = err(&GOOD.replace("10.200.1.0/24", "240.0.0.0/4"));
        assert_eq!(e.field, "nodes[1].podCIDR", "{e}");
        let e = err(&GOOD.replace("10.71.0.0/16", "10.71.0.1/16"));
        assert_eq!(e.field, "remoteCIDRs[0]", "{e}");
        assert!(e.problem.contains("host bits"), "{e}");
    }
}
