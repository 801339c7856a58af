//! Pure: the kernel elements of a [`Ruleset`]'s sets and maps, and the element diff between two
//! rulesets that differ only there. [`super::transaction`] puts a diff on the wire.
//!
//! The elements are the ones `nft` itself writes (`nft --debug=netlink` shows them), so that a
//! table filled by `nft -f` can be changed element by element and lists the same afterwards:
//! - an interval set or map of one field (the kernel's rbtree) holds each prefix as a start
//!   element (keyed by its first address, carrying a map's value) and an end element flagged
//!   `NFT_SET_ELEM_INTERVAL_END` (keyed by the address after its last); a prefix that reaches the
//!   top of the address space has no end element and carries nft's "open interval" user data;
//!   nft also adds an end element at address 0 when it fills an empty set (unless a prefix
//!   starts there), which is never removed: it matches nothing and does not list;
//! - a map keyed by a mark and a masked address (the kernel's hash) holds each entry as one
//!   element: the mark (host byte order) and the prefix's first address as its key, and as
//!   value an interval (first and last address).

use std::{cmp::Ordering, fmt, net::IpAddr};

use ipnet::IpNet;

use super::{
    check,
    error::BuildError,
    ruleset::{AddrType, Ident, Ruleset},
};

/// One kernel element. Elements sort as nft sends them, by key and an end element before a
/// start element of the same key (adjacent intervals): the kernel checks overlaps in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Elem {
    /// The key as numbers (the second field 0 for one-field sets).
    order: (u128, u128),
    start: bool,
    pub(crate) kind: Kind,
}

/// What an element is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The start of the one-field interval `net`, with a map's value.
    Start { net: IpNet, value: Option<Value> },
    /// The end of the one-field interval `net` (keyed by the address after it).
    End { net: IpNet },
    /// nft's end element at address 0 (4 or 16 bytes).
    ZeroEnd { width: usize },
    /// An entry `mark . net : value` of a mark prefix map.
    Marked { mark: u32, net: IpNet, value: IpNet },
    /// An entry `mark : addr` of a mark address map.
    MarkTo { mark: u32, addr: IpAddr },
}

/// A map's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Value {
    /// A prefix (an interval).
    Prefix(IpNet),
    /// A mark.
    Mark(u32),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Prefix(net) => write!(f, "{net}"),
            Value::Mark(m) => write!(f, "{m:#x}"),
        }
    }
}

fn num(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address after `ip`, unless `ip` is the last one.
pub(crate) fn after(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) => u32::from(a).checked_add(1).map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(a) => u128::from(a).checked_add(1).map(|n| IpAddr::V6(n.into())),
    }
}

impl Elem {
    fn new(kind: Kind) -> Elem {
        let (order, start) = match kind {
            Kind::Start { net, .. } => ((num(net.network()), 0), true),
            Kind::End { net } => ((after(net.broadcast()).map_or(0, num), 0), false),
            Kind::ZeroEnd { .. } => ((0, 0), false),
            Kind::Marked { mark, net, .. } => ((u128::from(mark), num(net.network())), true),
            Kind::MarkTo { mark, .. } => ((u128::from(mark), 0), true),
        };
        Elem { order, start, kind }
    }

    /// An entry of the ruleset (a start element or a mark prefix map's), not an end.
    pub(crate) fn is_entry(&self) -> bool {
        self.start
    }
}

/// The entry an element belongs to, as the ruleset writes it.
impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Start { net, value: None } | Kind::End { net } => write!(f, "{net}"),
            Kind::Start {
                net,
                value: Some(v),
            } => write!(f, "{net} : {v}"),
            Kind::ZeroEnd { .. } => f.write_str("the interval end at address 0"),
            Kind::Marked { mark, net, value } => write!(f, "{mark:#x} . {net} : {value}"),
            Kind::MarkTo { mark, addr } => write!(f, "{mark:#x} : {addr}"),
        }
    }
}

/// The rbtree elements of one prefix: its start (with `value`) and its end, in order (so that
/// prefixes given in address order give their elements in order).
fn interval(net: IpNet, value: Option<Value>, out: &mut Vec<Elem>) {
    out.push(Elem::new(Kind::Start { net, value }));
    if after(net.broadcast()).is_some() {
        out.push(Elem::new(Kind::End { net }));
    }
}

/// `elems` in order, once each (linear when they come in order).
fn sorted(mut elems: Vec<Elem>) -> Vec<Elem> {
    elems.sort_unstable();
    elems.dedup();
    elems
}

/// The elements of one named set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    name: Ident,
    kind: &'static str,
    /// Address width, if nft adds an end element at 0 when filling it from empty.
    zero_end: Option<usize>,
    /// Whether an entry starts at address 0 (then nft adds none).
    starts_at_zero: bool,
    /// In order, once each.
    elems: Vec<Elem>,
}

/// The kernel elements of every set and map of a ruleset (sets, maps, mark maps, mark prefix
/// maps, then mark address maps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Elements(Vec<Named>);

fn width(t: AddrType) -> usize {
    match t {
        AddrType::V4 => 4,
        AddrType::V6 => 16,
    }
}

fn at_zero(n: &IpNet) -> bool {
    num(n.network()) == 0
}

