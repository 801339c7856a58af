//! Links: desired state ([`LinkSpec`]), request builders, and what a dump reports ([`LinkInfo`]).

use std::{net::Ipv4Addr, os::fd::RawFd};

use rtnetlink::{
    LinkBridge, LinkMessageBuilder, LinkUnspec, LinkVeth, LinkVxlan,
    packet_route::{
        RouteNetlinkMessage,
        link::{
            InfoData, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo as NlInfo,
            LinkMessage,
        },
    },
};

use crate::{
    names::{IfName, NetnsName},
    request::{Mode, Request},
};

/// A link as it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    /// Its name.
    pub name: IfName,
    /// Its type and type-specific settings.
    pub kind: LinkKind,
    /// MTU; the kernel default when `None`.
    pub mtu: Option<u32>,
    /// The bridge it is a port of.
    pub controller: Option<IfName>,
    /// Administratively up.
    pub up: bool,
}

/// Type-specific settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// A veth pair; the peer is created directly in `peer_netns` when given (it is left down:
    /// bring it up from that namespace).
    Veth {
        /// Name of the other end.
        peer: IfName,
        /// Namespace of the other end; this one when `None`.
        peer_netns: Option<NetnsName>,
    },
    /// A bridge.
    Bridge,
    /// A VXLAN device.
    Vxlan(VxlanSpec),
}

/// VXLAN settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSpec {
    /// VXLAN network identifier.
    pub vni: u32,
    /// Destination UDP port.
    pub port: u16,
    /// Source address of encapsulated packets.
    pub local: Option<Ipv4Addr>,
    /// Underlay device.
    pub dev: Option<IfName>,
    /// Learn remote MACs from received packets.
    pub learning: bool,
}

/// Kernel-side values a link request needs, looked up by the I/O layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkRefs {
    /// Index of the controller (bridge), if any.
    pub controller: Option<u32>,
    /// Index of the VXLAN underlay device, if any.
    pub vxlan_dev: Option<u32>,
    /// An open fd of the veth peer's namespace, if any.
    pub peer_netns_fd: Option<RawFd>,
}

/// `ip link add ...` for `spec`.
pub fn add(spec: &LinkSpec, refs: &LinkRefs) -> Request {
    let name = spec.name.as_str();
    let (message, what) = match &spec.kind {
        LinkKind::Veth { peer, peer_netns } => {
            let mut p = LinkMessageBuilder::<LinkUnspec>::new().name(peer.as_str());
            if let Some(fd) = refs.peer_netns_fd {
                p = p.setns_by_fd(fd);
            }
            let b = LinkVeth::new(name, peer.as_str())
                .set_info_data(InfoData::Veth(InfoVeth::Peer(p.build())));
            let ns = peer_netns
                .as_ref()
                .map(|n| format!(" netns {n}"))
                .unwrap_or_default();
            (
                finish(b, spec, refs),
                format!("add veth {name} peer {peer}{ns}"),
            )
        }
        LinkKind::Bridge => (
            finish(LinkBridge::new(name), spec, refs),
            format!("add bridge {name}"),
        ),
        LinkKind::Vxlan(v) => {
            let mut b = LinkVxlan::new(name, v.vni)
                .port(v.port)
                .learning(v.learning);
            if let Some(local) = v.local {
                b = b.local(local);
            }
            if let Some(dev) = refs.vxlan_dev {
                b = b.dev(dev);
            }
            let what = format!("add vxlan {name} id {} dstport {}", v.vni, v.port);
            (finish(b, spec, refs), what)
        }
    };
    Request::new(RouteNetlinkMessage::NewLink(message), Mode::Create, what)
}

/// Settings common to every kind.
fn finish<T>(mut b: LinkMessageBuilder<T>, spec: &LinkSpec, refs: &LinkRefs) -> LinkMessage {
    if let Some(mtu) = spec.mtu {
        b = b.mtu(mtu);
    }
    if let Some(c) = refs.controller {
        b = b.controller(c);
    }
    if spec.up {
        b = b.up();
    }
    b.build()
}

/// `ip link set <index> up|down`.
pub fn set_up(index: u32, name: &IfName, up: bool) -> Request {
    let b = LinkUnspec::new_with_index(index);
    let b = if up { b.up() } else { b.down() };
    let what = format!("set link {name} {}", if up { "up" } else { "down" });
    Request::new(RouteNetlinkMessage::SetLink(b.build()), Mode::Modify, what)
}

/// `ip link set <index> mtu <mtu>`.
pub fn set_mtu(index: u32, name: &IfName, mtu: u32) -> Request {
    let msg = LinkUnspec::new_with_index(index).mtu(mtu).build();
    Request::new(
        RouteNetlinkMessage::SetLink(msg),
        Mode::Modify,
        format!("set link {name} mtu {mtu}"),
    )
}

/// `ip link set <index> address <mac>`.
pub fn set_mac(index: u32, name: &IfName, mac: [u8; 6]) -> Request {
    let msg = LinkUnspec::new_with_index(index)
        .address(mac.to_vec())
        .build();
    let what = format!(
        "set link {name} address {}",
        mac.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    );
    Request::new(RouteNetlinkMessage::SetLink(msg), Mode::Modify, what)
}

/// `ip link set <index> netns <fd>`.
pub fn set_netns(index: u32, name: &IfName, fd: RawFd, netns: &NetnsName) -> Request {
    let msg = LinkUnspec::new_with_index(index).setns_by_fd(fd).build();
    Request::new(
        RouteNetlinkMessage::SetLink(msg),
        Mode::Modify,
        format!("move link {name} to netns {netns}"),
    )
}

