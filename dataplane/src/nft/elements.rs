//! Pure: the element diff between two [`Ruleset`]s that differ only in the elements of their
//! sets and maps, and the nf_tables transaction that applies it over nfnetlink
//! (`NFNL_MSG_BATCH_BEGIN`, `NFT_MSG_DELSETELEM`s, `NFT_MSG_NEWSETELEM`s, `NFNL_MSG_BATCH_END`),
//! with a refusal mapped back to the element the kernel named.
//!
//! The elements are written exactly as `nft` writes them (`nft --debug=netlink` shows it), so
//! that a table filled by `nft -f` is changed element by element and lists the same afterwards:
//! - an interval set or map of one field (the kernel's rbtree) holds each prefix as a start
//!   element (keyed by its first address, carrying a map's value) and an end element flagged
//!   `NFT_SET_ELEM_INTERVAL_END` (keyed by the address after its last); a prefix that reaches the
//!   top of the address space has no end element and carries nft's "open interval" user data;
//!   nft also adds an end element at address 0 when it fills an empty set, which is never
//!   removed (it matches nothing and does not list);
//! - a concatenated interval map (pipapo) holds each entry as one element: `NFTA_SET_ELEM_KEY`
//!   the first addresses of both fields, `NFTA_SET_ELEM_KEY_END` their last addresses (each field
//!   padded to 4 bytes, which addresses already are), and as value an interval: its first and
//!   last address.
//!
//! The transaction carries the generation it was computed against (`NFNL_BATCH_GENID`): if
//! anything committed nftables changes in the namespace since, the kernel refuses it whole
//! with `ERESTART` and the caller replaces the table instead.

use std::{collections::BTreeSet, net::IpAddr, ops::Range};

use ipnet::IpNet;

use super::{AddrType, Family, Ident, Ruleset};
use crate::batch::{Ack, Writer};

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFNL_BATCH_GENID: u16 = 1;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_NEWGEN: u16 = 15;
const NFT_MSG_GETGEN: u16 = 16;
const NFTA_GEN_ID: u16 = 1;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_FLAGS: u16 = 3;
const NFTA_SET_ELEM_USERDATA: u16 = 6;
const NFTA_SET_ELEM_KEY_END: u16 = 10;
const NFTA_DATA_VALUE: u16 = 1;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;
/// nft's user data for a start element with no end element (`NFTNL_UDATA_SET_ELEM_FLAGS`,
/// 4 bytes, `NFTNL_SET_ELEM_F_INTERVAL_OPEN`).
const UDATA_INTERVAL_OPEN: [u8; 6] = [1, 4, 1, 0, 0, 0];
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_CREATE: u16 = 0x400;
/// Elements per message: an attribute holds at most 64 KiB, and an element at most ~150 bytes.
const PER_MESSAGE: usize = 256;

fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

fn nfproto(f: Family) -> u8 {
    match f {
        Family::Ip => 2,
        Family::Ip6 => 10,
        Family::Inet => 1,
    }
}

/// One kernel element, as nft writes it. Elements sort by key, an end element before a start
/// element of the same key (adjacent intervals), as nft sends them: the kernel checks overlaps
/// in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Elem {
    key: Vec<u8>,
    /// `NFT_SET_ELEM_INTERVAL_END`.
    end: bool,
    key_end: Option<Vec<u8>>,
    data: Option<Vec<u8>>,
    /// A start element with no end element.
    open: bool,
    /// The entry of the [`Ruleset`] it belongs to, for errors.
    shown: String,
}

impl Ord for Elem {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.key.cmp(&o.key))
            .then(o.end.cmp(&self.end))
            .then_with(|| self.key_end.cmp(&o.key_end))
            .then_with(|| self.data.cmp(&o.data))
            .then(self.open.cmp(&o.open))
            .then_with(|| self.shown.cmp(&o.shown))
    }
}

impl PartialOrd for Elem {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

fn bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The address after `ip`, unless `ip` is the last one.
fn after(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) => u32::from(a).checked_add(1).map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(a) => u128::from(a).checked_add(1).map(|n| IpAddr::V6(n.into())),
    }
}

/// First and last address of `net`, concatenated (an interval value).
fn range(net: &IpNet) -> Vec<u8> {
    let mut v = bytes(net.network());
    v.extend(bytes(net.broadcast()));
    v
}

