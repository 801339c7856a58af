//! Mutations of a good configuration document, each invalid by construction and each with the
//! field the daemon must name when it refuses it.
//!
//! A schema lists the document's fields by path template (`peers[*].remotePodCIDR`), with the
//! kind of value and whether the field is required. For every field present in the good
//! document the generator produces the bad values of its kind (host bits, `/0`, `/32`, IPv6 in
//! an IPv4 field, unusable addresses, huge and negative numbers, wrong types), drops it when it
//! is required, and adds unknown keys and duplicated list elements.

use serde_json::{Value, json};

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pod or external range (`/1`..`/30`).
    Range,
    /// A node's underlay address.
    NodeAddress,
    /// `ip:port` of a peer.
    Endpoint,
    /// A UDP/TCP port, 1..=65535.
    Port,
    /// An MTU, 576..=9000.
    Mtu,
    /// Seconds, 0..=3600.
    Keepalive,
    /// A VXLAN network identifier, 1..2^24.
    Vni,
    /// A WireGuard public key.
    Key,
    /// A cluster ID (RFC 1123 label), unique in its list.
    ClusterId,
    /// A name that must refer to an element of another list (a node).
    NodeRef,
    /// A node name, unique in its list.
    NodeName,
    /// A Linux interface name.
    IfName,
    /// A network namespace name (fixed while running).
    NetnsName,
    /// A file path (fixed while running).
    Path,
    /// A boolean.
    Bool,
    /// A listen address (fixed while running).
    Listen,
}

/// One field of a schema.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Path template: `a`, `list[*].b`, or `list[*]` for the elements of a list of scalars.
    pub path: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Whether dropping it makes the document invalid.
    pub required: bool,
}

/// A mutated document and the field its refusal must name (the refusal's field path must start
/// with it).
#[derive(Debug, Clone)]
pub struct Mutation {
    /// What was done, for messages.
    pub label: String,
    /// The document.
    pub doc: Value,
    /// The field the refusal must name.
    pub field: String,
}

fn bad_values(kind: Kind) -> Vec<Value> {
    let wrong_types = [json!([1]), json!({"a": 1}), json!(true)];
    let mut v: Vec<Value> = match kind {
        Kind::Range => vec![
            json!("10.71.0.1/16"),
            json!("0.0.0.0/0"),
            json!("10.71.0.0/32"),
            json!("10.71.0.0/31"),
            json!("fd00::/64"),
            json!("10.71.0.0"),
            json!("10.71.0.0/33"),
            json!("300.1.0.0/16"),
            json!(""),
            json!(1016),
        ],
        Kind::NodeAddress => vec![
            json!("0.0.0.0"),
            json!("255.255.255.255"),
            json!("224.0.0.1"),
            json!("127.0.0.1"),
            json!("169.254.3.4"),
            json!("240.1.2.3"),
            json!("::1"),
            json!("172.18.0"),
            json!(""),
            json!(17218),
        ],
        Kind::Endpoint => vec![
            json!("0.0.0.0:51840"),
            json!("255.255.255.255:51840"),
            json!("224.0.0.1:51840"),
            json!("127.0.0.1:51840"),
            json!("198.18.0.2:0"),
            json!("198.18.0.2:65536"),
            json!("[fd00::1]:51840"),
            json!("198.18.0.2"),
            json!("gateway.example:51840"),
            json!(51840),
        ],
        Kind::Port => vec![
            json!(0),
            json!(65536),
            json!(-1),
            json!(1e20),
            json!(u64::MAX),
            json!("51840"),
        ],
        Kind::Mtu => vec![
            json!(0),
            json!(575),
            json!(9001),
            json!(4_294_967_296_u64),
            json!(-1420),
            json!("1420"),
        ],
        Kind::Keepalive => vec![json!(3601), json!(65536), json!(-1), json!("10")],
        Kind::Vni => vec![json!(0), json!(16_777_216), json!(-5), json!("18952")],
        Kind::Key => vec![
            json!(""),
            json!("nope"),
            json!("xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp"),
            json!("xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=AA"),
            json!(44),
        ],
        Kind::ClusterId => vec![
            json!(""),
            json!("Rome"),
            json!("-rome"),
            json!("rome_1"),
            json!("x".repeat(64)),
            json!(7),
        ],
        Kind::NodeRef => vec![json!(""), json!("no-such-node"), json!(3)],
        Kind::NodeName => vec![json!(""), json!(5)],
        Kind::IfName => vec![
            json!(""),
            json!("a/b"),
            json!("x".repeat(16)),
            json!("a b"),
            json!(7),
        ],
        Kind::NetnsName => vec![json!(""), json!("a/b"), json!("other-namespace"), json!(1)],
        Kind::Path => vec![json!("/tmp/another/key"), json!(5)],
        Kind::Bool => vec![json!("yes"), json!(1)],
        Kind::Listen => vec![
            json!("127.0.0.1:1"),
            json!("0.0.0.0:6000"),
            json!("[::1]:6000"),
            json!("nowhere"),
            json!(6000),
        ],
    };
    if !matches!(kind, Kind::Bool) {
        v.extend(wrong_types);
    } else {
        v.extend([json!([true]), json!({"a": true})]);
    }
    v
}

