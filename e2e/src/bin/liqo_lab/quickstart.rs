//! `liqo-lab quickstart` (and `--k8s`): the main demo and its report.

use std::{process::ExitCode, time::Instant};

use anyhow::{Context, Result};
use e2e::{
    lab::{self, Lab, Prefix, check, speed},
    topology::Topology,
};

use crate::{quickstart_demo, shared::require_root};

pub(crate) async fn quickstart(prefix: Prefix) -> Result<ExitCode> {
    require_root()?;
    let started = Instant::now();
    let r = lab::down(&prefix)?;
    if r.namespaces > 0 {
        println!(
            "removed the previous lab {prefix} ({} namespaces)",
            r.namespaces
        );
    }
    let t = Instant::now();
    let lab = lab::up(prefix.clone(), Topology::preset("two-clusters")?).await?;
    println!(
        "== Two clusters, rome and milan, both with pod CIDR 10.200.0.0/16, built in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    println!(
        "   each: 2 nodes x 2 pods (network namespaces), an IPAM service, a userspace-WireGuard \
         gateway on n0,\n   a VXLAN overlay agent on every node\n"
    );
    let t = Instant::now();
    let (va, vb) = lab::peer(&lab, "rome", "milan")?;
    println!(
        "== Peered in {:.2} s: each cluster's IPAM remapped the other's identical pod CIDR",
        t.elapsed().as_secs_f64()
    );
    let m = check::with_peerings(&lab)?;
    let views = lab::peerings(&lab)?;
    report(&prefix, &lab, (&va, &vb), &m, started, "", &views)
}

