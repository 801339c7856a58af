//! `status`: what a lab is made of, and whether each namespace is there.

use std::fmt::Write as _;

use dataplane::Netns;
use serde::Serialize;

use super::{Lab, LabError, names};

/// One row of the status table.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Row {
    /// Cluster.
    pub cluster: String,
    /// Node or pod name.
    pub name: String,
    /// `gateway-node`, `node` or `pod`.
    pub role: String,
    /// Addresses (LAN, pod slice, WAN, or the pod address).
    pub addresses: String,
    /// Its namespace.
    pub netns: String,
    /// Whether the namespace exists.
    pub present: bool,
}

/// The rows of a lab, in topology order.
pub fn rows(lab: &Lab) -> Result<Vec<Row>, LabError> {
    let existing = Netns::list()?;
    let mut rows = Vec::new();
    for c in &lab.topology.clusters {
        let gateway = super::cluster::gateway_node(lab, c)?;
        for n in &c.nodes {
            let ns = names::netns(&lab.prefix, &[c.name.as_str(), n.name.as_str()]);
            let mut addresses = format!("lan {} pods {}", n.lan_addr, n.pod_slice);
            let on_gateway = n.name.as_str() == gateway;
            if on_gateway {
                // Writing into a String cannot fail.
                let _ = write!(addresses, " wan {}", c.wan_addr);
            }
            rows.push(Row {
                cluster: c.name.to_string(),
                name: n.name.to_string(),
                role: if on_gateway { "gateway-node" } else { "node" }.into(),
                addresses,
                present: existing.contains(&ns),
                netns: ns.to_string(),
            });
            for pod in &n.pods {
                let ns = names::netns(&lab.prefix, &[c.name.as_str(), &pod.name]);
                rows.push(Row {
                    cluster: c.name.to_string(),
                    name: pod.name.clone(),
                    role: "pod".into(),
                    addresses: pod.addr.addr().to_string(),
                    present: existing.contains(&ns),
                    netns: ns.to_string(),
                });
            }
        }
    }
    Ok(rows)
}

/// The status as a table for people.
pub fn render(lab: &Lab, rows: &[Row]) -> String {
    let mut out = format!(
        "lab {} ({} clusters)\n",
        lab.prefix,
        lab.topology.clusters.len()
    );
    for c in &lab.topology.clusters {
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "  cluster {:<8} pod CIDR {:<16} service CIDR {:<16} WAN {}",
            c.name, c.pod_cidr, c.service_cidr, c.wan_addr
        );
    }
    let w = [7, 10, 12, 56];
    // Writing into a String cannot fail.
    let _ = writeln!(
        out,
        "\n{:<w0$} {:<w1$} {:<w2$} {:<w3$} NETNS",
        "CLUSTER",
        "NAME",
        "ROLE",
        "ADDRESSES",
        w0 = w[0],
        w1 = w[1],
        w2 = w[2],
        w3 = w[3]
    );
    for r in rows {
        let missing = if r.present { "" } else { "  (MISSING)" };
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {}{missing}",
            r.cluster,
            r.name,
            r.role,
            r.addresses,
            r.netns,
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        );
    }
    out
}

/// The peerings, for people.
pub fn render_peerings(p: &[(String, String, liqo_types::PeerView)]) -> String {
    if p.is_empty() {
        return "\nno peerings (liqo-lab peer <a> <b>)\n".into();
    }
    let mut out = format!(
        "\n{:<10} {:<10} {:<18} {:<18} {}\n",
        "CLUSTER", "PEER", "PEER PODS (HERE)", "PEER EXT (HERE)", "OUR PODS (THERE)"
    );
    for (c, peer, v) in p {
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "{c:<10} {peer:<10} {:<18} {:<18} {}",
            v.remote_pods.to_string(),
            v.remote_external.to_string(),
            v.local_pods_at_peer
        );
    }
    out
}