/// Every concrete path of `template` in `doc` (`peers[*].id` -> `peers[0].id`, `peers[1].id`).
pub fn expand(doc: &Value, template: &str) -> Vec<String> {
    fn walk(v: &Value, parts: &[&str], prefix: String, out: &mut Vec<String>) {
        let Some((head, rest)) = parts.split_first() else {
            out.push(prefix);
            return;
        };
        let (key, each) = match head.strip_suffix("[*]") {
            Some(k) => (k, true),
            None => (*head, false),
        };
        let Some(child) = v.get(key) else { return };
        let name = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        if each {
            for (i, item) in child.as_array().into_iter().flatten().enumerate() {
                walk(item, rest, format!("{name}[{i}]"), out);
            }
        } else {
            walk(child, rest, name, out);
        }
    }
    let parts: Vec<&str> = template.split('.').collect();
    let mut out = Vec::new();
    walk(doc, &parts, String::new(), &mut out);
    out
}

/// The value at a concrete path, mutably (`peers[1].id`).
pub fn at<'a>(doc: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut v = doc;
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, Some(i.trim_end_matches(']').parse::<usize>().ok()?)),
            None => (part, None),
        };
        v = v.get_mut(key)?;
        if let Some(i) = index {
            v = v.get_mut(i)?;
        }
    }
    Some(v)
}

/// Removes the value at a concrete path (an object member).
fn remove(doc: &mut Value, path: &str) -> bool {
    let (parent, key) = match path.rsplit_once('.') {
        Some((p, k)) => (at(doc, p), k),
        None => (Some(doc), path),
    };
    parent
        .and_then(Value::as_object_mut)
        .is_some_and(|o| o.remove(key).is_some())
}

/// Every mutation of `good` under `schema`.
pub fn mutations(good: &Value, schema: &[Field]) -> Vec<Mutation> {
    let mut out = Vec::new();
    for f in schema {
        for path in expand(good, f.path) {
            for bad in bad_values(f.kind) {
                let mut doc = good.clone();
                *at(&mut doc, &path).expect("expanded path") = bad.clone();
                out.push(Mutation {
                    label: format!("{path} = {bad}"),
                    doc,
                    field: path.clone(),
                });
            }
            if f.required && !path.ends_with(']') {
                let mut doc = good.clone();
                assert!(remove(&mut doc, &path), "{path}");
                out.push(Mutation {
                    label: format!("{path} dropped"),
                    doc,
                    field: path.clone(),
                });
            }
        }
    }
    // Lists: a duplicated element (refused on the copy) and the wrong type; unknown keys.
    if let Some(o) = good.as_object() {
        for (key, v) in o {
            if let Some(items) = v.as_array().filter(|a| !a.is_empty()) {
                let mut doc = good.clone();
                doc[key]
                    .as_array_mut()
                    .expect("array")
                    .push(items[0].clone());
                out.push(Mutation {
                    label: format!("{key}[0] duplicated"),
                    doc,
                    field: format!("{key}[{}]", items.len()),
                });
                let mut doc = good.clone();
                doc[key] = json!("not a list");
                out.push(Mutation {
                    label: format!("{key} is a string"),
                    doc,
                    field: key.clone(),
                });
                if items[0].is_object() {
                    let mut doc = good.clone();
                    doc[key][0]["bogusKey"] = json!(1);
                    out.push(Mutation {
                        label: format!("{key}[0].bogusKey added"),
                        doc,
                        field: format!("{key}[0].bogusKey"),
                    });
                }
            }
        }
    }
    let mut doc = good.clone();
    doc["bogusKey"] = json!("x");
    out.push(Mutation {
        label: "bogusKey added".into(),
        doc,
        field: "bogusKey".into(),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_mutates_every_listed_field() {
        let good = json!({"mtu": 1420, "peers": [{"id": "a", "cidr": "10.0.0.0/8"}, {"id": "b", "cidr": "10.1.0.0/16"}], "ranges": ["10.9.0.0/16"]});
        assert_eq!(expand(&good, "peers[*].id"), ["peers[0].id", "peers[1].id"]);
        assert_eq!(expand(&good, "ranges[*]"), ["ranges[0]"]);
        let schema = [
            Field {
                path: "mtu",
                kind: Kind::Mtu,
                required: false,
            },
            Field {
                path: "peers[*].id",
                kind: Kind::ClusterId,
                required: true,
            },
            Field {
                path: "ranges[*]",
                kind: Kind::Range,
                required: false,
            },
        ];
        let m = mutations(&good, &schema);
        assert!(
            m.iter()
                .any(|m| m.label == "peers[1].id dropped" && m.doc["peers"][1].get("id").is_none())
        );
        assert!(
            m.iter()
                .any(|m| m.field == "ranges[0]" && m.doc["ranges"][0] == "0.0.0.0/0")
        );
        assert!(m.iter().any(|m| m.field == "peers[2]"));
        assert!(m.iter().all(|m| m.doc != good));
    }

    #[test]
    fn a_refusal_names_the_field_or_a_part_of_it_only() {
        use super::super::harness::names;
        assert!(names("peers[2].id", "peers[2]"));
        assert!(names("mtu", "mtu"));
        assert!(!names("mtuX", "mtu"));
        assert!(!names("peers[20]", "peers[2]"));
        assert!(names("peers[2][0]", "peers[2]"));
    }
}
