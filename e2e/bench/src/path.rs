//! `liqo-bench path`: pod-to-pod TCP throughput and RTT along the three paths a pod takes,
//! on a lab of two peered clusters with the same pod CIDR (two nodes each):
//!
//! - within a node (two pods on one bridge);
//! - across nodes of a cluster (the cluster's own routing);
//! - across clusters, with pods on non-gateway nodes at both ends: overlay to the gateway node,
//!   NAT and WireGuard to the peer's gateway, NAT and overlay to the target's node.
//!
//! In the same run it measures our gateway alone (`liqo-bench tunnel`'s `ours` variant, unpinned) and
//! reports the cross-cluster path as a fraction of it. Repeats are interleaved across the paths.
//! One measurement of one path is the lab's ([`e2e::lab::speed`]), as the quickstart's.

use std::time::Instant;

use e2e::{
    lab::{
        self, Lab,
        speed::{Figure, Path, measure, paths, paths_with},
    },
    topology::Topology,
};
use serde::{Deserialize, Serialize};

use super::{BenchError, Options, Profile, Variant, options::fail, run};
use crate::report_core::{Header, Spread, Target, ratio};

/// The figures of one path over the repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathRow {
    /// The path.
    pub path: Path,
    /// Throughput over the repeats.
    pub gbps: Option<Spread>,
    /// RTT over the repeats.
    pub rtt_us: Option<Spread>,
    /// Failed repeats, with why.
    pub errors: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathReport {
    /// How and on what (the tools and installs of the gateway-alone run).
    pub header: Header,
    /// Repeats per path.
    pub repeats: u32,
    /// Seconds per iperf3 test.
    pub seconds: u32,
    /// Within a node, across nodes, across clusters.
    pub rows: Vec<PathRow>,
    /// Our gateway alone (`liqo-bench tunnel`, variant ours, profile shared), Gbit/s.
    pub gateway_alone_gbps: Option<Spread>,
    /// Cross-cluster median over the gateway-alone median.
    pub cross_over_gateway: Option<f64>,
    /// The share of the gateway alone, and the RTT the gateways add.
    pub targets: Vec<Target>,
}

/// The share of the gateway-alone figure the cross-cluster path should reach.
pub const TARGET_SHARE: f64 = 0.5;
/// Most RTT the two gateways may add: across clusters over across nodes, µs (medians).
pub const TARGET_ADDED_RTT_US: f64 = 100.0;

/// Runs `liqo-bench path`: the lab under `opts.prefix`, then our gateway alone.
pub async fn path(opts: Options) -> Result<PathReport, BenchError> {
    let opts = opts.validate()?;
    let header = Header::now();
    let topo = Topology::preset("two-clusters")
        .map_err(|e| fail("the two-clusters preset", e.to_string()))?;
    let l = lab::up(opts.prefix.clone(), topo).await?;
    let measured = measure_lab(&l, &opts);
    let down = lab::down(&l.prefix);
    let rows = measured?;
    down?;
    with_gateway_alone(header, opts, rows).await
}

/// `liqo-bench path --k8s`: the same on a lab with control planes (`liqo-lab up --k8s`), peered by
/// `liqoctl`, the cross-cluster address from rome's TunnelEndpoint.
pub async fn path_k8s(opts: Options) -> Result<PathReport, BenchError> {
    let opts = opts.validate()?;
    let header = Header::now();
    let topo = Topology::preset("two-clusters")
        .map_err(|e| fail("the two-clusters preset", e.to_string()))?;
    let k = lab::k8s::up(opts.prefix.clone(), topo, &lab::k8s::Options::default())
        .await
        .map_err(|e| fail("up --k8s", liqo_types::chain(&e)))?;
    let measured = measure_k8s(&k, &opts).await;
    let down = lab::k8s::down(&k.lab.prefix);
    let rows = measured?;
    down.map_err(|e| fail("down", liqo_types::chain(&e)))?;
    with_gateway_alone(header, opts, rows).await
}

async fn measure_k8s(k: &lab::k8s::K8sLab, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    let k8s = |e: lab::k8s::K8sLabError| fail("peering with liqoctl", liqo_types::chain(&e));
    let t = Instant::now();
    k.peer("rome", "milan").map_err(k8s)?;
    k.first_cross_probe("rome", "milan", t, 60)
        .await
        .map_err(k8s)?;
    let views = lab::k8s::views::peerings(k).await.map_err(k8s)?;
    measure_paths(paths_with(&k.lab, &views)?, opts)
}

/// The report of `rows` with our gateway alone measured after them; `header` from the start.
async fn with_gateway_alone(
    header: Header,
    opts: Options,
    rows: Vec<PathRow>,
) -> Result<PathReport, BenchError> {
    let tunnel = run::tunnel(Options {
        variants: vec![Variant::Ours],
        profiles: vec![Profile::Shared],
        ..opts.clone()
    })
    .await?;
    let alone = tunnel
        .profiles
        .first()
        .and_then(|p| p.rows.first())
        .and_then(|r| r.one_stream_gbps);
    let header = Header {
        date: header.date,
        command: header.command,
        ..tunnel.header
    };
    Ok(PathReport::new(header, &opts, rows, alone))
}

