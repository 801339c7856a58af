//! Pure translation of a [`Ruleset`] into the JSON batch `nft -j -f -` applies atomically.

use std::collections::HashMap;

use ipnet::IpNet;
use serde_json::{Value, json};

use super::{AddrType, ChainKind, Expr, Family, Field, Hook, Ident, Policy, Ruleset};

/// A ruleset that cannot be built, naming the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Two sets, maps or chains share a name.
    #[error("table {table}: duplicate name {name}")]
    Duplicate {
        /// The table.
        table: Ident,
        /// The repeated name.
        name: Ident,
    },
    /// A rule refers to a set, map or chain that is not in the ruleset.
    #[error("table {table} chain {chain}: rule {rule} refers to unknown {what} {name}")]
    Unknown {
        /// The table.
        table: Ident,
        /// The chain of the rule.
        chain: Ident,
        /// Index of the rule in its chain.
        rule: usize,
        /// "set", "map" or "chain".
        what: &'static str,
        /// The missing name.
        name: Ident,
    },
    /// An element does not fit its set or map.
    #[error("table {table} {what} {name}: element {elem}: {problem}")]
    BadElement {
        /// The table.
        table: Ident,
        /// "set" or "map".
        what: &'static str,
        /// The set or map.
        name: Ident,
        /// The element.
        elem: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// An address does not match the table family.
    #[error("table {table} ({family}): {what} {addr} is of the other IP version")]
    WrongFamily {
        /// The table.
        table: Ident,
        /// Its family.
        family: Family,
        /// What holds the address.
        what: String,
        /// The address.
        addr: String,
    },
}

fn addr_type(net: &IpNet) -> AddrType {
    if net.addr().is_ipv4() { AddrType::V4 } else { AddrType::V6 }
}

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

fn prefix(net: &IpNet) -> Value {
    json!({"prefix": {"addr": net.network().to_string(), "len": net.prefix_len()}})
}

fn payload(t: AddrType, f: Field) -> Value {
    let field = match f {
        Field::Saddr => "saddr",
        Field::Daddr => "daddr",
    };
    json!({"payload": {"protocol": proto(t), "field": field}})
}

fn family_allows(family: Family, t: AddrType) -> bool {
    matches!((family, t), (Family::Inet, _) | (Family::Ip, AddrType::V4) | (Family::Ip6, AddrType::V6))
}

