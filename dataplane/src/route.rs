//! Routes: desired state, request builders, dump parsing and the diff that reconciles a table.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use rtnetlink::packet_route::{
    AddressFamily, RouteNetlinkMessage,
    route::{
        RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric,
        RouteProtocol, RouteScope, RouteType,
    },
};

use crate::{
    names::IfName,
    request::{Mode, Request},
};

/// The main routing table.
pub const MAIN_TABLE: u32 = 254;

/// A unicast route as it should be.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteSpec {
    /// Destination prefix (no host bits).
    pub dst: IpNet,
    /// Next hop, if not directly connected.
    pub via: Option<IpAddr>,
    /// Output device.
    pub dev: Option<IfName>,
    /// Routing table.
    pub table: u32,
    /// Preferred source address.
    pub src: Option<IpAddr>,
    /// Metric.
    pub metric: Option<u32>,
    /// Path MTU of the route (`mtu` metric).
    pub mtu: Option<u32>,
    /// Treat the next hop as on-link even if no address covers it.
    pub onlink: bool,
}

impl RouteSpec {
    /// A route to `dst` in the main table with nothing else set.
    pub fn to(dst: IpNet) -> RouteSpec {
        RouteSpec {
            dst,
            via: None,
            dev: None,
            table: MAIN_TABLE,
            src: None,
            metric: None,
            mtu: None,
            onlink: false,
        }
    }
}

impl RouteSpec {
    /// Whether the route `current` (as the kernel reports it) is this desired route. Fields left
    /// unset here are the kernel's to fill (it reports the output device of a gateway route, for
    /// example), so they are not compared.
    pub fn is_satisfied_by(&self, current: &RouteSpec) -> bool {
        fn same<T: PartialEq>(want: &Option<T>, have: &Option<T>) -> bool {
            want.is_none() || want == have
        }
        self.dst == current.dst
            && self.table == current.table
            && self.via == current.via
            && self.onlink == current.onlink
            && same(&self.mtu, &current.mtu)
            && same(&self.dev, &current.dev)
            && same(&self.src, &current.src)
            && same(&self.metric, &current.metric)
    }
}

impl fmt::Display for RouteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dst)?;
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        if let Some(d) = &self.dev {
            write!(f, " dev {d}")?;
        }
        if let Some(s) = self.src {
            write!(f, " src {s}")?;
        }
        if let Some(m) = self.metric {
            write!(f, " metric {m}")?;
        }
        if let Some(m) = self.mtu {
            write!(f, " mtu {m}")?;
        }
        if self.onlink {
            f.write_str(" onlink")?;
        }
        if self.table != MAIN_TABLE {
            write!(f, " table {}", self.table)?;
        }
        Ok(())
    }
}

fn addr(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(v) => RouteAddress::Inet(v),
        IpAddr::V6(v) => RouteAddress::Inet6(v),
    }
}

fn message(spec: &RouteSpec, dev_index: Option<u32>) -> RouteMessage {
    let mut msg = RouteMessage::default();
    let h = &mut msg.header;
    h.address_family = if spec.dst.addr().is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    h.destination_prefix_length = spec.dst.prefix_len();
    h.protocol = RouteProtocol::Static;
    h.kind = RouteType::Unicast;
    h.scope = if spec.via.is_none() && spec.dev.is_some() {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    h.table = u8::try_from(spec.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    if spec.onlink {
        h.flags |= RouteFlags::Onlink;
    }
    let a = &mut msg.attributes;
    a.push(RouteAttribute::Table(spec.table));
    if spec.dst.prefix_len() > 0 {
        a.push(RouteAttribute::Destination(addr(spec.dst.network())));
    }
    if let Some(via) = spec.via {
        a.push(RouteAttribute::Gateway(addr(via)));
    }
    if let Some(i) = dev_index {
        a.push(RouteAttribute::Oif(i));
    }
    if let Some(src) = spec.src {
        a.push(RouteAttribute::PrefSource(addr(src)));
    }
    if let Some(m) = spec.metric {
        a.push(RouteAttribute::Priority(m));
    }
    if let Some(m) = spec.mtu {
        a.push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(m)]));
    }
    msg
}

/// `ip route add ...`; `dev_index` is the index of `spec.dev`.
pub fn add(spec: &RouteSpec, dev_index: Option<u32>) -> Request {
    Request::new(
        RouteNetlinkMessage::NewRoute(message(spec, dev_index)),
        Mode::Create,
        format!("add route {spec}"),
    )
}

/// `ip route replace ...`.
pub fn replace(spec: &RouteSpec, dev_index: Option<u32>) -> Request {
    let what = format!("replace route {spec}");
    Request::new(
        RouteNetlinkMessage::NewRoute(message(spec, dev_index)),
        Mode::Replace,
        what,
    )
}

/// `ip route del ...`.
pub fn delete(spec: &RouteSpec, dev_index: Option<u32>) -> Request {
    Request::new(
        RouteNetlinkMessage::DelRoute(message(spec, dev_index)),
        Mode::Modify,
        format!("delete route {spec}"),
    )
}

/// `ip route show table TABLE`: a dump that the kernel filters to one table when the socket
/// checks requests strictly (`NETLINK_GET_STRICT_CHK`; both IP families).
pub fn dump(table: u32) -> Request {
    let mut msg = RouteMessage::default();
    msg.header.table = u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    msg.attributes.push(RouteAttribute::Table(table));
    Request::new(
        RouteNetlinkMessage::GetRoute(msg),
        Mode::Dump,
        format!("list routes of table {table}"),
    )
}

