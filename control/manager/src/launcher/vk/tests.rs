use std::path::{Path, PathBuf};

use super::{child::write_private, job::port, *};

fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

fn settings(ipam: bool, ca: bool) -> Settings {
    Settings {
        mode: Mode::InProcess,
        node_ip: "127.0.0.1".parse().unwrap(),
        port: 0,
        client_ca: ca.then(|| PathBuf::from("/etc/ca.crt")),
        ipam: ipam.then(|| {
            let mut o = ipam::service::client::ClientOptions::new("https://ipam:6000");
            o.token_file = Some("/run/token".into());
            o
        }),
        liqo_network: ipam,
        pod_workers: 10,
        worker_threads: None,
        apiserver_support: true,
        home_api: None,
        reflection: Default::default(),
    }
}

const ROME: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
const MILAN: &str = "8f1b7a2e-5c3d-4e6f-9a0b-1c2d3e4f5a6b";

#[test]
fn the_child_gets_both_identities_its_offer_and_only_the_options_set() {
    let peer = Peer {
        cluster_id: MILAN.parse().unwrap(),
        namespace: "liqo-tenant-milan".into(),
        offer: "milan".into(),
    };
    let home = identity(ROME, "rome");
    let foreign = identity(MILAN, "milan");
    let a = child_args(
        &home,
        &foreign,
        &peer,
        &settings(false, false),
        Path::new("/state/m/foreign.kubeconfig"),
        10251,
    );
    // Pairs, then API server support (a switch).
    assert_eq!(a.len(), 35, "{a:?}");
    assert_eq!(a[34], "--enable-apiserver-support");
    let pairs: Vec<(&str, &str)> = a[..34]
        .chunks(2)
        .map(|c| (c[0].as_str(), c[1].as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("--foreign-cluster-id", MILAN),
            ("--foreign-cluster-name", "milan"),
            ("--home-cluster-id", ROME),
            ("--home-cluster-name", "rome"),
            ("--tenant-namespace", "liqo-tenant-milan"),
            ("--resource-offer", "milan"),
            ("--foreign-kubeconfig", "/state/m/foreign.kubeconfig"),
            ("--node-ip", "127.0.0.1"),
            ("--listen-port", "10251"),
            ("--pod-reflection-workers", "10"),
            ("--service-reflection-workers", "3"),
            ("--endpointslice-reflection-workers", "10"),
            ("--ingress-reflection-workers", "3"),
            ("--configmap-reflection-workers", "3"),
            ("--secret-reflection-workers", "3"),
            ("--serviceaccount-reflection-workers", "3"),
            ("--persistentvolumeclaim-reflection-workers", "3"),
        ]
    );
    let a = child_args(
        &home,
        &foreign,
        &peer,
        &settings(true, true),
        Path::new("/k"),
        1,
    );
    let tail = a[35..].join(" ");
    assert_eq!(
        tail,
        "--client-ca-file /etc/ca.crt --ipam-server https://ipam:6000 --ipam-token-file /run/token"
    );
}

/// The child's command line for milan with settings `s`.
fn milan_child(s: &Settings) -> String {
    let peer = Peer {
        cluster_id: MILAN.parse().unwrap(),
        namespace: "liqo-tenant-milan".into(),
        offer: "milan".into(),
    };
    child_args(
        &identity(ROME, "rome"),
        &identity(MILAN, "milan"),
        &peer,
        s,
        Path::new("/k"),
        1,
    )
    .join(" ")
}

#[test]
fn an_ipam_without_liqos_network_is_said_so() {
    let mut s = settings(true, false);
    s.liqo_network = false;
    let a = milan_child(&s);
    assert!(
        a.contains("--liqo-network false --ipam-server https://ipam:6000"),
        "{a}"
    );
}

#[test]
fn worker_threads_go_to_the_child_only_when_given() {
    let mut s = settings(false, false);
    assert!(!milan_child(&s).contains("--worker-threads"));
    s.worker_threads = std::num::NonZeroUsize::new(2);
    let a = milan_child(&s);
    assert!(a.contains("--worker-threads 2"), "{a}");
}

#[test]
fn a_given_home_api_server_goes_to_the_child() {
    let mut s = settings(false, false);
    s.home_api = Some("10.70.0.1:6443".parse().unwrap());
    let a = milan_child(&s);
    assert!(
        a.contains("--enable-apiserver-support --home-api-server 10.70.0.1:6443"),
        "{a}"
    );
}

#[test]
fn a_free_port_is_picked_when_none_is_set_and_the_set_one_is_kept() {
    let mut s = settings(false, false);
    let p = port(&s, None).unwrap();
    assert_ne!(p, 0);
    s.port = 10250;
    assert_eq!(port(&s, Some(p)).unwrap(), 10250);
}

#[test]
fn a_restart_keeps_its_port_while_it_is_free_and_moves_when_taken() {
    let s = settings(false, false);
    let free = port(&s, None).unwrap();
    assert_eq!(port(&s, Some(free)).unwrap(), free);
    // Taken by someone else: another free port, not a failure.
    let taken = std::net::TcpListener::bind((s.node_ip, 0)).unwrap();
    let busy = taken.local_addr().unwrap().port();
    let other = port(&s, Some(busy)).unwrap();
    assert_ne!(other, busy);
    assert_ne!(other, 0);
    assert_ne!(port(&s, Some(0)).unwrap(), 0);
}

#[test]
fn the_provider_kubeconfig_is_written_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("peer");
    let file = sub.join("foreign.kubeconfig");
    write_private(&sub, &file, &serde_json::json!({"a": 1})).unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), r#"{"a":1}"#);
}
