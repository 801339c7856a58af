//! Lab prefixes, namespace names and `exec` targets.

use std::{fmt, str::FromStr};

use dataplane::NetnsName;
use serde::{Deserialize, Serialize};

use crate::topology::Topology;

/// The prefix of a lab: 1 to 10 of `[a-z0-9]`, starting with a letter. It has no dash, so the
/// namespaces of lab `lq` (`lq-...`) never match those of lab `lq2` (`lq2-...`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix(String);

/// A prefix that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid lab prefix {0:?}: use 1 to 10 lowercase letters and digits, starting with a letter"
)]
pub struct InvalidPrefix(pub String);

impl FromStr for Prefix {
    type Err = InvalidPrefix;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=10).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if ok {
            Ok(Prefix(s.into()))
        } else {
            Err(InvalidPrefix(s.into()))
        }
    }
}

impl TryFrom<String> for Prefix {
    type Error = InvalidPrefix;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Prefix {
    /// The prefix as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `ns` belongs to a lab with this prefix.
    pub fn owns(&self, ns: &NetnsName) -> bool {
        ns.as_str()
            .strip_prefix(self.as_str())
            .is_some_and(|rest| rest.starts_with('-'))
    }
}

/// `<prefix>-<part>-<part>...`; the parts are validated names, so this is a valid netns name.
pub(crate) fn netns(prefix: &Prefix, parts: &[&str]) -> NetnsName {
    let mut s = prefix.to_string();
    for p in parts {
        s.push('-');
        s.push_str(p);
    }
    s.parse().expect("lab names are built from validated parts")
}

/// Name of the WAN namespace.
pub(crate) const WAN: &str = "wan";
/// Name of a cluster's LAN (switch) namespace.
pub(crate) const LAN: &str = "lan";

/// A target that is no place of the lab.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown target {target:?}: {why}")]
pub struct BadTarget {
    /// The target as given.
    pub target: String,
    /// Why it was refused, with the valid choices.
    pub why: String,
}

/// A place in the lab: `<cluster>/<node>`, `<cluster>/<pod>`, `<cluster>/lan` or `wan`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target(String);

impl FromStr for Target {
    type Err = BadTarget;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == WAN
            || s.split_once('/')
                .is_some_and(|(c, n)| !c.is_empty() && !n.is_empty())
        {
            Ok(Target(s.into()))
        } else {
            Err(BadTarget {
                target: s.into(),
                why: "expected <cluster>/<node>, <cluster>/<pod>, <cluster>/lan or wan".into(),
            })
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The namespace of `target`, if the topology has it.
pub(crate) fn resolve(
    prefix: &Prefix,
    topo: &Topology,
    target: &Target,
) -> Result<NetnsName, BadTarget> {
    let bad = |why: String| BadTarget {
        target: target.0.clone(),
        why,
    };
    if target.0 == WAN {
        return Ok(netns(prefix, &[WAN]));
    }
    let (c, n) = target.0.split_once('/').expect("validated by FromStr");
    let Some(cluster) = topo.cluster(c) else {
        let known: Vec<String> = topo.clusters.iter().map(|c| c.name.to_string()).collect();
        return Err(bad(format!(
            "no cluster {c:?}; clusters: {}",
            known.join(", ")
        )));
    };
    let known = cluster.node(n).is_some() || cluster.pods().any(|(_, p)| p.name == n) || n == LAN;
    if !known {
        let mut names: Vec<String> = cluster.nodes.iter().map(|n| n.name.to_string()).collect();
        names.extend(cluster.pods().map(|(_, p)| p.name.clone()));
        names.push(LAN.into());
        return Err(bad(format!(
            "cluster {c} has no node or pod {n:?}; choose from: {}",
            names.join(", ")
        )));
    }
    Ok(netns(prefix, &[c, n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_validated_and_never_overlap() {
        assert!("lq".parse::<Prefix>().is_ok());
        for bad in ["", "Lq", "l-q", "1lq", "abcdefghijk"] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
        let lq: Prefix = "lq".parse().unwrap();
        assert!(lq.owns(&"lq-rome-n0".parse().unwrap()));
        assert!(!lq.owns(&"lq2-rome-n0".parse().unwrap()));
        assert!(!lq.owns(&"lq".parse().unwrap()));
    }

    #[test]
    fn targets_resolve_against_the_topology() {
        let topo = Topology::preset("two-clusters").unwrap();
        let p: Prefix = "lq".parse().unwrap();
        let r = |s: &str| resolve(&p, &topo, &s.parse().unwrap()).map(|n| n.to_string());
        assert_eq!(r("rome/n0").unwrap(), "lq-rome-n0");
        assert_eq!(r("milan/n1-p1").unwrap(), "lq-milan-n1-p1");
        assert_eq!(r("rome/lan").unwrap(), "lq-rome-lan");
        assert_eq!(r("wan").unwrap(), "lq-wan");
        let e = r("paris/n0").unwrap_err().to_string();
        assert!(
            e.contains("no cluster \"paris\"") && e.contains("rome, milan"),
            "{e}"
        );
        let e = r("rome/n7").unwrap_err().to_string();
        assert!(e.contains("n0-p1"), "{e}");
        assert!("rome".parse::<Target>().is_err());
    }
}
