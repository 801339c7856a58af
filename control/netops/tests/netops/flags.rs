//! Bad flags and bad base configs are refused before anything runs, naming the bad value.

use std::process::Command;

const GW: &str = env!("CARGO_BIN_EXE_liqo-gateway-operator");
const RT: &str = env!("CARGO_BIN_EXE_liqo-route-operator");

fn run(program: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(program)
        .args(args)
        // No cluster: a flag error must come before any API call.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_data_plane_flags_go_together_and_not_with_fake_dataplane() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.yaml");
    std::fs::write(&base, "localPodCIDR: 10.244.0.0/16\n").unwrap();
    let base = base.to_str().unwrap();
    let (code, err) = run(GW, &["--node-name", "n0", "--base-config", base]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--config") && err.contains("--gateway-status-url"),
        "{err}"
    );
    let (code, err) = run(
        GW,
        &[
            "--node-name",
            "n0",
            "--base-config",
            base,
            "--fake-dataplane",
            "--config",
            "x",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, err) = run(
        GW,
        &[
            "--node-name",
            "n0",
            "--base-config",
            base,
            "--config",
            "c.yaml",
            "--gateway-status-url",
            "https://127.0.0.1:1/status",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("https://127.0.0.1:1/status"), "{err}");
    let (code, err) = run(
        RT,
        &["--node-name", "n0", "--base-config", base, "--config", "c"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--overlay-status-url"), "{err}");
}

#[test]
fn a_base_config_with_peers_or_nodes_or_a_bad_field_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let bad = write("gw-bad.yaml", "localPodCIDR: 10.244.0.1/16\n");
    let (code, err) = run(
        GW,
        &[
            "--node-name",
            "n0",
            "--base-config",
            &bad,
            "--fake-dataplane",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("gw-bad.yaml") && err.contains("localPodCIDR"),
        "{err}"
    );
    let peers = write(
        "gw-peers.yaml",
        "localPodCIDR: 10.244.0.0/16\npeers:\n  - {id: milan, publicKey: AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=, remotePodCIDR: 10.71.0.0/16, localPodCIDRAtPeer: 10.50.0.0/16}\n",
    );
    let (code, err) = run(
        GW,
        &[
            "--node-name",
            "n0",
            "--base-config",
            &peers,
            "--fake-dataplane",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("lists peers"), "{err}");
    let missing = dir.path().join("none.yaml");
    let (code, err) = run(
        GW,
        &[
            "--node-name",
            "n0",
            "--base-config",
            missing.to_str().unwrap(),
            "--fake-dataplane",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("none.yaml"), "{err}");
    let nodes = write(
        "ov.yaml",
        "nodes:\n  - {name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}\n",
    );
    let (code, err) = run(
        RT,
        &[
            "--node-name",
            "n0",
            "--base-config",
            &nodes,
            "--fake-dataplane",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("nodes and remoteCIDRs come from the cluster"),
        "{err}"
    );
}

#[test]
fn a_bad_ipam_flag_is_refused_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.yaml");
    std::fs::write(&base, "localPodCIDR: 10.244.0.0/16\n").unwrap();
    let base = base.to_str().unwrap();
    let gw = |extra: &[&str]| {
        let mut a = vec![
            "--node-name",
            "n0",
            "--base-config",
            base,
            "--fake-dataplane",
        ];
        a.extend(extra);
        run(GW, &a)
    };
    // Not a URL the IPAM client takes: refused by clap, naming the flag and the value.
    let (code, err) = gw(&["--ipam-address", "liqo-ipam:6000"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--ipam-address") && err.contains("liqo-ipam:6000"),
        "{err}"
    );
    // A CA with a clear-text address, a token sent in clear text to another host, a CA file
    // that cannot be read: refused at start, naming the address, before any API call.
    let (code, err) = gw(&[
        "--ipam-address",
        "http://liqo-ipam:6000",
        "--ipam-ca-file",
        "/nonexistent/ca.pem",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--ipam-address http://liqo-ipam:6000"),
        "{err}"
    );
    assert!(err.contains("https"), "{err}");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let (code, err) = gw(&[
        "--ipam-address",
        "http://liqo-ipam:6000",
        "--ipam-token-file",
        token.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--ipam-address http://liqo-ipam:6000"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "the token is never printed: {err}");
    let (code, err) = gw(&[
        "--ipam-address",
        "https://liqo-ipam:6000",
        "--ipam-ca-file",
        "/nonexistent/ca.pem",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    // The file flags need the address.
    let (code, err) = gw(&["--ipam-token-file", token.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--ipam-address"), "{err}");
    // A good address passes the flags (and fails later, at the cluster).
    let (code, err) = gw(&["--ipam-address", "http://127.0.0.1:6000"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("kube config"), "{err}");
}
