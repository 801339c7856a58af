use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::*;

const ROME: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
const TURIN: &str = "4858caa2-7848-4aab-a6b4-6984389bac56";

fn res(pairs: &[(&str, &str)]) -> Resources {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Amount::parse(v).unwrap()))
        .collect()
}

fn node(name: &str, cpu: &str, memory: &str) -> NodeInput {
    NodeInput {
        name: name.into(),
        allocatable: res(&[("cpu", cpu), ("memory", memory), ("pods", "110")]),
        is_virtual: false,
        ready: true,
    }
}

fn pod(node: &str, phase: &str, cpu: &str, memory: &str, labels: &[(&str, &str)]) -> PodInput {
    PodInput {
        node: Some(node.into()),
        phase: Some(phase.into()),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        requests: res(&[("cpu", cpu), ("memory", memory)]),
    }
}

fn rome() -> ClusterId {
    ROME.parse().unwrap()
}

fn pct(p: u8) -> Percent {
    Percent::new(p).unwrap()
}

fn q(s: &str) -> Quantity {
    Quantity(s.into())
}

/// A provider with the usual mix: what counts and what does not.
fn provider() -> (Vec<NodeInput>, Vec<PodInput>) {
    let nodes = vec![
        node("n0", "32", "256Gi"),
        node("n1", "32", "256Gi"),
        NodeInput {
            ready: false,
            ..node("n2-notready", "32", "256Gi")
        },
        NodeInput {
            is_virtual: true,
            ..node("liqo-naples", "1000", "4Ti")
        },
    ];
    let pods = vec![
        // Counted: running on real ready nodes.
        pod("n0", "Running", "2", "4Gi", &[]),
        pod(
            "n1",
            "Running",
            "500m",
            "512Mi",
            &[(labels::OFFLOADED_ORIGIN, TURIN)],
        ),
        // Rome's own offloaded pod: its usage is given back to it.
        pod(
            "n1",
            "Running",
            "1",
            "1Gi",
            &[(labels::OFFLOADED_ORIGIN, ROME)],
        ),
        // Not counted: not running, shadow, on a virtual or not-ready node, unscheduled.
        pod("n0", "Pending", "8", "8Gi", &[]),
        pod("n0", "Succeeded", "8", "8Gi", &[]),
        pod("n0", "Running", "8", "8Gi", &[(labels::SHADOW_POD, "true")]),
        pod("liqo-naples", "Running", "8", "8Gi", &[]),
        pod("n2-notready", "Running", "8", "8Gi", &[]),
        PodInput {
            node: None,
            ..pod("", "Running", "8", "8Gi", &[])
        },
    ];
    (nodes, pods)
}

#[test]
fn available_counts_what_it_should() {
    let (nodes, pods) = provider();
    let a = available(&nodes, &pods, &rome());
    // 64 cpu - 2 - 0.5 (turin's pod is usage for rome); rome's own pod is not subtracted.
    assert_eq!(a["cpu"], Amount::parse("61.5").unwrap());
    assert_eq!(
        a["memory"],
        Amount::parse("512Gi")
            .unwrap()
            .minus(Amount::parse("4608Mi").unwrap())
    );
    assert_eq!(a["pods"], Amount::parse("220").unwrap());
    // For turin the picture flips: rome's pod is usage, turin's is not.
    let t = available(&nodes, &pods, &TURIN.parse().unwrap());
    assert_eq!(t["cpu"], Amount::parse("61").unwrap());
}

#[test]
fn offer_scales_as_upstream() {
    let (nodes, pods) = provider();
    let offer = offer(&nodes, &pods, &rome(), pct(90));
    insta::assert_json_snapshot!(offer);
    // cpu 61500m × 90% = 55350m; memory 519680Mi = 544923.98 MB, rounded up to 544924,
    // × 90% = 490431 MB; pods 220 × 90% = 198.
    assert_eq!(offer["cpu"], q("55350m"));
    assert_eq!(offer["memory"], q("490431M"));
    assert_eq!(offer["pods"], q("198"));
}

#[test]
fn scale_units_and_rounding() {
    let r = res(&[
        ("cpu", "1500m"),
        ("memory", "1Gi"),
        ("pods", "110"),
        ("ephemeral-storage", "100Gi"),
        ("hugepages-2Mi", "0"),
        ("nvidia.com/gpu", "1"),
    ]);
    let s = scale(&r, pct(30));
    assert_eq!(s["cpu"], q("450m"));
    // 1Gi = 1073.741824 MB, rounded up to 1074 before scaling: 322.2 → 322.
    assert_eq!(s["memory"], q("322M"));
    assert_eq!(s["pods"], q("33"));
    assert_eq!(s["ephemeral-storage"], q("32212254720"));
    assert_eq!(s["hugepages-2Mi"], q("0"));
    // One GPU at 30 % is no GPU.
    assert_eq!(s["nvidia.com/gpu"], q("0"));
    let all = scale(&r, pct(100));
    assert_eq!(all["cpu"], q("1500m"));
    assert_eq!(all["memory"], q("1074M"));
    assert_eq!(scale(&r, pct(0))["cpu"], q("0"));
    assert_eq!(scale(&res(&[("cpu", "4")]), pct(50))["cpu"], q("2"));
}

