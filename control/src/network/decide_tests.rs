use serde_json::json;

use super::super::endpoint::Endpoint;
use super::*;

pub(super) const ROME: &str = "rome-id";
pub(super) const MILAN: &str = "milan-id";
pub(super) const KEY_A: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
pub(super) const KEY_B: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

pub(super) fn r(pods: &str, external: &str) -> Ranges {
    Ranges {
        pods: pods.parse().unwrap(),
        external: external.parse().unwrap(),
    }
}

pub(super) fn local() -> Local {
    Local {
        ranges: r("10.244.0.0/16", "10.70.0.0/16"),
        public_key: KEY_A.parse().unwrap(),
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 51820,
        },
    }
}

pub(super) fn milan() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: MILAN.parse().unwrap(),
        cluster_name: "milan".parse().unwrap(),
    }
}

/// Milan's NetworkConfig for rome, as its copy in rome.
pub(super) fn copy_spec() -> Value {
    json!({
        "cluster": {"clusterID": ROME, "clusterName": "rome"},
        "podCIDR": "10.244.0.0/16",
        "externalCIDR": "10.70.0.0/16",
        "endpointIP": "127.0.0.2",
        "backendType": "wireguard",
        "backend_config": {"publicKey": KEY_B, "port": "51821"},
    })
}

pub(super) fn base() -> Observed {
    Observed {
        now: "2026-11-23T08:00:00Z".parse().unwrap(),
        grace: Duration::from_secs(300),
        local_id: ROME.parse().unwrap(),
        peer: milan(),
        processable: true,
        fc_deleting: false,
        networking: NetworkingEnabled::Yes,
        phase: PeeringPhase::Outgoing,
        in_band: false,
        tenant_known: true,
        has_finalizer: true,
        local: Ok(local()),
        own: None,
        copy: None,
        ipam: None,
        tunnel: None,
    }
}

pub(super) fn own(status: Option<Value>) -> Own {
    Own {
        spec: json(&own_spec(&milan(), &local())),
        deleting_since: None,
        status,
    }
}

pub(super) fn copy(status: Option<Value>) -> Copy {
    Copy {
        spec: copy_spec(),
        status,
        refused: None,
        refused_spec: None,
        deleting: false,
    }
}

/// Rome remapped milan's ranges (same as its own) to 10.71/10.72.
pub(super) fn held(seen_there: Option<Ranges>) -> IpamPeer {
    IpamPeer {
        announced: r("10.244.0.0/16", "10.70.0.0/16"),
        seen_here: r("10.71.0.0/16", "10.72.0.0/16"),
        seen_there,
    }
}

pub(super) fn processed() -> Value {
    json!({"processed": true, "podCIDRNAT": "10.71.0.0/16", "externalCIDRNAT": "10.72.0.0/16"})
}

#[test]
fn the_finalizer_comes_first_then_our_network_config() {
    let o = Observed {
        has_finalizer: false,
        ..base()
    };
    let a = decide(&o);
    assert_eq!(a[0], Action::AddFinalizer);
    let Action::ApplyOwn(spec) = &a[1] else {
        panic!("{a:?}")
    };
    assert_eq!(spec.cluster.cluster_id.as_str(), MILAN);
    assert_eq!(spec.pod_cidr.to_string(), "10.244.0.0/16");
    assert_eq!(spec.external_cidr.to_string(), "10.70.0.0/16");
    assert_eq!(spec.endpoint_ip, "127.0.0.1");
    assert_eq!(spec.backend_type, "wireguard");
    assert_eq!(spec.backend_config["publicKey"], KEY_A);
    assert_eq!(spec.backend_config["port"], "51820");
    assert_eq!(a.len(), 2);
}