/// The rbtree elements of one prefix: start (with `data`) and end.
fn interval(net: &IpNet, data: Option<Vec<u8>>, shown: String, out: &mut BTreeSet<Elem>) {
    let end = after(net.broadcast());
    if let Some(e) = end {
        out.insert(Elem {
            key: bytes(e),
            end: true,
            key_end: None,
            data: None,
            open: false,
            shown: shown.clone(),
        });
    }
    out.insert(Elem {
        key: bytes(net.network()),
        end: false,
        key_end: None,
        data,
        open: end.is_none(),
        shown,
    });
}

/// The element set of the set or map `i` of a ruleset (sets, then maps, then pair maps).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named<'a> {
    name: &'a Ident,
    kind: &'static str,
    addr: AddrType,
    /// Whether nft puts an end element at 0 when filling it from empty (one-field intervals).
    zero_end: bool,
    /// Whether the entries start at address 0 somewhere (then nft does not).
    starts_at_zero: bool,
    elems: BTreeSet<Elem>,
}

fn named(rs: &Ruleset) -> Vec<Named<'_>> {
    let zero = |n: &IpNet| bytes(n.network()).iter().all(|b| *b == 0);
    let mut out = Vec::new();
    for s in &rs.sets {
        let mut elems = BTreeSet::new();
        for p in &s.prefixes {
            interval(p, None, p.to_string(), &mut elems);
        }
        out.push(Named {
            name: &s.name,
            kind: "set",
            addr: s.addr,
            zero_end: true,
            starts_at_zero: s.prefixes.iter().any(zero),
            elems,
        });
    }
    for m in &rs.maps {
        let mut elems = BTreeSet::new();
        for (from, to) in &m.entries {
            interval(from, Some(range(to)), format!("{from} : {to}"), &mut elems);
        }
        out.push(Named {
            name: &m.name,
            kind: "map",
            addr: m.addr,
            zero_end: true,
            starts_at_zero: m.entries.iter().any(|(f, _)| zero(f)),
            elems,
        });
    }
    for m in &rs.pair_maps {
        let elems = m
            .entries
            .iter()
            .map(|((a, b), to)| {
                let mut key = bytes(a.network());
                key.extend(bytes(b.network()));
                let mut key_end = bytes(a.broadcast());
                key_end.extend(bytes(b.broadcast()));
                Elem {
                    key,
                    end: false,
                    key_end: Some(key_end),
                    data: Some(range(to)),
                    open: false,
                    shown: format!("{a} . {b} : {to}"),
                }
            })
            .collect();
        out.push(Named {
            name: &m.name,
            kind: "map",
            addr: m.addr,
            zero_end: false,
            starts_at_zero: false,
            elems,
        });
    }
    out
}

/// Whether `a` and `b` are the same table with the same chains, rules, sets and maps (names,
/// types, order), differing at most in the elements of their sets and maps.
pub(crate) fn only_elements_differ(a: &Ruleset, b: &Ruleset) -> bool {
    a.family == b.family
        && a.table == b.table
        && a.chains == b.chains
        && a.sets.len() == b.sets.len()
        && a.maps.len() == b.maps.len()
        && a.pair_maps.len() == b.pair_maps.len()
        && (a.sets.iter().zip(&b.sets)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
        && (a.maps.iter().zip(&b.maps)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
        && (a.pair_maps.iter().zip(&b.pair_maps)).all(|(x, y)| x.name == y.name && x.addr == y.addr)
}

/// The element changes of one set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetDiff {
    name: Ident,
    kind: &'static str,
    del: Vec<Elem>,
    add: Vec<Elem>,
}

impl SetDiff {
    /// Entries (not kernel elements) removed and added.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let entries = |v: &[Elem]| v.iter().filter(|e| !e.end).count();
        (entries(&self.del), entries(&self.add))
    }
}