#[test]
fn overcommitted_resources_offer_zero() {
    let nodes = vec![node("n0", "2", "1Gi")];
    let pods = vec![pod("n0", "Running", "3", "512Mi", &[])];
    let offer = offer(&nodes, &pods, &rome(), pct(100));
    assert_eq!(offer["cpu"], q("0"));
    assert_eq!(offer["memory"], q("537M"));
}

#[test]
fn requests_for_undeclared_resources_are_not_offered() {
    let nodes = vec![node("n0", "2", "1Gi")];
    let mut p = pod("n0", "Running", "1", "1Mi", &[]);
    p.requests
        .insert("example.com/dongle".into(), Amount::parse("1").unwrap());
    let offer = offer(&nodes, &[p], &rome(), pct(100));
    assert!(!offer.contains_key("example.com/dongle"));
    assert_eq!(offer["cpu"], q("1"));
}

#[test]
fn another_node_raises_the_offer() {
    let (mut nodes, pods) = provider();
    let before = offer(&nodes, &pods, &rome(), pct(30));
    nodes.push(node("n3", "32", "256Gi"));
    let after = offer(&nodes, &pods, &rome(), pct(30));
    let cpu = |o: &BTreeMap<String, Quantity>| Amount::from_quantity(&o["cpu"]).unwrap();
    assert_eq!(
        cpu(&after).minus(cpu(&before)),
        Amount::parse("9600m").unwrap()
    );
    assert!(changed_beyond(&before, &after, DEFAULT_UPDATE_THRESHOLD).unwrap());
}

#[test]
fn nothing_to_offer_is_an_empty_offer() {
    assert!(offer(&[], &[], &rome(), pct(90)).is_empty());
}

#[test]
fn changes_beyond_the_threshold() {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
    };
    let old = map(&[("cpu", "10"), ("memory", "1000M"), ("pods", "0")]);
    let five = pct(5);
    let rows: &[(&[(&str, &str)], bool)] = &[
        (&[("cpu", "10"), ("memory", "1000M"), ("pods", "0")], false),
        // Written differently, same amount.
        (&[("cpu", "10000m"), ("memory", "1G"), ("pods", "0")], false),
        (
            &[("cpu", "10500m"), ("memory", "1000M"), ("pods", "0")],
            false,
        ), // exactly 5 %
        (
            &[("cpu", "10501m"), ("memory", "1000M"), ("pods", "0")],
            true,
        ),
        (
            &[("cpu", "9499m"), ("memory", "1000M"), ("pods", "0")],
            true,
        ),
        (&[("cpu", "10"), ("memory", "951M"), ("pods", "0")], false),
        (&[("cpu", "10"), ("memory", "949M"), ("pods", "0")], true),
        (&[("cpu", "10"), ("memory", "1000M"), ("pods", "1")], true), // from 0
        (&[("cpu", "10"), ("memory", "1000M")], true),                // gone
        (
            &[
                ("cpu", "10"),
                ("memory", "1000M"),
                ("pods", "0"),
                ("gpu", "1"),
            ],
            true,
        ),
    ];
    for (new, want) in rows {
        assert_eq!(
            changed_beyond(&old, &map(new), five).unwrap(),
            *want,
            "{new:?}"
        );
    }
    // Threshold 0: any move.
    assert!(
        changed_beyond(
            &old,
            &map(&[("cpu", "10001m"), ("memory", "1000M"), ("pods", "0")]),
            pct(0)
        )
        .unwrap()
    );
    let err = changed_beyond(
        &old,
        &map(&[("cpu", "ten"), ("memory", "1"), ("pods", "0")]),
        five,
    )
    .unwrap_err();
    assert_eq!(err.quantity, "ten");
}

#[test]
fn percent_parses_0_to_100() {
    assert_eq!("90".parse::<Percent>().unwrap().get(), 90);
    assert_eq!("0".parse::<Percent>().unwrap(), pct(0));
    assert_eq!("100".parse::<Percent>().unwrap().to_string(), "100");
    for bad in ["101", "-1", "", "50%", "ninety", "300"] {
        let err = bad.parse::<Percent>().unwrap_err();
        assert_eq!(err, InvalidPercent(bad.into()));
    }
    assert_eq!(
        InvalidPercent("101".into()).to_string(),
        "bad percentage \"101\": a whole number from 0 to 100"
    );
    assert!(Percent::new(101).is_none());
}

#[test]
fn inputs_from_objects_feed_the_offer() {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": "kwok-0", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }))
    .unwrap();
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "kwok-0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    let nodes = [NodeInput::from_node(&n).unwrap()];
    let pods = [PodInput::from_pod(&p).unwrap()];
    let offer = offer(&nodes, &pods, &rome(), pct(30));
    assert_eq!(offer["cpu"], q("9300m"));
    assert_eq!(offer["pods"], q("33"));
}