/// [`quickstart`] with control planes: the clusters come up with `up --k8s`, `liqoctl` peers
/// them, and the views are the TunnelEndpoints'.
/// `in_band`: the clusters come up with `up --k8s --in-band` and `liqoctl peer in-band` peers
/// them. `real_nodes`: the nodes run kubelets and containerd, and the manual's demo runs on them
/// ([`quickstart_demo`]).
pub(crate) async fn quickstart_k8s(
    prefix: Prefix,
    in_band: bool,
    real_nodes: bool,
    gateway_replicas: u8,
) -> Result<ExitCode> {
    require_root()?;
    let started = Instant::now();
    let r = lab::k8s::down(&prefix)?;
    if r.lab.namespaces > 0 || r.k8s > 0 {
        println!(
            "removed the previous lab {prefix} ({} namespaces, {} control-plane processes)",
            r.lab.namespaces, r.k8s
        );
    }
    if real_nodes {
        quickstart_demo::build()?;
    }
    let t = Instant::now();
    let topology = Topology::preset("two-clusters")?;
    let k = if in_band {
        lab::k8s::up_in_band(prefix.clone(), topology).await?
    } else {
        // On real nodes, Liqo is installed as the manual installs it: `liqoctl install`, its
        // components pods from the chart's images.
        let opts = lab::k8s::Options {
            real_nodes,
            chart: real_nodes,
            gateway_replicas,
            ..lab::k8s::Options::default()
        };
        lab::k8s::up(prefix.clone(), topology, &opts).await?
    };
    println!(
        "== Two clusters, rome and milan, both with pod CIDR 10.200.0.0/16, built in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    if real_nodes {
        println!(
            "   each: a control plane (etcd, kube-apiserver, controller-manager, scheduler) and 2 \
             real nodes (network\n   namespaces), each running containerd with runc, a kubelet and \
             kube-proxy (CoreDNS on n1), plus 2 lab\n   pods; Liqo installed by `liqoctl install` \
             from its chart, every component a pod: liqo-auth,\n   liqo-ipam, \
             liqo-controller-manager, liqo-gateway (a userspace-WireGuard gateway and its \
             operator{}), and\n   liqo-route on every node (a VXLAN overlay agent and its route \
             operator)\n",
            if gateway_replicas > 1 {
                "; two replicas, active and standby"
            } else {
                ""
            }
        );
        for c in ["rome", "milan"] {
            for args in [
                &["get", "nodes", "-o", "wide"][..],
                &["-n", "liqo", "get", "pods", "-o", "wide"][..],
            ] {
                let out = k.tool_ok("kubectl", c, args)?;
                println!("== kubectl --context {c} {}\n\n{out}", args.join(" "));
            }
        }
    } else {
        println!(
            "   each: a control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) \
             whose Nodes are the lab's\n   2 nodes (x 2 pods, network namespaces); Liqo (liqo-ipam, \
             liqo-auth, liqo-controller-manager);\n   the gateway operator and a userspace-WireGuard \
             gateway on n0, a route operator and a VXLAN\n   overlay agent on every node\n"
        );
    }
    if in_band {
        println!(
            "   in-band: each API server and auth service reachable only inside its cluster \
             (liqo-proxy and the\n   controller-manager on n0, the WAN dropped)\n"
        );
    }
    let t = Instant::now();
    let took = if in_band {
        k.peer_in_band("rome", "milan")?
    } else {
        k.peer("rome", "milan")?
    };
    let first = match k.first_cross_probe("rome", "milan", t, 60).await {
        Ok(d) => d,
        Err(e) => {
            // What the clusters show, to say why (the lab stays up to look further).
            eprintln!("{}", k.diagnose(&["rome", "milan"]));
            return Err(e.into());
        }
    };
    if in_band {
        println!(
            "== Peered in-band with liqoctl: `liqoctl peer in-band --bidirectional` returned in \
             {:.2} s;\n   a rome pod's first TCP probe answered by a milan pod {:.2} s after it \
             started",
            took.as_secs_f64(),
            first.as_secs_f64()
        );
    } else {
        println!(
            "== Peered with liqoctl: `liqoctl peer out-of-band milan` (the command milan's \
         `liqoctl generate peer-command` printed,\n   run against rome) returned in {:.2} s; \
         a rome pod's first TCP probe answered by a milan pod {:.2} s after it started",
            took.as_secs_f64(),
            first.as_secs_f64()
        );
    }
    // Both TunnelEndpoints, and every probe: the reverse direction may lag a moment.
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    let (views, m) = loop {
        let views = lab::k8s::views::peerings(&k).await?;
        let m = lab::k8s::views::check(&k).await?;
        if (views.len() >= 2 && m.failures().is_empty()) || Instant::now() > deadline {
            break (views, m);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let view = |from: &str, to: &str| {
        views
            .iter()
            .find(|(f, t, _)| f == from && t == to)
            .map(|(_, _, v)| *v)
            .with_context(|| format!("no TunnelEndpoint for {to} on {from}"))
    };
    let (va, vb) = (view("rome", "milan")?, view("milan", "rome")?);
    let demo_ok = if real_nodes {
        quickstart_demo::run(&k, &prefix).await?
    } else {
        true
    };
    let mut fcs = String::new();
    for c in ["rome", "milan"] {
        fcs.push_str(&format!(
            "\n== kubectl --context {c} get foreignclusters\n\n{}",
            k.foreign_clusters(c)?
        ));
    }
    let code = report(&prefix, &k.lab, (&va, &vb), &m, started, &fcs, &views)?;
    if gateway_replicas > 1 {
        println!(
            "Failover:  liqo-lab --prefix {prefix} kill-gateway rome   (kill -9 the active \
             gateway while a rome pod probes milan)"
        );
    }
    if !demo_ok {
        println!("\nFAILED: the demo was not answered by both clusters on every request (above)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(code)
}

/// The quickstart's report once peered: the pods and their addresses across, the matrix `m`,
/// the speed, what the control planes show (`k8s`: empty without them), and how to explore.
fn report(
    prefix: &Prefix,
    lab: &Lab,
    (va, vb): (&liqo_types::PeerView, &liqo_types::PeerView),
    m: &check::Matrix,
    started: Instant,
    k8s: &str,
    views: &[(String, String, liqo_types::PeerView)],
) -> Result<ExitCode> {
    println!(
        "   rome sees milan's pods at {}; milan sees rome's pods at {}\n",
        va.remote_pods, vb.remote_pods
    );
    println!("== Pods\n");
    println!(
        "   {:<8} {:<7} {:<5} {:<15} ADDRESS IN THE OTHER CLUSTER",
        "CLUSTER", "POD", "NODE", "OWN ADDRESS"
    );
    for c in &lab.topology.clusters {
        let (other, view) = if c.name.as_str() == "rome" {
            ("milan", vb)
        } else {
            ("rome", va)
        };
        for (n, p) in c.pods() {
            println!(
                "   {:<8} {:<7} {:<5} {:<15} {} (as seen from {other})",
                c.name.as_str(),
                p.name,
                n.name.as_str(),
                p.addr.addr(),
                check::translated(lab, c.name.as_str(), &p.name, view)?
            );
        }
    }
    println!(
        "\n== Connectivity: real ping and TCP; each server reports the source address it sees\n"
    );
    print!("{}", m.render());
    println!(
        "\n== Speed: pod to pod, one TCP stream for 2 s (iperf3), RTT = average of 100 pings\n"
    );
    for p in speed::paths_with(lab, views)?
        .iter()
        .filter(|p| p.name != "within a node")
    {
        let fig = speed::measure(p, 2);
        let label = if p.name == "across nodes" {
            "within rome, across nodes"
        } else {
            "across clusters"
        };
        match fig {
            Ok(f) => println!(
                "   {label:<27} {:<26} {:>6.2} Gbit/s {:>6.0} µs",
                format!("{} -> {}", p.from, p.to),
                f.gbps,
                f.rtt_us
            ),
            Err(e) => println!("   {label:<27} FAILED: {}", liqo_types::chain(&e)),
        }
    }
    println!(
        "   (full figures: liqo-bench path; the gateway against other WireGuard \
         implementations: liqo-bench tunnel)"
    );
    print!("{k8s}");
    let more = if !k8s.is_empty() {
        format!(
            "\x20          eval \"$(liqo-lab --prefix {prefix} k8s env)\"; \
             kubectl --context rome get tunnelendpoints -A\n"
        )
    } else {
        format!("\x20          liqo-lab --prefix {prefix} move-gateway rome n1\n")
    };
    println!(
        "\nDone in {:.1} s.\n\n\
         Explore:   liqo-lab --prefix {prefix} status\n\
         \x20          liqo-lab --prefix {prefix} exec rome/n1-p0 -- ping -c1 {}\n\
         \x20          liqo-lab --prefix {prefix} exec rome/n0 -- liqo-gateway status\n\
         \x20          liqo-lab --prefix {prefix} exec rome/n1 -- liqo-overlay status\n\
         {more}\
         \x20          liqo-lab --prefix {prefix} check\n\
         Tear down: liqo-lab --prefix {prefix} down",
        started.elapsed().as_secs_f64(),
        check::translated(lab, "milan", "n1-p0", va)?
    );
    Ok(if m.failures().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