/// The element changes from `prev` to `next`, which [`only_elements_differ`]; sets and maps
/// with no change are left out.
pub(crate) fn diff(prev: &Ruleset, next: &Ruleset) -> Vec<SetDiff> {
    let mut out = Vec::new();
    for (p, n) in named(prev).into_iter().zip(named(next)) {
        let del: Vec<Elem> = p.elems.difference(&n.elems).cloned().collect();
        let mut add: Vec<Elem> = n.elems.difference(&p.elems).cloned().collect();
        if p.elems.is_empty() && !n.elems.is_empty() && n.zero_end && !n.starts_at_zero {
            let width = if n.addr == AddrType::V4 { 4 } else { 16 };
            add.insert(
                0,
                Elem {
                    key: vec![0; width],
                    end: true,
                    key_end: None,
                    data: None,
                    open: false,
                    shown: "the interval end at address 0".into(),
                },
            );
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

/// One element message of a transaction, for mapping a refusal back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    seq: u32,
    adding: bool,
    kind: &'static str,
    set: Ident,
    /// Each element's attribute, as offsets in the message, and its entry.
    elems: Vec<(Range<u32>, String)>,
}

/// An nf_tables transaction, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transaction {
    /// The messages, begin to end.
    pub(crate) bytes: Vec<u8>,
    /// Sequence number of the batch begin (answered only when the batch is refused whole).
    pub(crate) begin: u32,
    /// Sequence numbers of the element messages (each acknowledged).
    pub(crate) acked: Vec<u32>,
    sent: Vec<Sent>,
}

/// How many sequence numbers [`transaction`] uses for `diffs`.
pub(crate) fn messages_needed(diffs: &[SetDiff]) -> usize {
    2 + diffs
        .iter()
        .map(|d| d.del.len().div_ceil(PER_MESSAGE) + d.add.len().div_ceil(PER_MESSAGE))
        .sum::<usize>()
}

fn batch_marker(w: &mut Writer, ty: u16, seq: u32, genid: Option<u32>) {
    let m = w.begin(ty, NLM_F_REQUEST, seq);
    let res_id = NFNL_SUBSYS_NFTABLES.to_be_bytes();
    w.raw(&[0, 0, res_id[0], res_id[1]]);
    if let Some(g) = genid {
        w.attr(NFNL_BATCH_GENID, &g.to_be_bytes());
    }
    w.end(m);
}

fn value(w: &mut Writer, ty: u16, v: &[u8]) {
    let n = w.nest(ty);
    w.attr(NFTA_DATA_VALUE, v);
    w.nest_end(n);
}

/// The transaction applying `diffs` to table `family table`, valid only if nftables is still at
/// generation `genid`: deletions first, then additions; sequence numbers from `first_seq`
/// ([`messages_needed`] of them).
pub(crate) fn transaction(
    family: Family,
    table: &Ident,
    diffs: &[SetDiff],
    genid: u32,
    first_seq: u32,
) -> Transaction {
    let mut w = Writer::default();
    let mut seq = first_seq;
    let mut next = || {
        let s = seq;
        seq = seq.wrapping_add(1);
        s
    };
    let begin = next();
    batch_marker(&mut w, NFNL_MSG_BATCH_BEGIN, begin, Some(genid));
    let mut sent = Vec::new();
    for adding in [false, true] {
        for d in diffs {
            let elems = if adding { &d.add } else { &d.del };
            for part in elems.chunks(PER_MESSAGE) {
                let (ty, flags) = if adding {
                    (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE)
                } else {
                    (NFT_MSG_DELSETELEM, NLM_F_REQUEST | NLM_F_ACK)
                };
                let seq = next();
                let m = w.begin(nft_type(ty), flags, seq);
                w.raw(&[nfproto(family), 0, 0, 0]);
                w.attr_str(NFTA_SET_ELEM_LIST_TABLE, table.as_str());
                w.attr_str(NFTA_SET_ELEM_LIST_SET, d.name.as_str());
                let list = w.nest(NFTA_SET_ELEM_LIST_ELEMENTS);
                let mut offsets = Vec::new();
                for e in part {
                    let at = w.len() - m;
                    let el = w.nest(NFTA_LIST_ELEM);
                    if e.end {
                        w.attr(
                            NFTA_SET_ELEM_FLAGS,
                            &NFT_SET_ELEM_INTERVAL_END.to_be_bytes(),
                        );
                    }
                    value(&mut w, NFTA_SET_ELEM_KEY, &e.key);
                    if let Some(k) = &e.key_end {
                        value(&mut w, NFTA_SET_ELEM_KEY_END, k);
                    }
                    if adding {
                        if let Some(v) = &e.data {
                            value(&mut w, NFTA_SET_ELEM_DATA, v);
                        }
                        if e.open {
                            w.attr(NFTA_SET_ELEM_USERDATA, &UDATA_INTERVAL_OPEN);
                        }
                    }
                    w.nest_end(el);
                    let to = w.len() - m;
                    let r = u32::try_from(at).unwrap_or(u32::MAX)..u32::try_from(to).unwrap_or(0);
                    offsets.push((r, e.shown.clone()));
                }
                // Within 64 KiB: PER_MESSAGE elements of at most ~150 bytes.
                w.nest_end(list);
                w.end(m);
                sent.push(Sent {
                    seq,
                    adding,
                    kind: d.kind,
                    set: d.name.clone(),
                    elems: offsets,
                });
            }
        }
    }
    batch_marker(&mut w, NFNL_MSG_BATCH_END, next(), None);
    Transaction {
        bytes: w.into_bytes(),
        begin,
        acked: sent.iter().map(|s| s.seq).collect(),
        sent,
    }
}

/// How a transaction went, from its acknowledgements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Committed.
    Done,
    /// Refused whole: nftables changed since the generation it was computed against.
    Restart,
    /// Refused (nothing of it applied): what, the kernel's text and error number.
    Refused {
        /// The element (or the commit) that was refused, described.
        what: String,
        /// The kernel's explanation.
        message: Option<String>,
        /// The error number.
        errno: i32,
    },
}

