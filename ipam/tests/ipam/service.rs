//! The `liqo-ipam` service over gRPC, driven through its own CLI, on loopback: start, remap,
//! kill -9, restart, list gives the same state; bad input is refused naming the value.

use crate::common;

use common::{Server, free_port, http_get};

#[test]
fn state_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let port = free_port();
    let s = Server::start(&state, port, &["--reserved-subnets", "10.201.0.0/16"]);
    for peer in ["milan", "turin", "paris"] {
        s.ok(&[
            "remap",
            "--peer",
            peer,
            "--pod-cidr",
            "10.200.0.0/16",
            "--external-cidr",
            "10.70.0.0/16",
        ]);
    }
    s.ok(&[
        "set-peer-view",
        "--peer",
        "milan",
        "--pod-view",
        "10.50.0.0/16",
        "--external-view",
        "10.51.0.0/16",
    ]);
    assert_eq!(
        s.ok(&[
            "map-ip",
            "--peer",
            "milan",
            "--ip",
            "172.18.0.2",
            "--direction",
            "endpoint"
        ])
        .trim(),
        "10.51.0.1 (external 10.70.0.1)"
    );
    let before = s.ok(&["list", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&before).unwrap();
    let mut ranges: Vec<String> = v["peers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            [
                p["podView"].as_str().unwrap().to_owned(),
                p["externalView"].as_str().unwrap().to_owned(),
            ]
        })
        .collect();
    ranges.sort();
    ranges.dedup();
    assert_eq!(ranges.len(), 6, "six distinct ranges: {ranges:?}");
    assert!(
        !ranges.contains(&"10.201.0.0/16".to_owned()),
        "none in the reserved subnet"
    );
    let metrics = http_get(s.metrics);
    assert!(metrics.contains("liqo_ipam_peers 3"), "{metrics}");

    s.kill9();
    let s = Server::start(&state, port, &[]);
    assert_eq!(
        s.ok(&["list", "-o", "json"]),
        before,
        "a restart after kill -9 restores every allocation"
    );
    // Idempotent remap after the restart gives the same ranges.
    let again = s.ok(&[
        "remap",
        "--peer",
        "turin",
        "--pod-cidr",
        "10.200.0.0/16",
        "--external-cidr",
        "10.70.0.0/16",
    ]);
    let turin = v["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["clusterId"] == "turin")
        .unwrap();
    assert!(
        again.contains(&format!("-> {} here", turin["podView"].as_str().unwrap())),
        "{again}"
    );
}

#[test]
fn bad_requests_are_refused_naming_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let s = Server::start(&state, free_port(), &[]);
    s.ok(&["remap", "--peer", "milan", "--pod-cidr", "10.200.0.0/16"]);
    let before = s.ok(&["list", "-o", "json"]);
    for (args, want) in [
        (
            vec!["remap", "--peer", "x", "--pod-cidr", "10.200.0.1/16"],
            "10.200.0.1/16 has host bits set",
        ),
        (
            vec!["remap", "--peer", "x", "--pod-cidr", "nonsense"],
            "\"nonsense\" is not an IPv4 CIDR",
        ),
        (
            vec!["remap", "--peer", "Bad_Id", "--pod-cidr", "10.1.0.0/16"],
            "invalid cluster ID \"Bad_Id\"",
        ),
        (vec!["release", "--peer", "nobody"], "unknown peer nobody"),
        (
            vec!["map-ip", "--peer", "milan", "--ip", "192.168.9.9"],
            "192.168.9.9 is outside peer milan",
        ),
        (
            vec!["reserved", "add", "10.70.0.0/16"],
            "overlaps the local external CIDR 10.70.0.0/16",
        ),
    ] {
        let out = s.cli(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        s.ok(&["list", "-o", "json"]),
        before,
        "refused requests changed nothing"
    );
}

#[test]
fn a_bad_configmap_store_is_refused_at_start_naming_the_flag_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = dir.path().join("ipam.yaml");
    std::fs::write(&config, "store: configmap\nstateConfigmap: From_File\n").unwrap();
    let config = config.to_str().unwrap();
    let missing = dir.path().join("no-kubeconfig");
    for (args, want) in [
        (
            vec!["--store", "configmap", "--state-configmap", "Bad_Name"],
            "invalid value 'Bad_Name' for '--state-configmap <STATE_CONFIGMAP>': not a valid ConfigMap name: contains 'B'",
        ),
        (
            vec!["--store", "configmap", "--namespace", "liqo.system"],
            "invalid value 'liqo.system' for '--namespace <NAMESPACE>': not a valid namespace: contains '.'",
        ),
        (
            vec!["--config", config],
            "invalid settings: stateConfigmap: --state-configmap \"From_File\": not a valid ConfigMap name",
        ),
        (
            vec!["--store", "s3"],
            "invalid value 's3' for '--store <STORE>'",
        ),
        (
            vec!["--store", "configmap"],
            "starting the ConfigMap store: making the Kubernetes client (in-cluster config or KUBECONFIG)",
        ),
    ] {
        let spec = common::serve_spec(&state, &args)
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST");
        let (status, out) = common::run_to_exit(spec);
        assert!(!status.success() && out.contains(want), "{args:?}: {out}");
    }
    assert!(!state.exists(), "no state written");
}
