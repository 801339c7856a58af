//! A cluster's public link `wan0`: it belongs to the gateway, not to a node, and moves with it
//! (like a load balancer's address following the gateway pod). Behind NAT it leads to the
//! cluster's masquerading router instead of the WAN.

use dataplane::{Netlink, Netns, addr::AddressSpec, route::RouteSpec};
use ipnet::{IpNet, Ipv4Net};

use super::{Lab, LabError};
use crate::topology::Cluster;

/// The public link's name.
pub const WAN0: &str = "wan0";

/// The NAT router's side of its LAN to the gateway node.
const NAT_LAN_ROUTER: &str = "192.168.77.1/24";
/// The gateway node's side of the NAT router's LAN.
const NAT_LAN_NODE: &str = "192.168.77.2/24";

/// The NAT router's side of its LAN to the gateway node.
pub(crate) fn nat_lan_router() -> Ipv4Net {
    NAT_LAN_ROUTER.parse().expect("literal")
}

/// The gateway node's side of the NAT router's LAN (on its `wan0`).
pub(crate) fn nat_lan_node() -> Ipv4Net {
    NAT_LAN_NODE.parse().expect("literal")
}

fn fail(what: String) -> impl FnOnce(dataplane::netlink::Error) -> LabError {
    move |e| LabError::build(what, e)
}

/// Whether `wan0` is in `ns`.
pub(crate) async fn is_in(ns: &Netns) -> Result<bool, LabError> {
    let nl = Netlink::connect_in(ns).map_err(fail(format!("netlink in {}", ns.name())))?;
    Ok(nl
        .link(&WAN0.parse().expect("literal"))
        .await
        .map_err(fail(format!("looking for {WAN0} in {}", ns.name())))?
        .is_some())
}

/// Moves `wan0` (and its address and route) of `c` from `from` to `to`.
pub(crate) async fn relocate(
    lab: &Lab,
    c: &Cluster,
    from: &Netns,
    to: &Netns,
) -> Result<(), LabError> {
    let what = |s: &str| format!("{s} for {} ({} -> {})", c.name, from.name(), to.name());
    let wan0 = WAN0.parse().expect("literal");
    Netlink::connect_in(from)
        .map_err(fail(what("netlink")))?
        .move_link(&wan0, to)
        .await
        .map_err(fail(what("moving wan0")))?;
    let nl = Netlink::connect_in(to).map_err(fail(what("netlink")))?;
    nl.set_up(&wan0, true)
        .await
        .map_err(fail(what("wan0 up")))?;
    let addr = if c.behind_nat {
        nat_lan_node()
    } else {
        c.wan_addr
    };
    nl.add_address(&AddressSpec {
        link: wan0,
        addr: IpNet::V4(addr),
    })
    .await
    .map_err(fail(what("wan0 address")))?;
    if c.behind_nat {
        let r = RouteSpec {
            via: Some(nat_lan_router().addr().into()),
            ..RouteSpec::to(IpNet::V4(lab.topology.wan_cidr))
        };
        nl.add_route(&r)
            .await
            .map_err(fail(what("route to the WAN")))?;
    }
    Ok(())
}
