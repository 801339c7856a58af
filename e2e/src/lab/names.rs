//! Lab prefixes, namespace names and `exec` targets.

use std::{fmt, str::FromStr};

pub use testkit::Prefix;

use dataplane::NetnsName;

use crate::topology::Topology;

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