/// `ip link del <index>`.
pub fn delete(index: u32, name: &IfName) -> Request {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    Request::new(
        RouteNetlinkMessage::DelLink(msg),
        Mode::Modify,
        format!("delete link {name}"),
    )
}

/// `ip link show`.
pub fn dump() -> Request {
    Request::new(
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        Mode::Dump,
        "list links",
    )
}

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Kind (`veth`, `bridge`, `vxlan`, `tun`, ...), empty for plain devices such as `lo`.
    pub kind: String,
    /// Administratively up.
    pub up: bool,
    /// MTU.
    pub mtu: u32,
    /// Index of the controller (bridge), if any.
    pub controller: Option<u32>,
    /// Hardware address.
    pub mac: Vec<u8>,
    /// What identifies a VXLAN device (the kernel cannot change it in place).
    pub vxlan: Option<VxlanIdentity>,
}

/// The settings of a VXLAN device that only its recreation changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VxlanIdentity {
    /// Network identifier.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// Source address, if set.
    pub local: Option<Ipv4Addr>,
    /// Index of the underlay device, if set.
    pub link: Option<u32>,
}

/// Reads a [`LinkInfo`] out of a kernel message.
pub fn parse(msg: &LinkMessage) -> LinkInfo {
    let mut info = LinkInfo {
        index: msg.header.index,
        name: String::new(),
        kind: String::new(),
        up: msg.header.flags.contains(LinkFlags::Up),
        mtu: 0,
        controller: None,
        mac: Vec::new(),
        vxlan: None,
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => info.name.clone_from(n),
            LinkAttribute::Mtu(m) => info.mtu = *m,
            LinkAttribute::Controller(c) => info.controller = Some(*c),
            LinkAttribute::Address(a) => info.mac.clone_from(a),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        NlInfo::Kind(k) => info.kind = kind_name(k),
                        NlInfo::Data(InfoData::Vxlan(attrs)) => {
                            let mut id = VxlanIdentity::default();
                            for a in attrs {
                                match a {
                                    InfoVxlan::Id(v) => id.vni = *v,
                                    InfoVxlan::Port(p) => id.port = *p,
                                    InfoVxlan::Local(a) if !a.is_unspecified() => {
                                        id.local = Some(*a);
                                    }
                                    InfoVxlan::Link(i) if *i != 0 => id.link = Some(*i),
                                    _ => {}
                                }
                            }
                            info.vxlan = Some(id);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    info
}

fn kind_name(k: &InfoKind) -> String {
    match k {
        InfoKind::Other(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> IfName {
        s.parse().unwrap()
    }

    #[test]
    fn veth_into_other_namespace_carries_the_fd_and_flags() {
        let spec = LinkSpec {
            name: name("p0"),
            kind: LinkKind::Veth {
                peer: name("eth0"),
                peer_netns: Some("lq-a".parse().unwrap()),
            },
            mtu: Some(1400),
            controller: Some(name("cni0")),
            up: true,
        };
        let req = add(
            &spec,
            &LinkRefs {
                controller: Some(7),
                peer_netns_fd: Some(42),
                ..Default::default()
            },
        );
        assert_eq!(req.mode, Mode::Create);
        assert_eq!(req.what, "add veth p0 peer eth0 netns lq-a");
        let RouteNetlinkMessage::NewLink(msg) = &req.message else {
            panic!("not NewLink")
        };
        assert!(msg.header.flags.contains(LinkFlags::Up));
        assert!(msg.attributes.contains(&LinkAttribute::Mtu(1400)));
        assert!(msg.attributes.contains(&LinkAttribute::Controller(7)));
        let peer = msg.attributes.iter().find_map(|a| match a {
            LinkAttribute::LinkInfo(i) => i.iter().find_map(|x| match x {
                NlInfo::Data(InfoData::Veth(InfoVeth::Peer(p))) => Some(p.clone()),
                _ => None,
            }),
            _ => None,
        });
        let peer = peer.expect("peer message");
        assert!(
            peer.attributes
                .contains(&LinkAttribute::IfName("eth0".into()))
        );
        assert!(peer.attributes.contains(&LinkAttribute::NetNsFd(42)));
    }

    #[test]
    fn vxlan_request_names_vni_and_port() {
        let spec = LinkSpec {
            name: name("liqo.vxlan"),
            kind: LinkKind::Vxlan(VxlanSpec {
                vni: 18952,
                port: 4789,
                local: Some(Ipv4Addr::new(172, 18, 0, 1)),
                dev: Some(name("eth0")),
                learning: false,
            }),
            mtu: None,
            controller: None,
            up: false,
        };
        let req = add(
            &spec,
            &LinkRefs {
                vxlan_dev: Some(3),
                ..Default::default()
            },
        );
        assert_eq!(req.what, "add vxlan liqo.vxlan id 18952 dstport 4789");
        let RouteNetlinkMessage::NewLink(msg) = &req.message else {
            panic!("not NewLink")
        };
        assert!(!msg.header.flags.contains(LinkFlags::Up));
        let dump = format!("{msg:?}");
        assert!(
            dump.contains("Id(18952)") && dump.contains("Port(4789)") && dump.contains("Link(3)"),
            "{dump}"
        );
    }

    #[test]
    fn parse_reads_back_what_matters() {
        let msg = LinkUnspec::new_with_index(5)
            .name("br0")
            .mtu(9000)
            .controller(2)
            .up()
            .build();
        let info = parse(&msg);
        assert_eq!(
            (
                info.index,
                info.name.as_str(),
                info.mtu,
                info.controller,
                info.up
            ),
            (5, "br0", 9000, Some(2), true)
        );
    }
}