/// The atomic batch replacing the whole table with `rs`.
pub fn batch(rs: &Ruleset) -> Result<Value, BuildError> {
    let table = &rs.table;
    let fam = rs.family.as_str();
    let mut lookups: HashMap<&Ident, (&'static str, AddrType)> = HashMap::new();
    let mut names: HashMap<&Ident, ()> = HashMap::new();
    let dup = |name: &Ident| BuildError::Duplicate { table: table.clone(), name: name.clone() };
    let wrong = |what: String, addr: String| BuildError::WrongFamily { table: table.clone(), family: rs.family, what, addr };

    let t = json!({"family": fam, "name": table.as_str()});
    let mut cmds = vec![json!({"add": {"table": t}}), json!({"delete": {"table": t}}), json!({"add": {"table": t}})];

    for s in &rs.sets {
        if names.insert(&s.name, ()).is_some() {
            return Err(dup(&s.name));
        }
        if !family_allows(rs.family, s.addr) {
            return Err(wrong(format!("set {}", s.name), type_name(s.addr).into()));
        }
        lookups.insert(&s.name, ("set", s.addr));
        let mut elems = Vec::new();
        for p in &s.prefixes {
            if addr_type(p) != s.addr || *p != p.trunc() {
                return Err(BuildError::BadElement {
                    table: table.clone(),
                    what: "set",
                    name: s.name.clone(),
                    elem: p.to_string(),
                    problem: if addr_type(p) != s.addr { "wrong IP version" } else { "host bits set" },
                });
            }
            elems.push(prefix(p));
        }
        let mut set = json!({"family": fam, "table": table.as_str(), "name": s.name.as_str(),
            "type": type_name(s.addr), "flags": ["interval"]});
        if !elems.is_empty() {
            set["elem"] = Value::Array(elems);
        }
        cmds.push(json!({"add": {"set": set}}));
    }

    for m in &rs.maps {
        if names.insert(&m.name, ()).is_some() {
            return Err(dup(&m.name));
        }
        if !family_allows(rs.family, m.addr) {
            return Err(wrong(format!("map {}", m.name), type_name(m.addr).into()));
        }
        lookups.insert(&m.name, ("map", m.addr));
        let mut elems = Vec::new();
        for (from, to) in &m.entries {
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
                return Err(bad("prefix lengths differ; a prefix translation keeps host bits"));
            }
            elems.push(json!([prefix(from), prefix(to)]));
        }
        let mut map = json!({"family": fam, "table": table.as_str(), "name": m.name.as_str(),
            "type": type_name(m.addr), "map": type_name(m.addr), "flags": ["interval"]});
        if !elems.is_empty() {
            map["elem"] = Value::Array(elems);
        }
        cmds.push(json!({"add": {"map": map}}));
    }

    for c in &rs.chains {
        if names.insert(&c.name, ()).is_some() {
            return Err(dup(&c.name));
        }
    }
    for c in &rs.chains {
        let mut chain = json!({"family": fam, "table": table.as_str(), "name": c.name.as_str()});
        if let Some(b) = c.base {
            chain["type"] = json!(match b.kind {
                ChainKind::Filter => "filter",
                ChainKind::Nat => "nat",
                ChainKind::Route => "route",
            });
            chain["hook"] = json!(match b.hook {
                Hook::Prerouting => "prerouting",
                Hook::Input => "input",
                Hook::Forward => "forward",
                Hook::Output => "output",
                Hook::Postrouting => "postrouting",
            });
            chain["prio"] = json!(b.priority);
            chain["policy"] = json!(match b.policy {
                Policy::Accept => "accept",
                Policy::Drop => "drop",
            });
        }
        cmds.push(json!({"add": {"chain": chain}}));
    }

    for c in &rs.chains {
        for (i, r) in c.rules.iter().enumerate() {
            let ctx = RuleCtx { rs, lookups: &lookups, chain: &c.name, index: i };
            let mut exprs = Vec::new();
            for e in &r.exprs {
                if let Expr::Prefix(_, net) = e
                    && !family_allows(rs.family, addr_type(net))
                {
                    return Err(wrong(format!("chain {} rule {i}", c.name), net.to_string()));
                }
                exprs.extend(ctx.expr(e)?);
            }
            let mut rule = json!({"family": fam, "table": table.as_str(), "chain": c.name.as_str(), "expr": exprs});
            if let Some(comment) = &r.comment {
                rule["comment"] = json!(comment);
            }
            cmds.push(json!({"add": {"rule": rule}}));
        }
    }
    Ok(json!({"nftables": cmds}))
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

    /// The element type of the set (or map keys) `name`; with `want == "map"`, only maps.
    fn lookup(&self, want: &'static str, name: &Ident) -> Result<AddrType, BuildError> {
        match self.lookups.get(name) {
            Some((kind, t)) if *kind == want || want == "set" => Ok(*t),
            _ => Err(self.unknown(want, name)),
        }
    }

    /// One expression as JSON statements.
    fn expr(&self, e: &Expr) -> Result<Vec<Value>, BuildError> {
        let m = |left: Value, right: Value, op: &str| json!({"match": {"op": op, "left": left, "right": right}});
        let syn = m(json!({"payload": {"protocol": "tcp", "field": "flags"}}), json!("syn"), "in");
        let mss = json!({"tcp option": {"name": "maxseg", "field": "size"}});
        let v = match e {
            Expr::Iif(n) => m(json!({"meta": {"key": "iifname"}}), json!(n.as_str()), "=="),
            Expr::Oif(n) => m(json!({"meta": {"key": "oifname"}}), json!(n.as_str()), "=="),
            Expr::Prefix(f, net) => {
                let right =
                    if net.prefix_len() == net.max_prefix_len() { json!(net.addr().to_string()) } else { prefix(net) };
                m(payload(addr_type(net), *f), right, "==")
            }
            Expr::InSet(f, name) => m(payload(self.lookup("set", name)?, *f), json!(format!("@{name}")), "=="),
            Expr::NotInSet(f, name) => m(payload(self.lookup("set", name)?, *f), json!(format!("@{name}")), "!="),
            Expr::SetMark(v) => json!({"mangle": {"key": {"meta": {"key": "mark"}}, "value": v}}),
            Expr::Mark(v) => m(json!({"meta": {"key": "mark"}}), json!(v), "=="),
            Expr::Counter => json!({"counter": null}),
            Expr::Accept => json!({"accept": null}),
            Expr::Drop => json!({"drop": null}),
            Expr::Return => json!({"return": null}),
            Expr::Jump(c) => {
                if !self.rs.chains.iter().any(|x| &x.name == c) {
                    return Err(self.unknown("chain", c));
                }
                json!({"jump": {"target": c.as_str()}})
            }
            Expr::Masquerade => json!({"masquerade": null}),
            Expr::Snat(ip) => json!({"snat": {"addr": ip.to_string()}}),
            Expr::Dnat(ip) => json!({"dnat": {"addr": ip.to_string()}}),
            Expr::SnatPrefixMap(map) | Expr::DnatPrefixMap(map) => {
                let t = self.lookup("map", map)?;
                let (stmt, field) =
                    if matches!(e, Expr::SnatPrefixMap(_)) { ("snat", Field::Saddr) } else { ("dnat", Field::Daddr) };
                json!({stmt: {"family": proto(t), "addr": {"map": {"key": payload(t, field), "data": format!("@{map}")}},
                    "flags": "netmap", "type_flags": "prefix"}})
            }
            Expr::ClampMssToPmtu => {
                return Ok(vec![syn, json!({"mangle": {"key": mss, "value": {"rt": {"key": "mtu"}}}})]);
            }
            Expr::SetMss(size) => return Ok(vec![syn, json!({"mangle": {"key": mss, "value": size}})]),
            Expr::Notrack => json!({"notrack": null}),
        };
        Ok(vec![v])
    }
}

/// The batch that removes the table `table` if it exists (and succeeds if it does not).
pub fn delete_batch(family: Family, table: &Ident) -> Value {
    let t = json!({"family": family.as_str(), "name": table.as_str()});
    json!({"nftables": [{"add": {"table": t}}, {"delete": {"table": t}}]})
}