#[test]
fn nothing_is_announced_without_a_key_or_endpoint() {
    let o = Observed {
        local: Err("no key yet".into()),
        ..base()
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn networking_no_or_no_direction_builds_nothing() {
    for o in [
        Observed {
            networking: NetworkingEnabled::No,
            has_finalizer: false,
            ..base()
        },
        Observed {
            phase: PeeringPhase::Authenticated,
            has_finalizer: false,
            ..base()
        },
        Observed {
            tenant_known: false,
            has_finalizer: false,
            ..base()
        },
    ] {
        assert!(decide(&o).is_empty(), "{o:?}");
    }
}

#[test]
fn an_in_band_peering_builds_the_network_before_any_direction() {
    for phase in [PeeringPhase::None, PeeringPhase::Authenticated] {
        let o = Observed {
            phase,
            in_band: true,
            has_finalizer: false,
            ..base()
        };
        let a = decide(&o);
        assert_eq!(a[0], Action::AddFinalizer, "{phase}");
        assert!(matches!(a[1], Action::ApplyOwn(_)), "{a:?}");
    }
    // Still not with networking off, nor without a tenant namespace.
    for o in [
        Observed {
            networking: NetworkingEnabled::No,
            ..base()
        },
        Observed {
            tenant_known: false,
            ..base()
        },
    ] {
        let o = Observed {
            phase: PeeringPhase::None,
            in_band: true,
            has_finalizer: false,
            ..o
        };
        assert!(decide(&o).is_empty(), "{o:?}");
    }
}

#[test]
fn a_changed_endpoint_updates_our_network_config() {
    let mut o = Observed {
        own: Some(own(None)),
        ..base()
    };
    assert!(decide(&o).is_empty());
    let mut l = local();
    l.endpoint.port = 40000;
    o.local = Ok(l);
    assert!(
        matches!(&decide(&o)[..], [Action::ApplyOwn(s)] if s.backend_config["port"] == "40000")
    );
}

#[test]
fn the_peer_config_is_remapped_then_its_status_written() {
    let o = Observed {
        own: Some(own(None)),
        copy: Some(copy(None)),
        ..base()
    };
    assert_eq!(
        decide(&o),
        [Action::Remap(r("10.244.0.0/16", "10.70.0.0/16"))]
    );
    let o = Observed {
        ipam: Some(held(None)),
        ..o
    };
    let status = NetworkConfigStatus {
        processed: true,
        pod_cidr_nat: Some("10.71.0.0/16".parse().unwrap()),
        external_cidr_nat: Some("10.72.0.0/16".parse().unwrap()),
        refused: None,
    };
    assert_eq!(decide(&o), [Action::WriteCopyStatus(status.clone())]);
    // A status still carrying an earlier refusal is rewritten without it.
    let stale = json!({"processed": false, "refused": "spec.podCIDR: x"});
    let o2 = Observed {
        copy: Some(copy(Some(stale))),
        ..o.clone()
    };
    assert_eq!(decide(&o2), [Action::WriteCopyStatus(status.clone())]);
    // Written: nothing more until ours comes back processed.
    let o = Observed {
        copy: Some(copy(Some(serde_json::to_value(&status).unwrap()))),
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn an_unremapped_range_is_written_none() {
    let s = copy_status(
        r("10.244.0.0/16", "10.70.0.0/16"),
        r("10.244.0.0/16", "10.72.0.0/16"),
    );
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        v,
        json!({"processed": true, "podCIDRNAT": "None", "externalCIDRNAT": "10.72.0.0/16"})
    );
}

#[test]
fn ours_processed_records_the_view_then_the_tunnel() {
    let status = serde_json::to_value(copy_status(
        r("10.244.0.0/16", "10.70.0.0/16"),
        r("10.71.0.0/16", "10.72.0.0/16"),
    ))
    .unwrap();
    // Milan remapped rome's pods to 10.81 and kept its external CIDR.
    let ours = json!({"processed": true, "podCIDRNAT": "10.81.0.0/16", "externalCIDRNAT": "None"});
    let o = Observed {
        own: Some(own(Some(ours))),
        copy: Some(copy(Some(status))),
        ipam: Some(held(None)),
        ..base()
    };
    let a = decide(&o);
    let there = r("10.81.0.0/16", "10.70.0.0/16");
    assert_eq!(
        a[0],
        Action::SetPeerView {
            here: r("10.71.0.0/16", "10.72.0.0/16"),
            there
        }
    );
    let Action::ApplyTunnel(t) = &a[1] else {
        panic!("{a:?}")
    };
    assert_eq!(a.len(), 2);
    let t = serde_json::to_value(t).unwrap();
    assert_eq!(
        t,
        json!({
            "clusterID": MILAN,
            "localPodCIDR": "10.244.0.0/16",
            "localNATPodCIDR": "10.81.0.0/16",
            "localExternalCIDR": "10.70.0.0/16",
            "localNATExternalCIDR": "None",
            "remotePodCIDR": "10.244.0.0/16",
            "remoteNATPodCIDR": "10.71.0.0/16",
            "remoteExternalCIDR": "10.70.0.0/16",
            "remoteNATExternalCIDR": "10.72.0.0/16",
            "endpointIP": "127.0.0.2",
            "backendType": "wireguard",
            "backend_config": {"publicKey": KEY_B, "port": "51821"},
        })
    );
    // All in place: nothing.
    let o = Observed {
        ipam: Some(held(Some(there))),
        tunnel: Some(Tunnel {
            spec: t,
            deleting_since: None,
        }),
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn a_bad_status_on_ours_is_reported_and_not_used() {
    let o = Observed {
        own: Some(own(Some(
            json!({"processed": true, "podCIDRNAT": "10.81.0.1/16"}),
        ))),
        copy: Some(copy(Some(
            serde_json::to_value(copy_status(
                r("10.244.0.0/16", "10.70.0.0/16"),
                r("10.71.0.0/16", "10.72.0.0/16"),
            ))
            .unwrap(),
        ))),
        ipam: Some(held(None)),
        ..base()
    };
    assert!(decide(&o).is_empty());
    assert_eq!(
        own_status_error(&o).unwrap().field,
        "status.podCIDRNAT".to_owned()
    );
}
