//! Pure translation of a [`Ruleset`] into the batch `nft -f -` applies as one transaction.
//!
//! The batch is nft's native syntax, not JSON: nft 1.0.6 (Debian bookworm) cannot declare a map
//! with interval values in JSON ("Invalid map type 'interval ipv4_addr'"), and prefix (netmap)
//! translation needs exactly that. Reading state back uses `nft -j list`, whose output is stable.

use std::{
    collections::HashMap,
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use ipnet::IpNet;

pub use super::error::BuildError;
use super::{
    check::{
        addr_type, check_map_entry, check_mark_addr_entry, check_mark_addr_unique,
        check_mark_entry, check_mark_prefix_entry, check_set_prefix,
    },
    ruleset::{
        AddrType, ChainKind, Expr, Family, Field, Hook, Ident, MarkPrefixMap, Policy, Ruleset,
    },
};

fn type_name(t: AddrType) -> &'static str {
    match t {
        AddrType::V4 => "ipv4_addr",
        AddrType::V6 => "ipv6_addr",
    }
}

fn proto(t: AddrType) -> &'static str {
    match t {
        AddrType::V4 => "ip",
        AddrType::V6 => "ip6",
    }
}

fn field(f: Field) -> &'static str {
    match f {
        Field::Saddr => "saddr",
        Field::Daddr => "daddr",
    }
}

fn family_allows(family: Family, t: AddrType) -> bool {
    matches!(
        (family, t),
        (Family::Inet, _) | (Family::Ip, AddrType::V4) | (Family::Ip6, AddrType::V6)
    )
}

/// `elements = { a, b }` or nothing.
fn elements(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" elements = {{ {} }};", items.join(", "))
    }
}

