//! Interface addresses: desired state, request builders and dump parsing.

use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::packet_route::{
    AddressFamily, RouteNetlinkMessage,
    address::{AddressAttribute, AddressMessage},
};

use crate::{
    names::IfName,
    request::{Mode, Request},
};

/// An address on a link, with the prefix length of its subnet (`10.0.0.1/24`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AddressSpec {
    /// The link.
    pub link: IfName,
    /// Address and prefix length; host bits are the address.
    pub addr: IpNet,
}

fn family(ip: IpAddr) -> AddressFamily {
    if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

fn message(index: u32, addr: IpNet) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.family = family(addr.addr());
    msg.header.prefix_len = addr.prefix_len();
    msg.header.index = index;
    msg.attributes.push(AddressAttribute::Local(addr.addr()));
    msg.attributes.push(AddressAttribute::Address(addr.addr()));
    if let IpNet::V4(v4) = addr
        && v4.prefix_len() < 31
    {
        msg.attributes
            .push(AddressAttribute::Broadcast(v4.broadcast()));
    }
    msg
}

/// `ip addr add <addr> dev <link>`.
pub fn add(spec: &AddressSpec, index: u32) -> Request {
    let what = format!("add address {} dev {}", spec.addr, spec.link);
    Request::new(
        RouteNetlinkMessage::NewAddress(message(index, spec.addr)),
        Mode::Create,
        what,
    )
}

/// `ip addr del <addr> dev <link>`.
pub fn delete(spec: &AddressSpec, index: u32) -> Request {
    let what = format!("delete address {} dev {}", spec.addr, spec.link);
    Request::new(
        RouteNetlinkMessage::DelAddress(message(index, spec.addr)),
        Mode::Modify,
        what,
    )
}

/// `ip addr show`.
pub fn dump() -> Request {
    Request::new(
        RouteNetlinkMessage::GetAddress(AddressMessage::default()),
        Mode::Dump,
        "list addresses",
    )
}

/// Interface index and address of a dumped address.
pub fn parse(msg: &AddressMessage) -> Option<(u32, IpNet)> {
    let ip = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let ip = ip.or_else(|| {
        msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
    })?;
    Some((
        msg.header.index,
        IpNet::new(ip, msg.header.prefix_len).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_keeps_host_bits_and_sets_broadcast() {
        let spec = AddressSpec {
            link: "eth0".parse().unwrap(),
            addr: "10.200.1.3/24".parse().unwrap(),
        };
        let req = add(&spec, 4);
        assert_eq!(req.what, "add address 10.200.1.3/24 dev eth0");
        let RouteNetlinkMessage::NewAddress(msg) = &req.message else {
            panic!()
        };
        assert_eq!((msg.header.index, msg.header.prefix_len), (4, 24));
        assert!(msg.attributes.contains(&AddressAttribute::Broadcast(
            "10.200.1.255".parse().unwrap()
        )));
        assert_eq!(parse(msg), Some((4, spec.addr)));
    }

    #[test]
    fn point_to_point_prefix_has_no_broadcast() {
        let spec = AddressSpec {
            link: "wg0".parse().unwrap(),
            addr: "169.254.0.1/32".parse().unwrap(),
        };
        let RouteNetlinkMessage::NewAddress(msg) = add(&spec, 1).message else {
            panic!()
        };
        assert!(
            !msg.attributes
                .iter()
                .any(|a| matches!(a, AddressAttribute::Broadcast(_)))
        );
    }
}