/// The elements of `rs`, each entry checked as [`super::build::batch`] checks it (the rest of the
/// ruleset is not: callers use this for rulesets whose structure was applied already).
pub(crate) fn of(rs: &Ruleset) -> Result<Elements, BuildError> {
    let t = &rs.table;
    let mut out = Vec::new();
    for s in &rs.sets {
        let mut elems = Vec::with_capacity(2 * s.prefixes.len());
        for p in &s.prefixes {
            check::check_set_prefix(t, s, p)?;
            interval(*p, None, &mut elems);
        }
        out.push(Named {
            name: s.name.clone(),
            kind: "set",
            zero_end: Some(width(s.addr)),
            starts_at_zero: s.prefixes.iter().any(at_zero),
            elems: sorted(elems),
        });
    }
    for m in &rs.maps {
        let mut elems = Vec::with_capacity(2 * m.entries.len());
        for (from, to) in &m.entries {
            check::check_map_entry(t, m, from, to)?;
            interval(*from, Some(Value::Prefix(*to)), &mut elems);
        }
        out.push(Named {
            name: m.name.clone(),
            kind: "map",
            zero_end: Some(width(m.addr)),
            starts_at_zero: m.entries.iter().any(|(f, _)| at_zero(f)),
            elems: sorted(elems),
        });
    }
    for m in &rs.mark_maps {
        let mut elems = Vec::with_capacity(2 * m.entries.len());
        for (net, mark) in &m.entries {
            check::check_mark_entry(t, m, net, *mark)?;
            interval(*net, Some(Value::Mark(*mark)), &mut elems);
        }
        out.push(Named {
            name: m.name.clone(),
            kind: "map",
            zero_end: Some(width(m.addr)),
            starts_at_zero: m.entries.iter().any(|(n, _)| at_zero(n)),
            elems: sorted(elems),
        });
    }
    for m in &rs.mark_prefix_maps {
        let mut elems = Vec::with_capacity(m.entries.len());
        for ((mark, net), value) in &m.entries {
            check::check_mark_prefix_entry(t, m, (*mark, net), value)?;
            elems.push(Elem::new(Kind::Marked {
                mark: *mark,
                net: *net,
                value: *value,
            }));
        }
        out.push(Named {
            name: m.name.clone(),
            kind: "map",
            zero_end: None,
            starts_at_zero: false,
            elems: sorted(elems),
        });
    }
    for m in &rs.mark_addr_maps {
        check::check_mark_addr_unique(t, m)?;
        let mut elems = Vec::with_capacity(m.entries.len());
        for (mark, addr) in &m.entries {
            check::check_mark_addr_entry(t, m, *mark, *addr)?;
            elems.push(Elem::new(Kind::MarkTo {
                mark: *mark,
                addr: *addr,
            }));
        }
        out.push(Named {
            name: m.name.clone(),
            kind: "map",
            zero_end: None,
            starts_at_zero: false,
            elems: sorted(elems),
        });
    }
    Ok(Elements(out))
}

/// Whether `a` and `b` are the same table with the same chains, rules, sets and maps (names,
/// types, order), differing at most in the elements of their sets and maps.
pub(crate) fn only_elements_differ(a: &Ruleset, b: &Ruleset) -> bool {
    a.family == b.family
        && a.table == b.table
        && a.chains == b.chains
        && a.sets.len() == b.sets.len()
        && a.maps.len() == b.maps.len()
        && a.mark_maps.len() == b.mark_maps.len()
        && a.mark_prefix_maps.len() == b.mark_prefix_maps.len()
        && a.mark_addr_maps.len() == b.mark_addr_maps.len()
        && (a.sets.iter().zip(&b.sets)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
        && (a.maps.iter().zip(&b.maps)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
        && (a.mark_maps.iter().zip(&b.mark_maps)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
        && (a.mark_prefix_maps.iter().zip(&b.mark_prefix_maps))
            .all(|(x, y)| x.name == y.name && x.addr == y.addr && x.prefix_len == y.prefix_len)
        && (a.mark_addr_maps.iter().zip(&b.mark_addr_maps))
            .all(|(x, y)| x.name == y.name && x.addr == y.addr)
}

/// The element changes of one set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetDiff {
    pub(crate) name: Ident,
    /// "set" or "map".
    pub(crate) kind: &'static str,
    /// Elements to delete, in order.
    pub(crate) del: Vec<Elem>,
    /// Elements to add, in order.
    pub(crate) add: Vec<Elem>,
}

impl SetDiff {
    /// Entries (not kernel elements) removed and added.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let entries = |v: &[Elem]| v.iter().filter(|e| e.is_entry()).count();
        (entries(&self.del), entries(&self.add))
    }
}

/// The elements of sorted `a` not in sorted `b`, in order.
fn minus(a: &[Elem], b: &[Elem]) -> Vec<Elem> {
    let mut out = Vec::new();
    let mut rest = b;
    for e in a {
        while let Some((first, tail)) = rest.split_first()
            && first < e
        {
            rest = tail;
        }
        if rest.first().map(|f| f.cmp(e)) != Some(Ordering::Equal) {
            out.push(*e);
        }
    }
    out
}

/// The element changes from `prev` to `next` (of rulesets that [`only_elements_differ`]); sets
/// and maps with no change are left out.
pub(crate) fn diff(prev: &Elements, next: &Elements) -> Vec<SetDiff> {
    let mut out = Vec::new();
    for (p, n) in prev.0.iter().zip(&next.0) {
        let (del, mut add) = (minus(&p.elems, &n.elems), minus(&n.elems, &p.elems));
        if let Some(width) = n.zero_end
            && p.elems.is_empty()
            && !n.elems.is_empty()
            && !n.starts_at_zero
        {
            add.insert(0, Elem::new(Kind::ZeroEnd { width }));
        }
        if !del.is_empty() || !add.is_empty() {
            out.push(SetDiff {
                name: n.name.clone(),
                kind: n.kind,
                del,
                add,
            });
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