impl PathReport {
    /// The report of `rows` and the gateway alone (`alone`), with the ratio and the targets.
    pub fn new(
        header: Header,
        opts: &Options,
        rows: Vec<PathRow>,
        alone: Option<Spread>,
    ) -> PathReport {
        let median = |name: &str, f: fn(&PathRow) -> Option<Spread>| {
            rows.iter()
                .find(|r| r.path.name == name)
                .and_then(f)
                .map(|s| s.median)
        };
        let cross_over_gateway = ratio(
            median("across clusters", |r| r.gbps),
            alone.map(|a| a.median),
        );
        let added_rtt = median("across clusters", |r| r.rtt_us)
            .zip(median("across nodes", |r| r.rtt_us))
            .map(|(c, n)| c - n);
        let targets = vec![
            Target::at_least(
                "one TCP stream across clusters / our gateway alone (medians)",
                cross_over_gateway,
                Some(TARGET_SHARE),
                "",
            ),
            Target::at_most(
                "RTT across clusters minus across nodes (medians)",
                added_rtt,
                Some(TARGET_ADDED_RTT_US),
                "µs",
            ),
        ];
        PathReport {
            header,
            repeats: opts.repeats,
            seconds: opts.seconds,
            rows,
            gateway_alone_gbps: alone,
            cross_over_gateway,
            targets,
        }
    }
}

fn measure_lab(l: &Lab, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    lab::peer(l, "rome", "milan")?;
    measure_paths(paths(l)?, opts)
}

fn measure_paths(paths: Vec<Path>, opts: &Options) -> Result<Vec<PathRow>, BenchError> {
    let mut figures: Vec<Vec<Figure>> = vec![Vec::new(); paths.len()];
    let mut errors: Vec<Vec<String>> = vec![Vec::new(); paths.len()];
    for repeat in 1..=opts.repeats {
        for (i, p) in paths.iter().enumerate() {
            match measure(p, opts.seconds) {
                Ok(f) => {
                    eprintln!(
                        "[{repeat}/{}] {:<16} {:.2} Gbit/s, ping {:.0} µs",
                        opts.repeats, p.name, f.gbps, f.rtt_us
                    );
                    figures[i].push(f);
                }
                Err(e) => {
                    let e = liqo_types::chain(&e);
                    eprintln!("[{repeat}/{}] {:<16} FAILED: {e}", opts.repeats, p.name);
                    errors[i].push(e);
                }
            }
        }
    }
    Ok(paths
        .into_iter()
        .zip(figures.into_iter().zip(errors))
        .map(|(path, (f, errors))| PathRow {
            path,
            gbps: Spread::of(f.iter().map(|x| x.gbps)),
            rtt_us: Spread::of(f.iter().map(|x| x.rtt_us)),
            errors,
        })
        .collect())
}

/// The report for people.
pub fn render(r: &PathReport) -> String {
    use crate::report_core::render::{header, spread, targets};
    let mut out = header(
        "path",
        &r.header,
        &format!("{} repeats x {} s", r.repeats, r.seconds),
        &[],
        "test",
    );
    out.push_str("\npod-to-pod, one TCP stream (median and range of the repeats); RTT = ping\n\n");
    out.push_str(&format!(
        "{:<18} {:<42} {:>22} {:>16}\n",
        "PATH", "FROM -> TO (ADDRESS)", "GBIT/S", "RTT µs"
    ));
    for row in &r.rows {
        let p = &row.path;
        out.push_str(&format!(
            "{:<18} {:<42} {:>22} {:>16}\n",
            p.name,
            format!("{} -> {} ({})", p.from, p.to, p.addr),
            spread(row.gbps, 2),
            spread(row.rtt_us, 0)
        ));
        for e in &row.errors {
            out.push_str(&format!("  FAILED: {e}\n"));
        }
    }
    out.push_str(&format!(
        "{:<18} {:<42} {:>22}\n",
        "gateway alone",
        "liqo-bench tunnel, ours, unpinned",
        spread(r.gateway_alone_gbps, 2)
    ));
    if let Some(x) = r.cross_over_gateway {
        out.push_str(&format!(
            "\nacross clusters = {:.0}% of the gateway alone\n",
            x * 100.0
        ));
    }
    out.push('\n');
    out.push_str(&targets("targets:", &r.targets));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, gbps: f64, rtt_us: f64) -> PathRow {
        PathRow {
            path: serde_json::from_value(serde_json::json!({
                "name": name, "from": "rome/n1-p0", "to": "milan/n1-p0", "addr": "10.71.1.2"
            }))
            .unwrap(),
            gbps: Spread::of([gbps]),
            rtt_us: Spread::of([rtt_us]),
            errors: vec![],
        }
    }

    #[test]
    fn the_share_of_the_gateway_alone_and_the_added_rtt_are_targets() {
        let opts = Options {
            prefix: "lq".parse().unwrap(),
            repeats: 5,
            seconds: 5,
            variants: vec![Variant::Ours],
            profiles: vec![Profile::Shared],
            skip_install: false,
            quick: false,
            cache: crate::DEFAULT_CACHE.into(),
        };
        let rows = vec![
            row("within a node", 20.0, 10.0),
            row("across nodes", 8.0, 20.0),
            row("across clusters", 2.0, 150.0),
        ];
        let r = PathReport::new(
            crate::report_core::tests::header(),
            &opts,
            rows,
            Spread::of([3.0]),
        );
        assert!((r.cross_over_gateway.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        let met: Vec<Option<bool>> = r.targets.iter().map(|t| t.met).collect();
        assert_eq!(met, [Some(true), Some(false)], "{:?}", r.targets);
        assert_eq!(r.targets[1].value, Some(130.0));
        let text = render(&r);
        for want in [
            "liqo-bench path: 2026-11-21 18:04 UTC",
            "across clusters = 67% of the gateway alone\n",
            "PASS  one TCP stream across clusters / our gateway alone (medians): 0.667 (target >= 0.500)\n",
            "FAIL  RTT across clusters minus across nodes (medians): 130.00 µs (target <= 100.00 µs)\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        let none = PathReport::new(crate::report_core::tests::header(), &opts, vec![], None);
        assert!(none.targets.iter().all(|t| t.met.is_none() && !t.holds()));
    }
}