/// `RTM_NEWROUTE`, the message type of a dumped route.
pub(crate) const RTM_NEWROUTE: u16 = 24;
const RTN_UNICAST: u8 = 1;
const RTNH_F_ONLINK: u32 = 4;
const AF_INET6: u8 = 10;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_TABLE: u16 = 15;
const RTAX_MTU: u16 = 2;

fn ip(v: &[u8]) -> Option<IpAddr> {
    match v.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(v).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(v).ok()?)),
        _ => None,
    }
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

/// A dumped route (the payload of an `RTM_NEWROUTE`: `struct rtmsg`, then attributes), if it
/// is a plain unicast route; the device is reported by index, to be named by the caller
/// through `name_of`. Read straight from the bytes: thousands of routes take a fraction of a
/// millisecond.
pub fn parse(payload: &[u8], mut name_of: impl FnMut(u32) -> Option<IfName>) -> Option<RouteSpec> {
    let h = payload.get(..12)?;
    if h[7] != RTN_UNICAST {
        return None;
    }
    let (v6, dst_len) = (h[0] == AF_INET6, h[1]);
    let onlink = u32_of(&h[8..])? & RTNH_F_ONLINK != 0;
    let mut table = u32::from(h[4]);
    let (mut dst, mut via, mut dev, mut src, mut metric, mut mtu) =
        (None, None, None, None, None, None);
    for (ty, v) in crate::batch::attributes(&payload[12..]) {
        match ty {
            RTA_TABLE => table = u32_of(v)?,
            RTA_DST => dst = ip(v),
            RTA_GATEWAY => via = ip(v),
            RTA_PREFSRC => src = ip(v),
            RTA_OIF => dev = name_of(u32_of(v)?),
            RTA_PRIORITY => metric = u32_of(v),
            RTA_METRICS => {
                mtu = crate::batch::attributes(v)
                    .find_map(|(t, m)| if t == RTAX_MTU { u32_of(m) } else { None });
            }
            _ => {}
        }
    }
    let dst = match (dst, v6) {
        (Some(ip), _) => ip,
        (None, true) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        (None, false) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    };
    let dst = IpNet::new(dst, dst_len).ok()?.trunc();
    Some(RouteSpec {
        dst,
        via,
        dev,
        table,
        src,
        metric,
        mtu,
        onlink,
    })
}

/// What turns the routes that are there into the routes that are wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteDiff {
    /// Routes to delete (present, not wanted).
    pub remove: Vec<RouteSpec>,
    /// Routes to add (wanted, not present), in the order they were wanted.
    pub add: Vec<RouteSpec>,
}

impl RouteDiff {
    /// Compares `current` (as reported by the kernel) with `desired`: a current route that
    /// satisfies some desired route is left alone ([`RouteSpec::is_satisfied_by`]).
    ///
    /// Routes are compared only with routes of the same table and destination (the only ones
    /// that can satisfy each other): both lists are sorted that way and walked side by side, so
    /// thousands of routes diff in a fraction of a millisecond. `remove` keeps the order of
    /// `current`, `add` that of `desired` (without repeats).
    pub fn new(current: &[RouteSpec], desired: &[RouteSpec]) -> RouteDiff {
        /// Table and destination as integers (cheap to sort), with each route's index.
        fn keyed(routes: &[RouteSpec]) -> Vec<((u32, bool, u128, u8), usize)> {
            let mut v: Vec<_> = routes
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let addr = match r.dst.network() {
                        IpAddr::V4(a) => u128::from(u32::from(a)),
                        IpAddr::V6(a) => u128::from(a),
                    };
                    (
                        (r.table, r.dst.addr().is_ipv6(), addr, r.dst.prefix_len()),
                        i,
                    )
                })
                .collect();
            v.sort_unstable();
            v
        }
        let (have, want) = (keyed(current), keyed(desired));
        let (mut drop, mut missing) = (vec![false; current.len()], vec![false; desired.len()]);
        let (mut i, mut j) = (0, 0);
        while i < have.len() || j < want.len() {
            let k = match (have.get(i), want.get(j)) {
                (Some(h), Some(w)) => h.0.min(w.0),
                (Some(h), None) => h.0,
                (None, Some(w)) => w.0,
                (None, None) => break,
            };
            let h_end = i + have[i..].partition_point(|h| h.0 == k);
            let w_end = j + want[j..].partition_point(|w| w.0 == k);
            let (hs, ws) = (&have[i..h_end], &want[j..w_end]);
            for &(_, c) in hs {
                drop[c] = !ws
                    .iter()
                    .any(|&(_, w)| desired[w].is_satisfied_by(&current[c]));
            }
            for (n, &(_, w)) in ws.iter().enumerate() {
                // The first of equal desired routes (indices sort in order), and not there.
                let repeat = ws[..n].iter().any(|&(_, e)| desired[e] == desired[w]);
                missing[w] = !repeat
                    && !hs
                        .iter()
                        .any(|&(_, c)| desired[w].is_satisfied_by(&current[c]));
            }
            (i, j) = (h_end, w_end);
        }
        let pick = |routes: &[RouteSpec], flags: &[bool]| {
            routes
                .iter()
                .zip(flags)
                .filter(|(_, f)| **f)
                .map(|(r, _)| r.clone())
                .collect()
        };
        RouteDiff {
            remove: pick(current, &drop),
            add: pick(desired, &missing),
        }
    }

    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.add.is_empty()
    }
}

#[cfg(test)]
mod tests;