/// The outcome of `t` given its acknowledgements.
pub(crate) fn outcome(t: &Transaction, acks: &[Ack]) -> Outcome {
    let refused = |what: String, a: &Ack| Outcome::Refused {
        what,
        message: a.message.clone(),
        errno: a.errno,
    };
    for s in &t.sent {
        let Some(a) = acks.iter().find(|a| a.seq == s.seq && a.errno != 0) else {
            continue;
        };
        let (op, to) = if s.adding {
            ("adding", "to")
        } else {
            ("deleting", "from")
        };
        let elem = a
            .offset
            .and_then(|o| s.elems.iter().find(|(r, _)| r.contains(&o)));
        let mut what = match elem {
            Some((_, shown)) => format!("{op} element {shown} {to} {} {}", s.kind, s.set),
            None => format!("{op} {} elements {to} {} {}", s.elems.len(), s.kind, s.set),
        };
        if s.adding && a.errno == libc::EEXIST {
            what.push_str(" (it overlaps or clashes with an element already there)");
        }
        return refused(what, a);
    }
    if let Some(a) = acks.iter().find(|a| a.seq == t.begin && a.errno != 0) {
        return if a.errno == libc::ERESTART {
            Outcome::Restart
        } else {
            refused("committing the element changes".into(), a)
        };
    }
    match t.acked.iter().find(|s| !acks.iter().any(|a| a.seq == **s)) {
        Some(_) => Outcome::Refused {
            what: "the kernel did not acknowledge every element change".into(),
            message: None,
            errno: libc::EIO,
        },
        None => Outcome::Done,
    }
}

/// The generation after a commit at `genid` (0 is skipped).
pub(crate) fn next_generation(genid: u32) -> u32 {
    match genid.wrapping_add(1) {
        0 => 1,
        g => g,
    }
}

/// `NFT_MSG_GETGEN`: the current generation of the namespace's nftables.
pub(crate) fn get_generation(seq: u32) -> Vec<u8> {
    let mut w = Writer::default();
    let m = w.begin(nft_type(NFT_MSG_GETGEN), NLM_F_REQUEST | NLM_F_ACK, seq);
    w.raw(&[0, 0, 0, 0]);
    w.end(m);
    w.into_bytes()
}

/// The generation in an `NFT_MSG_NEWGEN` message (whole, header included).
pub(crate) fn parse_generation(ty: u16, msg: &[u8]) -> Option<u32> {
    if ty != nft_type(NFT_MSG_NEWGEN) {
        return None;
    }
    let mut rest = msg.get(crate::batch::HDR_LEN + 4..)?;
    while rest.len() >= 8 {
        let len = usize::from(u16::from_ne_bytes([rest[0], rest[1]]));
        let ty = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff;
        if len < 4 || len > rest.len() {
            return None;
        }
        if ty == NFTA_GEN_ID && len >= 8 {
            return Some(u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]));
        }
        rest = rest.get((len + 3) & !3..)?;
    }
    None
}

#[cfg(test)]
mod tests;