/// The batch replacing the whole table with `rs`: create-if-missing, delete, recreate, fill.
pub fn batch(rs: &Ruleset) -> Result<String, BuildError> {
    let table = &rs.table;
    let t = format!("{} {}", rs.family, table);
    let mut lookups: HashMap<&Ident, (&'static str, AddrType)> = HashMap::new();
    let dup = |name: &Ident| BuildError::Duplicate {
        table: table.clone(),
        name: name.clone(),
    };
    let wrong = |what: String, addr: String| BuildError::WrongFamily {
        table: table.clone(),
        family: rs.family,
        what,
        addr,
    };
    let mut out = format!("add table {t}\ndelete table {t}\nadd table {t}\n");

    for s in &rs.sets {
        if lookups.insert(&s.name, ("set", s.addr)).is_some() {
            return Err(dup(&s.name));
        }
        if !family_allows(rs.family, s.addr) {
            return Err(wrong(format!("set {}", s.name), type_name(s.addr).into()));
        }
        let mut items = Vec::new();
        for p in &s.prefixes {
            check_set_prefix(table, s, p)?;
            items.push(p.to_string());
        }
        out.push_str(&format!(
            "add set {t} {} {{ type {}; flags interval;{} }}\n",
            s.name,
            type_name(s.addr),
            elements(&items)
        ));
    }

    for m in &rs.maps {
        if lookups.insert(&m.name, ("map", m.addr)).is_some() {
            return Err(dup(&m.name));
        }
        if !family_allows(rs.family, m.addr) {
            return Err(wrong(format!("map {}", m.name), type_name(m.addr).into()));
        }
        let mut items = Vec::new();
        for (from, to) in &m.entries {
            check_map_entry(table, m, from, to)?;
            items.push(format!("{from} : {to}"));
        }
        let ty = type_name(m.addr);
        out.push_str(&format!(
            "add map {t} {} {{ type {ty} : interval {ty}; flags interval;{} }}\n",
            m.name,
            elements(&items)
        ));
    }

    for m in &rs.mark_maps {
        if lookups.insert(&m.name, ("mark map", m.addr)).is_some() {
            return Err(dup(&m.name));
        }
        if !family_allows(rs.family, m.addr) {
            return Err(wrong(format!("map {}", m.name), type_name(m.addr).into()));
        }
        let mut items = Vec::new();
        for (net, mark) in &m.entries {
            check_mark_entry(table, m, net, *mark)?;
            items.push(format!("{net} : {mark:#x}"));
        }
        out.push_str(&format!(
            "add map {t} {} {{ type {} : mark; flags interval;{} }}\n",
            m.name,
            type_name(m.addr),
            elements(&items)
        ));
    }

    for m in &rs.mark_prefix_maps {
        if lookups
            .insert(&m.name, ("mark prefix map", m.addr))
            .is_some()
        {
            return Err(dup(&m.name));
        }
        if !family_allows(rs.family, m.addr) {
            return Err(wrong(format!("map {}", m.name), type_name(m.addr).into()));
        }
        mask(table, m)?;
        let mut items = Vec::new();
        for ((mark, prefix), to) in &m.entries {
            check_mark_prefix_entry(table, m, (*mark, prefix), to)?;
            items.push(format!("{mark:#x} . {} : {to}", prefix.network()));
        }
        items.dedup();
        let ty = type_name(m.addr);
        out.push_str(&format!(
            "add map {t} {} {{ type mark . {ty} : interval {ty};{} }}\n",
            m.name,
            elements(&items)
        ));
    }

    for m in &rs.mark_addr_maps {
        if lookups.insert(&m.name, ("mark addr map", m.addr)).is_some() {
            return Err(dup(&m.name));
        }
        if !family_allows(rs.family, m.addr) {
            return Err(wrong(format!("map {}", m.name), type_name(m.addr).into()));
        }
        check_mark_addr_unique(table, m)?;
        let mut items = Vec::new();
        for (mark, addr) in &m.entries {
            check_mark_addr_entry(table, m, *mark, *addr)?;
            items.push(format!("{mark:#x} : {addr}"));
        }
        out.push_str(&format!(
            "add map {t} {} {{ type mark : {};{} }}\n",
            m.name,
            type_name(m.addr),
            elements(&items)
        ));
    }

    let mut chains: HashMap<&Ident, ()> = HashMap::new();
    for c in &rs.chains {
        if lookups.contains_key(&c.name) || chains.insert(&c.name, ()).is_some() {
            return Err(dup(&c.name));
        }
        match c.base {
            None => {
                out.push_str(&format!("add chain {t} {}\n", c.name));
            }
            Some(b) => {
                let kind = match b.kind {
                    ChainKind::Filter => "filter",
                    ChainKind::Nat => "nat",
                    ChainKind::Route => "route",
                };
                let hook = match b.hook {
                    Hook::Prerouting => "prerouting",
                    Hook::Input => "input",
                    Hook::Forward => "forward",
                    Hook::Output => "output",
                    Hook::Postrouting => "postrouting",
                };
                let policy = match b.policy {
                    Policy::Accept => "accept",
                    Policy::Drop => "drop",
                };
                out.push_str(&format!(
                    "add chain {t} {} {{ type {kind} hook {hook} priority {}; policy {policy}; }}\n",
                    c.name, b.priority
                ));
            }
        }
    }

    for c in &rs.chains {
        for (i, r) in c.rules.iter().enumerate() {
            let ctx = RuleCtx {
                rs,
                lookups: &lookups,
                chain: &c.name,
                index: i,
            };
            let mut text = Vec::new();
            for e in &r.exprs {
                if let Expr::Prefix(_, net) = e
                    && !family_allows(rs.family, addr_type(net))
                {
                    return Err(wrong(format!("chain {} rule {i}", c.name), net.to_string()));
                }
                text.push(ctx.expr(e)?);
            }
            if let Some(comment) = &r.comment {
                if comment
                    .chars()
                    .any(|ch| ch == '"' || ch == '\\' || ch.is_control())
                {
                    return Err(BuildError::BadComment {
                        table: table.clone(),
                        chain: c.name.clone(),
                        comment: comment.clone(),
                    });
                }
                text.push(format!("comment \"{comment}\""));
            }
            out.push_str(&format!("add rule {t} {} {}\n", c.name, text.join(" ")));
        }
    }
    Ok(out)
}

/// What translating one rule needs to know.
struct RuleCtx<'a> {
    rs: &'a Ruleset,
    lookups: &'a HashMap<&'a Ident, (&'static str, AddrType)>,
    chain: &'a Ident,
    index: usize,
}

impl RuleCtx<'_> {
    fn unknown(&self, what: &'static str, name: &Ident) -> BuildError {
        BuildError::Unknown {
            table: self.rs.table.clone(),
            chain: self.chain.clone(),
            rule: self.index,
            what,
            name: name.clone(),
        }
    }

    /// The element type of the set (or map keys) `name`; with `want == "set"`, of any set or
    /// map keyed by one prefix, else only of maps of that kind.
    fn lookup(&self, want: &'static str, name: &Ident) -> Result<AddrType, BuildError> {
        match self.lookups.get(name) {
            Some((kind, t))
                if *kind == want
                    || (want == "set" && !matches!(*kind, "mark prefix map" | "mark addr map")) =>
            {
                Ok(*t)
            }
            _ => Err(self.unknown(want, name)),
        }
    }

    /// `<stmt> ip prefix to meta mark . (ip FIELD & MASK) map @NAME`: translation of `f`
    /// through the mark prefix map `name`.
    fn mark_prefix_nat(&self, stmt: &str, name: &Ident, f: Field) -> Result<String, BuildError> {
        let p = proto(self.lookup("mark prefix map", name)?);
        let m = (self.rs.mark_prefix_maps.iter())
            .find(|m| &m.name == name)
            .ok_or_else(|| self.unknown("mark prefix map", name))?;
        Ok(format!(
            "{stmt} {p} prefix to meta mark . ({p} {} & {}) map @{name}",
            field(f),
            mask(&self.rs.table, m)?
        ))
    }

    /// One expression in nft syntax.
    fn expr(&self, e: &Expr) -> Result<String, BuildError> {
        Ok(match e {
            Expr::Iif(n) => format!("iifname \"{n}\""),
            Expr::Oif(n) => format!("oifname \"{n}\""),
            Expr::Prefix(f, net) => {
                format!("{} {} {}", proto(addr_type(net)), field(*f), Shown(net))
            }
            Expr::InSet(f, name) => {
                format!("{} {} @{name}", proto(self.lookup("set", name)?), field(*f))
            }
            Expr::NotInSet(f, name) => format!(
                "{} {} != @{name}",
                proto(self.lookup("set", name)?),
                field(*f)
            ),
            Expr::SetMark(v) => format!("meta mark set {v:#x}"),
            Expr::Mark(v) => format!("meta mark {v:#x}"),
            Expr::Counter => "counter".into(),
            Expr::Accept => "accept".into(),
            Expr::Drop => "drop".into(),
            Expr::Return => "return".into(),
            Expr::Jump(c) => {
                if !self.rs.chains.iter().any(|x| &x.name == c) {
                    return Err(self.unknown("chain", c));
                }
                format!("jump {c}")
            }
            Expr::Masquerade => "masquerade".into(),
            Expr::Snat(ip) => format!("snat to {ip}"),
            Expr::Dnat(ip) => format!("dnat to {ip}"),
            Expr::SnatPrefixMap(map) => {
                let p = proto(self.lookup("map", map)?);
                format!("snat {p} prefix to {p} saddr map @{map}")
            }
            Expr::DnatPrefixMap(map) => {
                let p = proto(self.lookup("map", map)?);
                format!("dnat {p} prefix to {p} daddr map @{map}")
            }
            Expr::SetMarkMap(f, map) => {
                let p = proto(self.lookup("mark map", map)?);
                format!("meta mark set {p} {} map @{map}", field(*f))
            }
            Expr::SnatPrefixMarkMap(map) => self.mark_prefix_nat("snat", map, Field::Saddr)?,
            Expr::DnatPrefixMarkMap(map) => self.mark_prefix_nat("dnat", map, Field::Daddr)?,
            Expr::SnatMarkMap(map) => {
                let p = proto(self.lookup("mark addr map", map)?);
                format!("snat {p} to meta mark map @{map}")
            }
            Expr::ClampMssToPmtu => "tcp flags syn tcp option maxseg size set rt mtu".into(),
            Expr::SetMss(size) => format!("tcp flags syn tcp option maxseg size set {size}"),
            Expr::Notrack => "notrack".into(),
            Expr::CtState(st) => format!("ct state {}", st.keyword()),
        })
    }
}

/// The netmask of `m`'s prefix length, as nft writes it.
fn mask(table: &Ident, m: &MarkPrefixMap) -> Result<IpAddr, BuildError> {
    let zero = match m.addr {
        AddrType::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AddrType::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    IpNet::new(zero, m.prefix_len)
        .map(|n| n.netmask())
        .map_err(|_| BuildError::BadPrefixLength {
            table: table.clone(),
            name: m.name.clone(),
            len: m.prefix_len,
        })
}

/// A prefix, or a bare address for a host prefix.
struct Shown<'a>(&'a IpNet);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.prefix_len() == self.0.max_prefix_len() {
            write!(f, "{}", self.0.addr())
        } else {
            write!(f, "{}", self.0.trunc())
        }
    }
}

/// The batch that removes the table `table` if it exists (and succeeds if it does not).
pub fn delete_batch(family: Family, table: &Ident) -> String {
    format!("add table {family} {table}\ndelete table {family} {table}\n")
}
