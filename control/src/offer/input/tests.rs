use serde_json::{Value, json};

use super::*;

fn spec(value: Value) -> PodSpec {
    serde_json::from_value(value).unwrap()
}

fn container(name: &str, cpu: &str, memory: &str) -> Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}})
}

fn get(r: &Resources, name: &str) -> String {
    r[name].to_string()
}

#[test]
fn app_containers_add_up() {
    let r = pod_requests(&spec(json!({"containers": [
        container("a", "250m", "64Mi"),
        container("b", "750m", "64Mi"),
        {"name": "no-requests"},
    ]})))
    .unwrap();
    assert_eq!(get(&r, "cpu"), "1");
    assert_eq!(r["memory"], Amount::parse("128Mi").unwrap());
}

#[test]
fn init_containers_count_at_their_peak() {
    let r = pod_requests(&spec(json!({
        "initContainers": [container("init", "2", "16Mi")],
        "containers": [container("a", "500m", "256Mi")],
    })))
    .unwrap();
    assert_eq!(get(&r, "cpu"), "2");
    assert_eq!(r["memory"], Amount::parse("256Mi").unwrap());
}

#[test]
fn sidecars_run_alongside_both() {
    // A sidecar (restartPolicy Always) of 100m, then an init container of 1: the init phase
    // peaks at 1.1, the app phase at 0.5 + 0.1.
    let mut sidecar = container("proxy", "100m", "32Mi");
    sidecar["restartPolicy"] = json!("Always");
    let r = pod_requests(&spec(json!({
        "initContainers": [sidecar, container("migrate", "1", "32Mi")],
        "containers": [container("a", "500m", "512Mi")],
    })))
    .unwrap();
    assert_eq!(get(&r, "cpu"), "1100m");
    assert_eq!(r["memory"], Amount::parse("544Mi").unwrap());
}

#[test]
fn pod_level_requests_and_overhead() {
    let r = pod_requests(&spec(json!({
        "resources": {"requests": {"cpu": "4"}},
        "overhead": {"cpu": "250m", "memory": "120Mi"},
        "containers": [container("a", "1", "1Gi")],
    })))
    .unwrap();
    assert_eq!(get(&r, "cpu"), "4250m");
    assert_eq!(r["memory"], Amount::parse("1144Mi").unwrap());
}

#[test]
fn a_bad_quantity_names_its_field_and_object() {
    let err = pod_requests(&spec(json!({"containers": [
        container("a", "1", "1Gi"),
        container("b", "1x", "1Gi"),
    ]})))
    .unwrap_err();
    assert_eq!(err.field, "spec.containers[1].resources.requests.cpu");
    assert_eq!(err.source.quantity, "1x");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"overhead": {"memory": "lots"}, "containers": []},
    }))
    .unwrap();
    let err = PodInput::from_pod(&pod).unwrap_err();
    assert_eq!(err.to_string(), "pod shop/web: spec.overhead.memory");
    assert_eq!(
        liqo_types::chain(&err),
        format!("pod shop/web: spec.overhead.memory: {}", err.source)
    );
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "2", "pods": "1.2.3"}},
    }))
    .unwrap();
    let err = NodeInput::from_node(&node).unwrap_err();
    assert_eq!(err.to_string(), "node n0: status.allocatable.pods");
}

#[test]
fn nodes_are_read() {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "liqo-milan", "labels": {"liqo.io/type": "virtual-node"}},
        "status": {
            "allocatable": {"cpu": "9600m", "memory": "76800M"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
        },
    }))
    .unwrap();
    let n = NodeInput::from_node(&node).unwrap();
    assert_eq!(n.name, "liqo-milan");
    assert!(n.is_virtual && n.ready);
    assert_eq!(n.allocatable["cpu"].to_string(), "9600m");
    let bare: Node = serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap();
    let n = NodeInput::from_node(&bare).unwrap();
    assert!(!n.is_virtual && !n.ready && n.allocatable.is_empty());
    let not_ready: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"liqo.io/type": "other"}},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }))
    .unwrap();
    let n = NodeInput::from_node(&not_ready).unwrap();
    assert!(!n.is_virtual && !n.ready);
}

#[test]
fn pods_are_read() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"virtualkubelet.liqo.io/origin": "rome"}},
        "spec": {"nodeName": "n0", "containers": [container("a", "1", "1Mi")]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    let p = PodInput::from_pod(&pod).unwrap();
    assert_eq!(p.node.as_deref(), Some("n0"));
    assert_eq!(p.phase.as_deref(), Some("Running"));
    assert_eq!(p.labels[labels::OFFLOADED_ORIGIN], "rome");
    assert_eq!(p.requests["cpu"].to_string(), "1");
    let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    assert_eq!(PodInput::from_pod(&bare).unwrap(), PodInput::default());
}
