//! The desired state of one nftables table ([`Ruleset`]): its sets and maps, its chains and
//! their rules, and the names and values they take. Plain types: building a batch from them is
//! [`super::build`], applying it [`super::io`] and [`super::Session`].

use std::{fmt, str::FromStr};

use ipnet::IpNet;

use crate::names::IfName;

/// Address family of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    Ip,
    /// IPv6.
    Ip6,
    /// IPv4 and IPv6.
    Inet,
}

impl Family {
    /// The keyword `nft` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A table, chain, set or map name: 1 to 64 of `[A-Za-z0-9_]`, starting with a letter or `_`
/// (what nft accepts unquoted).
///
/// nft 1.0.6 accepts no quoted names, so a name must also not be an nft keyword (`dst`, `src`,
/// `ip`, `nat`, ...). Such a clash is not caught here (the keyword list changes between nft
/// releases); nft refuses the batch with its parser message and the kernel state stays as it
/// was. This project only uses fixed, prefixed names such as `liqo_gw` and `pre_nat`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ident(String);

/// A name refused by [`Ident`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid nftables name {0:?}: use 1 to 64 of letters, digits and '_', starting with a letter or '_'"
)]
pub struct InvalidIdent(pub String);

impl FromStr for Ident {
    type Err = InvalidIdent;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let first_ok = s
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        let rest_ok = s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if first_ok && rest_ok && s.len() <= 64 {
            Ok(Ident(s.into()))
        } else {
            Err(InvalidIdent(s.into()))
        }
    }
}

impl Ident {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The whole desired content of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// Family of the table.
    pub family: Family,
    /// Name of the table.
    pub table: Ident,
    /// Named sets of prefixes.
    pub sets: Vec<Set>,
    /// Named prefix-to-prefix maps.
    pub maps: Vec<Map>,
    /// Named prefix-to-mark maps.
    pub mark_maps: Vec<MarkMap>,
    /// Named maps from a mark and a prefix to a prefix.
    pub mark_prefix_maps: Vec<MarkPrefixMap>,
    /// Named maps from a mark to an address.
    pub mark_addr_maps: Vec<MarkAddrMap>,
    /// Chains with their rules, in order.
    pub chains: Vec<Chain>,
}

impl Ruleset {
    /// An empty table.
    pub fn new(family: Family, table: Ident) -> Ruleset {
        Ruleset {
            family,
            table,
            sets: Vec::new(),
            maps: Vec::new(),
            mark_maps: Vec::new(),
            mark_prefix_maps: Vec::new(),
            mark_addr_maps: Vec::new(),
            chains: Vec::new(),
        }
    }
}

/// IPv4 or IPv6 addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrType {
    /// `ipv4_addr`.
    V4,
    /// `ipv6_addr`.
    V6,
}

/// A set of prefixes (interval set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// Its name.
    pub name: Ident,
    /// Element type.
    pub addr: AddrType,
    /// The prefixes; must not overlap.
    pub prefixes: Vec<IpNet>,
}

/// A map from prefixes to prefixes of the same length, for netmap translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    /// Its name.
    pub name: Ident,
    /// Element type of keys and values.
    pub addr: AddrType,
    /// `(from, to)` pairs; keys must not overlap, and each pair has one prefix length.
    pub entries: Vec<(IpNet, IpNet)>,
}

/// A map from prefixes to packet marks (interval keys, the kernel's rbtree):
/// `meta mark set ip saddr map @m` labels a packet with the entry its address falls in, for a
/// [`MarkPrefixMap`] lookup in the same rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkMap {
    /// Its name.
    pub name: Ident,
    /// Element type of the keys.
    pub addr: AddrType,
    /// `(prefix, mark)` pairs; prefixes must not overlap.
    pub entries: Vec<(IpNet, u32)>,
}

/// A map from a mark and a prefix of one length to a prefix of that length, looked up as
/// `meta mark . (ip daddr & MASK)`: prefix translation that depends on the translated address
/// and on a second one, whose range a [`MarkMap`] turned into the mark in the same rule.
///
/// Its keys are exact (the address masked to `prefix_len`), so the kernel keeps it in a hash
/// table: adding or deleting an entry costs the same whatever the map's size (a concatenated
/// interval map, pipapo, scans its entries on every deletion: milliseconds at a thousand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkPrefixMap {
    /// Its name.
    pub name: Ident,
    /// Element type of the keys' prefixes and of the values.
    pub addr: AddrType,
    /// Length of every key prefix and value: the lookup masks the address to it.
    pub prefix_len: u8,
    /// `((mark, prefix), to)` entries; `to` replaces `prefix` (host bits kept).
    pub entries: Vec<((u32, IpNet), IpNet)>,
}

