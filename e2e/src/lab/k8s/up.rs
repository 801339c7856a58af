//! Bringing a lab up with control planes ([`up`], [`up_in_band`]); on failure everything is
//! torn down ([`super::down()`]) before the error is returned.

use std::{collections::BTreeMap, fs, path::Path};

use super::{
    chart,
    down::down,
    error::K8sLabError,
    fabric, inband,
    k8s_lab::{K8sLab, Options, is_k8s, marker},
    nodes, realnode, relay,
};
use crate::{
    k8s::{self, Binaries, Clusters, Named},
    lab::{Lab, Prefix, build, state},
    liqo,
    topology::Topology,
};

/// Builds the lab `topology` under `prefix` with a control plane per cluster (see the module
/// doc). On failure everything is torn down before the error is returned.
pub async fn up(prefix: Prefix, topology: Topology, opts: &Options) -> Result<K8sLab, K8sLabError> {
    up_mode(prefix, topology, opts, false).await
}

/// As [`up`] with the operators, then makes every cluster reachable only in-band
/// ([`inband::setup`]): `liqo-lab up --k8s --in-band`.
pub async fn up_in_band(prefix: Prefix, topology: Topology) -> Result<K8sLab, K8sLabError> {
    up_mode(prefix, topology, &Options::default(), true).await
}

async fn up_mode(
    prefix: Prefix,
    topology: Topology,
    opts: &Options,
    in_band: bool,
) -> Result<K8sLab, K8sLabError> {
    // The binaries first: nothing is created if one is missing.
    let bins = k8s::binaries()?;
    if opts.chart && !opts.real_nodes {
        return Err(K8sLabError::lab(
            format!("lab {prefix} with Liqo from its chart"),
            "the chart's pods need real nodes (--real-nodes)",
        ));
    }
    if opts.chart {
        for c in &topology.clusters {
            if c.behind_nat {
                return Err(K8sLabError::lab(
                    format!("cluster {} with Liqo from its chart", c.name),
                    "it is behind NAT: its peers cannot reach its gateway, auth service and API \
                     server at the router's address (the lab's load balancer is the gateway's \
                     node); use a topology without behind_nat",
                ));
            }
            if c.nodes.len() < usize::from(opts.gateway_replicas) {
                return Err(K8sLabError::lab(
                    format!(
                        "cluster {} with {} gateway replicas",
                        c.name, opts.gateway_replicas
                    ),
                    format!(
                        "it has {} node(s): the replicas run on different nodes",
                        c.nodes.len()
                    ),
                ));
            }
        }
    }
    let node_bins = if opts.real_nodes {
        Some(k8s::node_binaries()?)
    } else {
        None
    };
    if in_band {
        for program in ["liqo-proxy", "liqo-controller-manager"] {
            crate::lab::bin(program)
                .map_err(|e| K8sLabError::lab(format!("lab {prefix} in-band"), e))?;
        }
    }
    // Clusters of `liqo-lab k8s up` with this prefix are not ours to take (nor to tear down
    // if this fails).
    let harness = Path::new(k8s::ROOT).join(prefix.as_str());
    if harness.exists() && !is_k8s(&prefix) {
        return Err(K8sLabError::lab(
            format!("lab {prefix} with control planes"),
            format!(
                "clusters {prefix} exist already ({}); use another --prefix or run \
                 `liqo-lab --prefix {prefix} k8s down` first",
                harness.display()
            ),
        ));
    }
    let lab = build::up_with(prefix.clone(), topology, false).await?;
    let up = async {
        let (set, liqo) = bring_up(&lab, &bins, node_bins.as_ref(), opts, in_band).await?;
        let mut k = K8sLab { lab, set, liqo };
        if in_band {
            inband::setup(&mut k).await?;
        }
        Ok::<_, K8sLabError>(k)
    };
    match up.await {
        Ok(k) => Ok(k),
        Err(e) => {
            if let Err(d) = down(&prefix) {
                tracing::error!(error = %liqo_types::chain(&d), "tearing down after a failed up");
            }
            Err(e)
        }
    }
}

async fn bring_up(
    lab: &Lab,
    bins: &Binaries,
    node_bins: Option<&Binaries>,
    opts: &Options,
    in_band: bool,
) -> Result<(Clusters, liqo::Liqo), K8sLabError> {
    let path = marker(&lab.prefix);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| K8sLabError::lab(format!("creating {}", dir.display()), e))?;
    }
    let text = serde_json::json!({
        "harness": lab.prefix.as_str(), "operators": opts.operators, "inBand": in_band,
        "realNodes": node_bins.is_some(), "chart": opts.chart,
    });
    state::write_atomic(&path, &text.to_string())?;
    let named: Vec<Named> = lab
        .topology
        .clusters
        .iter()
        .map(|c| Named {
            name: c.name.to_string(),
            pod_cidr: c.pod_cidr,
            service_cidr: c.service_cidr,
            nodes: 0,
            advertise: Some(relay::api_node(c).lan_addr.addr()),
            egress: node_bins.map(|_| realnode::egress_socket(lab, c)),
            // With Liqo from its chart, peers' pods reach the API server at the cluster's
            // public address (the lab's load balancer, [`chart`]).
            public: if opts.chart {
                vec![c.wan_addr.addr()]
            } else {
                Vec::new()
            },
            audit: false,
        })
        .collect();
    let mut set = Clusters::up_named(bins, &lab.prefix, &named).await?;
    for (c, kc) in lab.topology.clusters.iter().zip(&mut set.clusters) {
        nodes::create(&kc.client().await?, c, node_bins.is_none()).await?;
        kc.nodes = c.nodes.iter().map(|n| n.name.to_string()).collect();
    }
    set.save()?;
    if let (true, Some(node_bins)) = (opts.chart, node_bins) {
        for c in &lab.topology.clusters {
            let kc = set.get(c.name.as_str()).expect("one per lab cluster");
            fabric::relays(lab, c, kc, None, true).await?;
            realnode::start(lab, c, kc, node_bins, true).await?;
        }
        let installed = chart::install(lab, &set, bins, opts.gateway_replicas).await?;
        set.detach();
        return Ok((k8s::load(&lab.prefix)?, installed));
    }
    let reserved: BTreeMap<String, Vec<ipnet::Ipv4Net>> = lab
        .topology
        .clusters
        .iter()
        .map(|c| (c.name.to_string(), c.reserved_subnets.clone()))
        .collect();
    let installed = liqo::install(
        &set,
        bins,
        &liqo::Options {
            reserved_subnets: reserved,
            network: true,
            // Offloaded pods get working tokens, as a user expects: the virtual kubelets
            // then hold a pod back until the IPAM maps the home API server's address.
            vk_apiserver_support: true,
            ..liqo::Options::default()
        },
    )
    .await?;
    for c in &lab.topology.clusters {
        let kc = set.get(c.name.as_str()).expect("one per lab cluster");
        let i = installed.get(c.name.as_str()).expect("installed on each");
        fabric::start(lab, c, kc, i, opts).await?;
    }
    if let Some(node_bins) = node_bins {
        for c in &lab.topology.clusters {
            let kc = set.get(c.name.as_str()).expect("one per lab cluster");
            realnode::start(lab, c, kc, node_bins, false).await?;
        }
    }
    set.detach();
    Ok((k8s::load(&lab.prefix)?, installed))
}
