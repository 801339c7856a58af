//! Pure: whether an entry fits its set or map (IP version, no host bits, a prefix translation
//! keeping its length), checked the same way by the full batch ([`super::build::batch`]) and by
//! the element transaction ([`super::elements::of`]).

use ipnet::IpNet;

use super::{AddrType, Ident, Map, PairMap, Set, build::BuildError};

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

/// Whether `a . b : to` fits the pair map `m` of `table`.
pub(crate) fn check_pair_entry(
    table: &Ident,
    m: &PairMap,
    (a, b): (&IpNet, &IpNet),
    to: &IpNet,
) -> Result<(), BuildError> {
    let bad = |problem| BuildError::BadElement {
        table: table.clone(),
        what: "map",
        name: m.name.clone(),
        elem: format!("{a} . {b} : {to}"),
        problem,
    };
    if [a, b, to].iter().any(|n| addr_type(n) != m.addr) {
        return Err(bad("wrong IP version"));
    }
    if [a, b, to].iter().any(|n| **n != n.trunc()) {
        return Err(bad("host bits set"));
    }
    if b.prefix_len() != to.prefix_len() {
        return Err(bad(
            "prefix lengths differ; a prefix translation keeps host bits",
        ));
    }
    Ok(())
}
