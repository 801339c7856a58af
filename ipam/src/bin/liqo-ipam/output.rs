//! How the client subcommands print the service's answers (a table or JSON).

use ipam::service::proto;

pub(crate) fn peer_line(p: &proto::PeerInfo) -> String {
    format!(
        "peer {}: pod CIDR {} -> {} here, external CIDR {} -> {} here; sees our pods at {}, our external CIDR at {}",
        p.cluster_id,
        p.pod_cidr,
        p.pod_view,
        p.external_cidr,
        p.external_view,
        if p.our_pod_view.is_empty() {
            "(unknown)"
        } else {
            &p.our_pod_view
        },
        if p.our_external_view.is_empty() {
            "(unknown)"
        } else {
            &p.our_external_view
        },
    )
}

pub(crate) fn list_table(l: &proto::ListResponse) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "pod CIDR {}  service CIDR {}  external CIDR {}\n",
        l.pod_cidr, l.service_cidr, l.external_cidr
    ));
    if !l.store.is_empty() {
        o.push_str(&format!("store: {}\n", l.store));
    }
    o.push_str(&format!("pools: {}\n", l.pools.join(", ")));
    o.push_str(&format!(
        "reserved: {}\n",
        if l.reserved.is_empty() {
            "-".into()
        } else {
            l.reserved.join(", ")
        }
    ));
    for u in &l.usage {
        o.push_str(&format!(
            "  pool {:<18} {:>10} of {:>10} addresses used\n",
            u.pool, u.used, u.total
        ));
    }
    o.push_str(&format!(
        "\n{:<24} {:<18} {:<18} {:<18} {:<18} {:<18} OUR EXTERNAL (THERE)\n",
        "PEER", "POD CIDR", "POD (HERE)", "EXTERNAL CIDR", "EXTERNAL (HERE)", "OUR PODS (THERE)"
    ));
    for p in &l.peers {
        o.push_str(&format!(
            "{:<24} {:<18} {:<18} {:<18} {:<18} {:<18} {}\n",
            p.cluster_id,
            p.pod_cidr,
            p.pod_view,
            p.external_cidr,
            p.external_view,
            p.our_pod_view,
            p.our_external_view
        ));
    }
    if !l.endpoints.is_empty() {
        o.push_str(&format!(
            "\n{:<16} {:<16} HOLDS (PEER/HOLDER)\n",
            "ENDPOINT", "EXTERNAL IP"
        ));
        for e in &l.endpoints {
            o.push_str(&format!(
                "{:<16} {:<16} {}\n",
                e.ip,
                e.external_ip,
                holds(e).join(",")
            ));
        }
    }
    o
}

/// An endpoint's holds, `peer/holder` (`peer` alone for the unnamed holder).
fn holds(e: &proto::Endpoint) -> Vec<String> {
    e.holds
        .iter()
        .map(|h| match h.holder.as_str() {
            "" => h.cluster_id.clone(),
            holder => format!("{}/{holder}", h.cluster_id),
        })
        .collect()
}

pub(crate) fn list_json(l: &proto::ListResponse) -> serde_json::Value {
    let peers: Vec<_> = l
        .peers
        .iter()
        .map(|p| {
            serde_json::json!({"clusterId": p.cluster_id, "podCIDR": p.pod_cidr, "externalCIDR": p.external_cidr,
                "podView": p.pod_view, "externalView": p.external_view, "ourPodView": p.our_pod_view, "ourExternalView": p.our_external_view})
        })
        .collect();
    let endpoints: Vec<_> = l
        .endpoints
        .iter()
        .map(|e| {
            let holds: Vec<_> = e
                .holds
                .iter()
                .map(|h| serde_json::json!({"clusterId": h.cluster_id, "holder": h.holder}))
                .collect();
            serde_json::json!({"ip": e.ip, "externalIP": e.external_ip, "peers": e.peers, "holds": holds})
        })
        .collect();
    let usage: Vec<_> = l
        .usage
        .iter()
        .map(|u| serde_json::json!({"pool": u.pool, "used": u.used, "total": u.total}))
        .collect();
    serde_json::json!({"podCIDR": l.pod_cidr, "serviceCIDR": l.service_cidr, "externalCIDR": l.external_cidr,
        "store": l.store, "pools": l.pools, "reserved": l.reserved, "peers": peers, "endpoints": endpoints, "usage": usage})
}

pub(crate) use liqo_daemon::show::out;
