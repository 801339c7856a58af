//! What `liqo-lab quickstart --k8s --real-nodes` must print (checked by `real_nodes_root`).

use e2e::lab::Prefix;

/// What the quickstart's report must show: both clusters' nodes with their runtime, the demo's
/// pods on rome's nodes and on liqo-milan, 100 of 100 requests answered by both clusters, the
/// memory of the four nodes' kubelets and runtimes, every probe, both ForeignClusters.
pub(crate) fn check(report: &str, p: &Prefix) {
    let has = |s: &str| assert!(report.contains(s), "the report lacks {s:?}:\n{report}");
    for s in [
        "== kubectl --context rome get nodes -o wide",
        "== kubectl --context milan get nodes -o wide",
        "containerd://2.",
        "liqo-milan",
        "answered 100/100: ",
        " by milan",
        " by rome",
        "56 of 56 probes passed",
        "across clusters",
        "== kubectl --context rome get foreignclusters",
    ] {
        has(s);
    }
    let answers = report
        .lines()
        .find(|l| l.trim_start().starts_with("answered "))
        .unwrap();
    assert!(!answers.contains("failed"), "{answers}");
    // A memory row per node: kubelet and containerd measured (MiB, not "-").
    let rows: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("== Memory of the real nodes"))
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 7 && ["rome", "milan"].contains(&f[0]) && ["n0", "n1"].contains(&f[1])
        })
        .collect();
    assert_eq!(rows.len(), 4, "a memory row per node:\n{report}");
    for r in &rows {
        let f: Vec<&str> = r.split_whitespace().collect();
        for mib in &f[2..4] {
            assert!(
                mib.parse::<u32>().is_ok_and(|m| m > 0),
                "kubelet and containerd measured: {r}"
            );
        }
    }
    has(&format!("liqo-lab --prefix {p} down"));
    assert!(!report.contains("FAILED"), "{report}");
}