/// A map from a mark to one address, looked up as `meta mark`: the source address a
/// translation picks by a mark that a [`MarkMap`] set in the same rule (`snat ip to meta mark
/// map @m`). Its keys are exact (a hash table, like a [`MarkPrefixMap`]'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkAddrMap {
    /// Its name.
    pub name: Ident,
    /// Element type of the values.
    pub addr: AddrType,
    /// `(mark, address)` entries; marks must be unique.
    pub entries: Vec<(u32, std::net::IpAddr)>,
}

/// A chain; a base chain when `base` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Its name.
    pub name: Ident,
    /// Hook settings of a base chain.
    pub base: Option<BaseChain>,
    /// Rules in order.
    pub rules: Vec<Rule>,
}

/// Where and how a base chain hooks into the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    /// Chain type.
    pub kind: ChainKind,
    /// Netfilter hook.
    pub hook: Hook,
    /// Priority (`dstnat` = -100, `srcnat` = 100, `mangle` = -150, `filter` = 0).
    pub priority: i32,
    /// Verdict for packets no rule decided.
    pub policy: Policy,
}

/// Chain type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    /// `filter`.
    Filter,
    /// `nat`.
    Nat,
    /// `route`.
    Route,
}

/// Netfilter hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `prerouting`.
    Prerouting,
    /// `input`.
    Input,
    /// `forward`.
    Forward,
    /// `output`.
    Output,
    /// `postrouting`.
    Postrouting,
}

/// Base chain policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
}

/// One rule: matches then statements, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Expressions.
    pub exprs: Vec<Expr>,
    /// Comment shown by `nft list`.
    pub comment: Option<String>,
}

impl Rule {
    /// A rule from its expressions.
    pub fn new(exprs: Vec<Expr>) -> Rule {
        Rule {
            exprs,
            comment: None,
        }
    }

    /// The same rule with a comment.
    pub fn comment(mut self, c: impl Into<String>) -> Rule {
        self.comment = Some(c.into());
        self
    }
}

/// Which address of the IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Source address.
    Saddr,
    /// Destination address.
    Daddr,
}

/// Expressions and statements this project uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `iifname NAME`.
    Iif(IfName),
    /// `oifname NAME`.
    Oif(IfName),
    /// `ip saddr|daddr PREFIX`.
    Prefix(Field, IpNet),
    /// `ip saddr|daddr @SET` (the set or map keys).
    InSet(Field, Ident),
    /// `ip saddr|daddr != @SET`.
    NotInSet(Field, Ident),
    /// `meta mark set MARK`.
    SetMark(u32),
    /// `meta mark MARK`.
    Mark(u32),
    /// `counter`.
    Counter,
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// `return`.
    Return,
    /// `jump CHAIN`.
    Jump(Ident),
    /// `masquerade`.
    Masquerade,
    /// `snat to ADDR`.
    Snat(std::net::IpAddr),
    /// `dnat to ADDR`.
    Dnat(std::net::IpAddr),
    /// `snat ip prefix to ip saddr map @MAP` (netmap of the source).
    SnatPrefixMap(Ident),
    /// `dnat ip prefix to ip daddr map @MAP` (netmap of the destination).
    DnatPrefixMap(Ident),
    /// `meta mark set ip saddr|daddr map @MAP` (a [`MarkMap`]); an address in no entry ends the
    /// rule there.
    SetMarkMap(Field, Ident),
    /// `snat ip prefix to meta mark . (ip saddr & MASK) map @MAP` (a [`MarkPrefixMap`];
    /// translates the source).
    SnatPrefixMarkMap(Ident),
    /// `dnat ip prefix to meta mark . (ip daddr & MASK) map @MAP` (a [`MarkPrefixMap`];
    /// translates the destination).
    DnatPrefixMarkMap(Ident),
    /// `snat ip to meta mark map @MAP` (a [`MarkAddrMap`]; the source becomes the address of
    /// the packet's mark).
    SnatMarkMap(Ident),
    /// `tcp flags syn tcp option maxseg size set rt mtu`.
    ClampMssToPmtu,
    /// `tcp flags syn tcp option maxseg size set SIZE`.
    SetMss(u16),
    /// `notrack`.
    Notrack,
    /// `ct state STATE`.
    CtState(CtState),
}

/// A connection-tracking state, as `ct state` matches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtState {
    /// The first packet of a connection.
    New,
    /// A packet of a connection seen both ways.
    Established,
    /// A packet of a connection an existing one expects (an ICMP error, FTP data).
    Related,
    /// A packet conntrack could not place (no connection, or out of its state machine).
    Invalid,
}

impl CtState {
    /// The keyword nft uses.
    pub fn keyword(self) -> &'static str {
        match self {
            CtState::New => "new",
            CtState::Established => "established",
            CtState::Related => "related",
            CtState::Invalid => "invalid",
        }
    }
}
