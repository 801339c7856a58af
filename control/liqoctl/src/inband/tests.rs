use k8s_openapi::api::{
    core::v1::{ServicePort, ServiceSpec},
    discovery::v1::{Endpoint, EndpointConditions, EndpointPort},
};
use kube::api::ObjectMeta;

use super::*;
use crate::peer::{Reach, foreign_cluster_apply};
use control::{
    api::discovery::{ClusterIdentity, ForeignCluster},
    consts::labels,
};

const ROME: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
const MILAN: &str = "46b4df88-5b7b-4ef2-9d34-31fe7ed5ae6c";

fn svc(cluster_ip: &str, ports: &[(Option<&str>, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("liqo-auth".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some(cluster_ip.into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| ServicePort {
                        name: n.map(str::to_owned),
                        port: *p,
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn slice(kind: &str, eps: &[(&str, Option<bool>)], port: (Option<&str>, i32)) -> EndpointSlice {
    EndpointSlice {
        address_type: kind.into(),
        endpoints: eps
            .iter()
            .map(|(a, ready)| Endpoint {
                addresses: vec![(*a).into()],
                conditions: Some(EndpointConditions {
                    ready: *ready,
                    ..EndpointConditions::default()
                }),
                ..Endpoint::default()
            })
            .collect(),
        metadata: ObjectMeta::default(),
        ports: Some(vec![EndpointPort {
            name: port.0.map(str::to_owned),
            port: Some(port.1),
            ..EndpointPort::default()
        }]),
    }
}

#[test]
fn a_cluster_ip_service_gives_its_ip_and_named_or_single_port() {
    let a = service_address(
        &svc(
            "10.96.0.10",
            &[(Some("metrics"), 8080), (Some("https"), 443)],
        ),
        &[],
        AUTH_PORT_NAME,
    )
    .unwrap();
    assert_eq!(
        a,
        Address {
            ip: "10.96.0.10".parse().unwrap(),
            port: 443
        }
    );
    let a = service_address(&svc("10.96.0.11", &[(None, 8118)]), &[], PROXY_PORT_NAME).unwrap();
    assert_eq!(a.port, 8118);
    let e = service_address(
        &svc("10.96.0.10", &[(Some("a"), 1), (Some("b"), 2)]),
        &[],
        AUTH_PORT_NAME,
    )
    .unwrap_err();
    assert!(e.to_string().contains("no port named \"https\""), "{e}");
    let e = service_address(&svc("fd00::1", &[(None, 1)]), &[], AUTH_PORT_NAME).unwrap_err();
    assert!(e.to_string().contains("fd00::1"), "{e}");
}

#[test]
fn a_headless_service_gives_its_first_ready_ipv4_endpoint() {
    let slices = [
        slice("IPv6", &[("fd00::5", Some(true))], (Some("https"), 9443)),
        slice(
            "IPv4",
            &[("10.1.0.9", Some(false)), ("10.1.0.7", None)],
            (Some("https"), 9443),
        ),
    ];
    let a = service_address(
        &svc("None", &[(Some("https"), 443)]),
        &slices,
        AUTH_PORT_NAME,
    )
    .unwrap();
    assert_eq!(
        a,
        Address {
            ip: "10.1.0.7".parse().unwrap(),
            port: 9443
        }
    );
    let e = service_address(&svc("None", &[]), &slices[..1], AUTH_PORT_NAME).unwrap_err();
    assert_eq!(
        e,
        AddressError::NoEndpoint {
            service: "liqo-auth".into(),
            port: "https"
        }
    );
}

#[test]
fn urls() {
    let a = |ip: &str, port| Address {
        ip: ip.parse().unwrap(),
        port,
    };
    assert_eq!(auth_url(a("10.70.0.3", 443)), "https://10.70.0.3");
    assert_eq!(auth_url(a("10.70.0.3", 9443)), "https://10.70.0.3:9443");
    assert_eq!(proxy_url(a("10.70.0.4", 8118)), "http://10.70.0.4:8118");
    // What the ForeignCluster's schema and the out-of-band flag accept.
    auth_url(a("10.70.0.3", 9443))
        .parse::<crate::cli::AuthUrl>()
        .unwrap();
}

fn milan() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: MILAN.parse().unwrap(),
        cluster_name: "milan".parse().unwrap(),
    }
}

#[test]
fn the_foreign_cluster_is_in_band_with_networking_and_keeps_incoming() {
    let b = foreign_cluster_apply(
        "milan",
        &milan(),
        Reach {
            auth_url: "https://10.70.0.3",
            proxy_url: Some("http://10.70.0.4:8118"),
        },
        PeeringEnabled::No,
        None,
    );
    assert_eq!(b["metadata"]["labels"][labels::CLUSTER_ID], MILAN);
    let s = &b["spec"];
    assert_eq!(s["clusterIdentity"]["clusterID"], MILAN);
    assert_eq!(s["foreignAuthUrl"], "https://10.70.0.3");
    assert_eq!(s["foreignProxyUrl"], "http://10.70.0.4:8118");
    assert_eq!(s["networkingEnabled"], "Yes");
    assert_eq!(s["outgoingPeeringEnabled"], "No");
    assert_eq!(s["incomingPeeringEnabled"], "Auto");
    assert_eq!(s["insecureSkipTLSVerify"], true);
    // It parses as a ForeignCluster.
    let fc: ForeignCluster = serde_json::from_value(b.clone()).unwrap();
    assert_eq!(
        fc.spec.foreign_proxy_url.as_deref(),
        Some("http://10.70.0.4:8118")
    );
    let existing = ForeignClusterSpec {
        incoming_peering_enabled: PeeringEnabled::No,
        insecure_skip_tls_verify: false,
        ..fc.spec
    };
    let b = foreign_cluster_apply(
        "m",
        &milan(),
        Reach {
            auth_url: "https://x",
            proxy_url: Some("http://y:1"),
        },
        PeeringEnabled::Yes,
        Some(&existing),
    );
    assert_eq!(b["spec"]["incomingPeeringEnabled"], "No");
    assert_eq!(b["spec"]["insecureSkipTLSVerify"], false);
    assert_eq!(b["spec"]["outgoingPeeringEnabled"], "Yes");
}

#[test]
fn outgoing_is_yes_when_asked_else_kept_else_no() {
    assert_eq!(outgoing(true, None), PeeringEnabled::Yes);
    assert_eq!(outgoing(false, None), PeeringEnabled::No);
    let fc: ForeignCluster = serde_json::from_value(foreign_cluster_apply(
        "m",
        &milan(),
        Reach {
            auth_url: "https://x",
            proxy_url: Some("http://y:1"),
        },
        PeeringEnabled::Yes,
        None,
    ))
    .unwrap();
    // A rerun without --bidirectional keeps a reverse peering.
    assert_eq!(outgoing(false, Some(&fc.spec)), PeeringEnabled::Yes);
}

#[test]
fn the_network_config_copy_looks_replicated() {
    let source = json!({
        "apiVersion": "net.liqo.io/v1alpha1",
        "kind": "NetworkConfig",
        "metadata": {
            "name": "milan-46b4df",
            "namespace": "liqo-tenant-milan-46b4df",
            "uid": "u1",
            "resourceVersion": "7",
            "finalizers": ["crdReplicator.liqo.io"],
            "labels": {
                labels::REPLICATION: "true",
                labels::REMOTE_ID: MILAN,
                labels::OWNERSHIP: "x",
            },
            "annotations": {"a": "b"},
        },
        "spec": {"podCIDR": "10.244.0.0/16"},
        "status": {"processed": true},
    });
    let c = network_config_copy(&source, ROME, "liqo-tenant-rome-b07938");
    assert_eq!(
        c,
        json!({
            "apiVersion": "net.liqo.io/v1alpha1",
            "kind": "NetworkConfig",
            "metadata": {
                "name": "milan-46b4df",
                "namespace": "liqo-tenant-rome-b07938",
                "labels": {
                    labels::REPLICATION: "false",
                    labels::REPLICATED: "true",
                    labels::ORIGIN_ID: ROME,
                    labels::REMOTE_ID: MILAN,
                },
                "annotations": {"a": "b"},
            },
            "spec": {"podCIDR": "10.244.0.0/16"},
        })
    );
}

#[test]
fn processed_reads_the_flag() {
    assert!(processed(Some(&json!({"processed": true}))));
    assert!(!processed(Some(&json!({"processed": false}))));
    assert!(!processed(Some(&json!({}))));
    assert!(!processed(None));
}
