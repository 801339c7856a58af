//! Neighbours: permanent ARP/NDP entries and bridge forwarding (FDB) entries for VXLAN.

use std::net::IpAddr;

use rtnetlink::packet_route::{
    AddressFamily, RouteNetlinkMessage,
    neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
    },
};

use crate::{
    names::IfName,
    request::{Mode, Request},
};

/// A MAC address.
pub type Mac = [u8; 6];

fn mac_str(mac: &Mac) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn naddr(ip: IpAddr) -> NeighbourAddress {
    match ip {
        IpAddr::V4(v) => NeighbourAddress::Inet(v),
        IpAddr::V6(v) => NeighbourAddress::Inet6(v),
    }
}

/// A permanent neighbour entry (`ip neigh replace <ip> lladdr <mac> dev <link> nud permanent`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NeighbourSpec {
    /// The link.
    pub link: IfName,
    /// The neighbour's IP.
    pub ip: IpAddr,
    /// Its MAC.
    pub mac: Mac,
}

/// A forwarding entry of a VXLAN device
/// (`bridge fdb append <mac> dev <link> dst <dst> self permanent`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FdbSpec {
    /// The VXLAN device.
    pub link: IfName,
    /// Inner MAC (all zeros: the default entry for flooding).
    pub mac: Mac,
    /// The remote tunnel endpoint.
    pub dst: IpAddr,
}

/// Sets (creates or replaces) a permanent neighbour.
pub fn set(spec: &NeighbourSpec, index: u32) -> Request {
    let msg = neighbour_message(spec, index);
    let what = format!(
        "set neighbour {} lladdr {} dev {}",
        spec.ip,
        mac_str(&spec.mac),
        spec.link
    );
    Request::new(RouteNetlinkMessage::NewNeighbour(msg), Mode::Replace, what)
}

fn neighbour_message(spec: &NeighbourSpec, index: u32) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = if spec.ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    msg.attributes
        .push(NeighbourAttribute::Destination(naddr(spec.ip)));
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(spec.mac.to_vec()));
    msg
}

/// Deletes a neighbour entry.
pub fn delete(spec: &NeighbourSpec, index: u32) -> Request {
    let what = format!("delete neighbour {} dev {}", spec.ip, spec.link);
    Request::new(
        RouteNetlinkMessage::DelNeighbour(neighbour_message(spec, index)),
        Mode::Modify,
        what,
    )
}

/// Lists the IPv4 and IPv6 neighbours of every link.
pub fn dump() -> Request {
    Request::new(
        RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()),
        Mode::Dump,
        "list neighbours",
    )
}

/// A dumped permanent neighbour: `(ifindex, ip, mac)`; other states (learned by ARP) are skipped.
pub fn parse_permanent(msg: &NeighbourMessage) -> Option<(u32, IpAddr, Mac)> {
    if msg.header.state != NeighbourState::Permanent {
        return None;
    }
    let (mut ip, mut mac) = (None, None);
    for a in &msg.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => ip = Some(IpAddr::V4(*v)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v)) => {
                ip = Some(IpAddr::V6(*v))
            }
            NeighbourAttribute::LinkLayerAddress(m) => mac = Mac::try_from(m.as_slice()).ok(),
            _ => {}
        }
    }
    Some((msg.header.ifindex, ip?, mac?))
}

fn fdb_message(spec: &FdbSpec, index: u32) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(spec.mac.to_vec()));
    msg.attributes
        .push(NeighbourAttribute::Destination(naddr(spec.dst)));
    msg
}

/// Appends an FDB entry: several entries may share a MAC (the all-zero MAC floods to each).
pub fn append_fdb(spec: &FdbSpec, index: u32) -> Request {
    let what = format!(
        "append fdb {} dev {} dst {}",
        mac_str(&spec.mac),
        spec.link,
        spec.dst
    );
    Request::new(
        RouteNetlinkMessage::NewNeighbour(fdb_message(spec, index)),
        Mode::Append,
        what,
    )
}

/// Deletes one FDB entry.
pub fn delete_fdb(spec: &FdbSpec, index: u32) -> Request {
    let what = format!(
        "delete fdb {} dev {} dst {}",
        mac_str(&spec.mac),
        spec.link,
        spec.dst
    );
    Request::new(
        RouteNetlinkMessage::DelNeighbour(fdb_message(spec, index)),
        Mode::Modify,
        what,
    )
}

/// Lists the FDB entries of every bridge-like device.
pub fn dump_fdb() -> Request {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    Request::new(
        RouteNetlinkMessage::GetNeighbour(msg),
        Mode::Dump,
        "list fdb",
    )
}

/// A dumped FDB entry with a remote destination: `(ifindex, mac, dst)`.
pub fn parse_fdb(msg: &NeighbourMessage) -> Option<(u32, Mac, IpAddr)> {
    let mut mac = None;
    let mut dst = None;
    for a in &msg.attributes {
        match a {
            NeighbourAttribute::LinkLayerAddress(m) => mac = Mac::try_from(m.as_slice()).ok(),
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => {
                dst = Some(IpAddr::V4(*v))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v)) => {
                dst = Some(IpAddr::V6(*v))
            }
            // Entries of the bridge family carry the address as raw bytes.
            NeighbourAttribute::Destination(NeighbourAddress::Other(b)) => {
                dst = <[u8; 4]>::try_from(b.as_slice())
                    .map(IpAddr::from)
                    .or_else(|_| <[u8; 16]>::try_from(b.as_slice()).map(IpAddr::from))
                    .ok();
            }
            _ => {}
        }
    }
    Some((msg.header.ifindex, mac?, dst?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdb_append_uses_append_and_self() {
        let spec = FdbSpec {
            link: "vx".parse().unwrap(),
            mac: [0; 6],
            dst: "172.18.0.2".parse().unwrap(),
        };
        let req = append_fdb(&spec, 3);
        assert_eq!(req.mode, Mode::Append);
        assert_eq!(
            req.what,
            "append fdb 00:00:00:00:00:00 dev vx dst 172.18.0.2"
        );
        let RouteNetlinkMessage::NewNeighbour(msg) = &req.message else {
            panic!()
        };
        assert!(msg.header.flags.contains(NeighbourFlags::Own));
        assert_eq!(parse_fdb(msg), Some((3, [0; 6], spec.dst)));
    }

    #[test]
    fn neighbour_is_permanent_replace() {
        let spec = NeighbourSpec {
            link: "eth0".parse().unwrap(),
            ip: "10.0.0.9".parse().unwrap(),
            mac: [2, 0, 0, 0, 0, 0xab],
        };
        let req = set(&spec, 2);
        assert_eq!(req.mode, Mode::Replace);
        assert_eq!(
            req.what,
            "set neighbour 10.0.0.9 lladdr 02:00:00:00:00:ab dev eth0"
        );
    }
}
