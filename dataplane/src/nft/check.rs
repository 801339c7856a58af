//! Pure: whether an entry fits its set or map (IP version, no host bits, a prefix translation
//! keeping its length), checked the same way by the full batch ([`super::build::batch`]) and by
//! the element transaction ([`super::elements::of`]).

use ipnet::IpNet;

use super::{
    error::BuildError,
    ruleset::{AddrType, Ident, Map, MarkAddrMap, MarkMap, MarkPrefixMap, Set},
};

/// The address type of `net`.
pub(crate) fn addr_type(net: &IpNet) -> AddrType {
    if net.addr().is_ipv4() {
        AddrType::V4
    } else {
        AddrType::V6
    }
}

/// Whether `p` fits the set `s` of `table`.
pub(crate) fn check_set_prefix(table: &Ident, s: &Set, p: &IpNet) -> Result<(), BuildError> {
    if addr_type(p) != s.addr || *p != p.trunc() {
        return Err(BuildError::BadElement {
            table: table.clone(),
            what: "set",
            name: s.name.clone(),
            elem: p.to_string(),
            problem: if addr_type(p) != s.addr {
                "wrong IP version"
            } else {
                "host bits set"
            },
        });
    }
    Ok(())
}

/// Whether `from : to` fits the map `m` of `table`.
pub(crate) fn check_map_entry(
    table: &Ident,
    m: &Map,
    from: &IpNet,
    to: &IpNet,
) -> Result<(), BuildError> {
    let bad = |problem| BuildError::BadElement {
        table: table.clone(),
        what: "map",
        name: m.name.clone(),
        elem: format!("{from} : {to}"),
        problem,
    };
    if addr_type(from) != m.addr || addr_type(to) != m.addr {
        return Err(bad("wrong IP version"));
    }
    if *from != from.trunc() || *to != to.trunc() {
        return Err(bad("host bits set"));
    }
    if from.prefix_len() != to.prefix_len() {
        return Err(bad(
            "prefix lengths differ; a prefix translation keeps host bits",
        ));
    }
    Ok(())
}

/// Whether `net : mark` fits the mark map `m` of `table`.
pub(crate) fn check_mark_entry(
    table: &Ident,
    m: &MarkMap,
    net: &IpNet,
    mark: u32,
) -> Result<(), BuildError> {
    let bad = |problem| BuildError::BadElement {
        table: table.clone(),
        what: "map",
        name: m.name.clone(),
        elem: format!("{net} : {mark:#x}"),
        problem,
    };
    if addr_type(net) != m.addr {
        return Err(bad("wrong IP version"));
    }
    if *net != net.trunc() {
        return Err(bad("host bits set"));
    }
    Ok(())
}

/// Whether `mark . prefix : to` fits the mark prefix map `m` of `table`.
pub(crate) fn check_mark_prefix_entry(
    table: &Ident,
    m: &MarkPrefixMap,
    (mark, prefix): (u32, &IpNet),
    to: &IpNet,
) -> Result<(), BuildError> {
    let bad = |problem| BuildError::BadElement {
        table: table.clone(),
        what: "map",
        name: m.name.clone(),
        elem: format!("{mark:#x} . {prefix} : {to}"),
        problem,
    };
    if [prefix, to].iter().any(|n| addr_type(n) != m.addr) {
        return Err(bad("wrong IP version"));
    }
    if [prefix, to].iter().any(|n| **n != n.trunc()) {
        return Err(bad("host bits set"));
    }
    if [prefix, to].iter().any(|n| n.prefix_len() != m.prefix_len) {
        return Err(bad(
            "not of the map's prefix length; the lookup masks the address to it",
        ));
    }
    Ok(())
}

/// Whether `mark : addr` fits the mark address map `m` of `table`.
pub(crate) fn check_mark_addr_entry(
    table: &Ident,
    m: &MarkAddrMap,
    mark: u32,
    addr: std::net::IpAddr,
) -> Result<(), BuildError> {
    let v4 = matches!(m.addr, AddrType::V4);
    if addr.is_ipv4() != v4 {
        return Err(BuildError::BadElement {
            table: table.clone(),
            what: "map",
            name: m.name.clone(),
            elem: format!("{mark:#x} : {addr}"),
            problem: "wrong IP version",
        });
    }
    Ok(())
}

/// Whether the marks of `m` are unique (a hash map holds one value per key).
pub(crate) fn check_mark_addr_unique(table: &Ident, m: &MarkAddrMap) -> Result<(), BuildError> {
    let mut marks: Vec<u32> = m.entries.iter().map(|(k, _)| *k).collect();
    marks.sort_unstable();
    if let Some(w) = marks.windows(2).find(|w| w[0] == w[1]) {
        return Err(BuildError::BadElement {
            table: table.clone(),
            what: "map",
            name: m.name.clone(),
            elem: format!("{:#x}", w[0]),
            problem: "the mark has two values",
        });
    }
    Ok(())
}
