//! Pure: the nf_tables transaction that applies an element diff over nfnetlink
//! (`NFNL_MSG_BATCH_BEGIN`, `NFT_MSG_DELSETELEM`s, `NFT_MSG_NEWSETELEM`s, `NFNL_MSG_BATCH_END`),
//! its outcome from the acknowledgements (a refusal mapped back to the element the kernel
//! pointed at), and the generation requests that guard it.
//!
//! Each element is written as nft writes it: `NFTA_SET_ELEM_KEY` (for a mark prefix map the
//! mark, in host byte order, then the address: fields of 4 bytes or more need no padding),
//! `NFTA_SET_ELEM_FLAGS` for an interval end, `NFTA_SET_ELEM_DATA` for a map's value (an
//! interval as its first and last address, a mark, or an address), and nft's user data for an open
//! interval. The transaction carries
//! the generation it was computed against (`NFNL_BATCH_GENID`): if anything committed nftables
//! changes in the namespace since, the kernel refuses it whole with `ERESTART`.

use std::{net::IpAddr, ops::Range};

use ipnet::IpNet;

use super::{
    elements::{Elem, Kind, SetDiff, Value, after},
    ruleset::{Family, Ident},
};
use crate::batch::{Ack, HDR_LEN, Writer};

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

fn bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// First and last address of `net`, concatenated (an interval value).
fn range(net: &IpNet) -> Vec<u8> {
    let mut v = bytes(net.network());
    v.extend(bytes(net.broadcast()));
    v
}

/// The attributes of one element, as nft writes them (`adding`: with its value).
fn element(w: &mut Writer, e: &Elem, adding: bool) {
    match e.kind {
        Kind::Start { net, value } => {
            nested_value(w, NFTA_SET_ELEM_KEY, &bytes(net.network()));
            if adding {
                match value {
                    Some(Value::Prefix(v)) => nested_value(w, NFTA_SET_ELEM_DATA, &range(&v)),
                    Some(Value::Mark(m)) => nested_value(w, NFTA_SET_ELEM_DATA, &m.to_ne_bytes()),
                    None => {}
                }
                if after(net.broadcast()).is_none() {
                    w.attr(NFTA_SET_ELEM_USERDATA, &UDATA_INTERVAL_OPEN);
                }
            }
        }
        Kind::End { net } => {
            w.attr(
                NFTA_SET_ELEM_FLAGS,
                &NFT_SET_ELEM_INTERVAL_END.to_be_bytes(),
            );
            let key = after(net.broadcast()).map(bytes).unwrap_or_default();
            nested_value(w, NFTA_SET_ELEM_KEY, &key);
        }
        Kind::ZeroEnd { width } => {
            w.attr(
                NFTA_SET_ELEM_FLAGS,
                &NFT_SET_ELEM_INTERVAL_END.to_be_bytes(),
            );
            nested_value(w, NFTA_SET_ELEM_KEY, &vec![0; width]);
        }
        Kind::Marked { mark, net, value } => {
            // A mark is a host-order u32 in the kernel's registers; an address, big endian.
            let mut key = mark.to_ne_bytes().to_vec();
            key.extend(bytes(net.network()));
            nested_value(w, NFTA_SET_ELEM_KEY, &key);
            if adding {
                nested_value(w, NFTA_SET_ELEM_DATA, &range(&value));
            }
        }
        Kind::MarkTo { mark, addr } => {
            nested_value(w, NFTA_SET_ELEM_KEY, &mark.to_ne_bytes());
            if adding {
                nested_value(w, NFTA_SET_ELEM_DATA, &bytes(addr));
            }
        }
    }
}

/// One element message of a transaction, for mapping a refusal back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    seq: u32,
    adding: bool,
    kind: &'static str,
    set: Ident,
    /// Each element's attribute, as offsets in the message.
    elems: Vec<(Range<u32>, Elem)>,
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

fn nested_value(w: &mut Writer, ty: u16, v: &[u8]) {
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
                    element(&mut w, e, adding);
                    w.nest_end(el);
                    let to = w.len() - m;
                    let r = u32::try_from(at).unwrap_or(u32::MAX)..u32::try_from(to).unwrap_or(0);
                    offsets.push((r, *e));
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
            Some((_, e)) => format!("{op} element {e} {to} {} {}", s.kind, s.set),
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
    let mut rest = msg.get(HDR_LEN + 4..)?;
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
