//! Policy-routing rules: desired state, request builders and dump parsing.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use rtnetlink::packet_route::{
    AddressFamily, RouteNetlinkMessage,
    rule::{RuleAction, RuleAttribute, RuleMessage},
};

use crate::{
    names::IfName,
    request::{Mode, Request},
};

/// `ip rule` entry: when the selectors match, look up `table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleSpec {
    /// Priority (lower is earlier).
    pub priority: u32,
    /// Source prefix selector.
    pub from: Option<IpNet>,
    /// Destination prefix selector.
    pub to: Option<IpNet>,
    /// Input interface selector.
    pub iif: Option<IfName>,
    /// Firewall mark selector.
    pub fwmark: Option<u32>,
    /// Table to look up.
    pub table: u32,
    /// IPv6 rule (otherwise IPv4).
    pub v6: bool,
}

impl fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.priority)?;
        if let Some(n) = self.from {
            write!(f, " from {n}")?;
        }
        if let Some(n) = self.to {
            write!(f, " to {n}")?;
        }
        if let Some(i) = &self.iif {
            write!(f, " iif {i}")?;
        }
        if let Some(m) = self.fwmark {
            write!(f, " fwmark {m:#x}")?;
        }
        write!(f, " lookup {}", self.table)
    }
}

fn message(spec: &RuleSpec) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = if spec.v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    msg.header.action = RuleAction::ToTable;
    msg.header.table = u8::try_from(spec.table).unwrap_or(0);
    let a = &mut msg.attributes;
    a.push(RuleAttribute::Priority(spec.priority));
    a.push(RuleAttribute::Table(spec.table));
    if let Some(n) = spec.from {
        msg.header.src_len = n.prefix_len();
        a.push(RuleAttribute::Source(n.network()));
    }
    if let Some(n) = spec.to {
        msg.header.dst_len = n.prefix_len();
        a.push(RuleAttribute::Destination(n.network()));
    }
    if let Some(i) = &spec.iif {
        a.push(RuleAttribute::Iifname(i.to_string()));
    }
    if let Some(m) = spec.fwmark {
        a.push(RuleAttribute::FwMark(m));
        a.push(RuleAttribute::FwMask(u32::MAX));
    }
    msg
}

/// `ip rule add ...`.
pub fn add(spec: &RuleSpec) -> Request {
    Request::new(
        RouteNetlinkMessage::NewRule(message(spec)),
        Mode::Create,
        format!("add rule {spec}"),
    )
}

/// `ip rule del ...`.
pub fn delete(spec: &RuleSpec) -> Request {
    Request::new(
        RouteNetlinkMessage::DelRule(message(spec)),
        Mode::Modify,
        format!("delete rule {spec}"),
    )
}

/// `ip rule show` (IPv4 and IPv6).
pub fn dump() -> Request {
    Request::new(
        RouteNetlinkMessage::GetRule(RuleMessage::default()),
        Mode::Dump,
        "list rules",
    )
}

/// A dumped rule, if it is a plain "lookup table" rule.
pub fn parse(msg: &RuleMessage) -> Option<RuleSpec> {
    if msg.header.action != RuleAction::ToTable {
        return None;
    }
    let mut spec = RuleSpec {
        priority: 0,
        from: None,
        to: None,
        iif: None,
        fwmark: None,
        table: u32::from(msg.header.table),
        v6: msg.header.family == AddressFamily::Inet6,
    };
    let net = |ip: IpAddr, len: u8| IpNet::new(ip, len).ok().map(|n| n.trunc());
    for a in &msg.attributes {
        match a {
            RuleAttribute::Priority(p) => spec.priority = *p,
            RuleAttribute::Table(t) => spec.table = *t,
            RuleAttribute::Source(ip) => spec.from = net(*ip, msg.header.src_len),
            RuleAttribute::Destination(ip) => spec.to = net(*ip, msg.header.dst_len),
            RuleAttribute::Iifname(n) => spec.iif = n.parse().ok(),
            RuleAttribute::FwMark(m) => spec.fwmark = Some(*m),
            _ => {}
        }
    }
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_description() {
        let spec = RuleSpec {
            priority: 1900,
            from: None,
            to: Some("10.71.0.0/16".parse().unwrap()),
            iif: Some("liqo.vxlan".parse().unwrap()),
            fwmark: Some(0x10),
            table: 18952,
            v6: false,
        };
        let req = add(&spec);
        assert_eq!(
            req.what,
            "add rule 1900: to 10.71.0.0/16 iif liqo.vxlan fwmark 0x10 lookup 18952"
        );
        let RouteNetlinkMessage::NewRule(msg) = &req.message else {
            panic!()
        };
        assert_eq!(
            msg.header.table, 0,
            "tables above 255 only in the attribute"
        );
        assert_eq!(parse(msg), Some(spec));
    }
}
