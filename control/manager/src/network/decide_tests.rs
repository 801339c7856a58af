use serde_json::json;

use super::*;

const ROME: &str = "rome-id";
const MILAN: &str = "milan-id";
const KEY_A: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
const KEY_B: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

fn r(pods: &str, external: &str) -> Ranges {
    Ranges {
        pods: pods.parse().unwrap(),
        external: external.parse().unwrap(),
    }
}

fn local() -> Local {
    Local {
        ranges: r("10.244.0.0/16", "10.70.0.0/16"),
        public_key: KEY_A.parse().unwrap(),
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port: 51820,
        },
    }
}

fn milan() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: MILAN.parse().unwrap(),
        cluster_name: "milan".parse().unwrap(),
    }
}

/// Milan's NetworkConfig for rome, as its copy in rome.
fn copy_spec() -> Value {
    json!({
        "cluster": {"clusterID": ROME, "clusterName": "rome"},
        "podCIDR": "10.244.0.0/16",
        "externalCIDR": "10.70.0.0/16",
        "endpointIP": "127.0.0.2",
        "backendType": "wireguard",
        "backend_config": {"publicKey": KEY_B, "port": "51821"},
    })
}

fn base() -> Observed {
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

fn own(status: Option<Value>) -> Own {
    Own {
        spec: json(&own_spec(&milan(), &local())),
        deleting_since: None,
        status,
    }
}

fn copy(status: Option<Value>) -> Copy {
    Copy {
        spec: copy_spec(),
        status,
        refused: None,
        refused_spec: None,
        deleting: false,
    }
}

/// Rome remapped milan's ranges (same as its own) to 10.71/10.72.
fn held(seen_there: Option<Ranges>) -> IpamPeer {
    IpamPeer {
        announced: r("10.244.0.0/16", "10.70.0.0/16"),
        seen_here: r("10.71.0.0/16", "10.72.0.0/16"),
        seen_there,
    }
}

fn processed() -> Value {
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
    };
    assert_eq!(decide(&o), [Action::WriteCopyStatus(status.clone())]);
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
fn a_bad_peer_config_is_refused_once_and_nothing_else_happens() {
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.244.0.1/16");
    let o = Observed {
        own: Some(own(None)),
        copy: Some(c.clone()),
        ..base()
    };
    let a = decide(&o);
    let [Action::Refuse(m)] = &a[..] else {
        panic!("{a:?}")
    };
    assert!(
        m.starts_with("spec.podCIDR: 10.244.0.1/16 has host bits"),
        "{m}"
    );
    // Annotated already, for this spec: no second Event.
    c.refused = Some(m.clone());
    c.refused_spec = Some(spec_digest(&c.spec));
    let o = Observed {
        copy: Some(c.clone()),
        ..o
    };
    assert!(decide(&o).is_empty());
    // Corrected: the remap, then (once it succeeded) the refusal goes.
    c.spec = copy_spec();
    let o = Observed { copy: Some(c), ..o };
    assert_eq!(
        decide(&o),
        [
            Action::Remap(r("10.244.0.0/16", "10.70.0.0/16")),
            Action::ClearRefusal,
        ]
    );
}

#[test]
fn ranges_the_ipam_refused_are_not_tried_again_until_the_spec_changes() {
    // The IPAM holds milan's first ranges; milan announces others: remapped for the IPAM to
    // judge (it refuses: the executor annotates the copy with the message and the digest).
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.100.0.0/16");
    let o = Observed {
        copy: Some(c.clone()),
        ipam: Some(held(None)),
        own: Some(own(None)),
        ..base()
    };
    assert_eq!(
        decide(&o),
        [Action::Remap(r("10.100.0.0/16", "10.70.0.0/16"))]
    );
    // Refused for this spec: nothing more (no ClearRefusal/Remap/refusal loop).
    c.refused = Some("spec.podCIDR, spec.externalCIDR: liqo-ipam refused them: x".into());
    c.refused_spec = Some(spec_digest(&c.spec));
    let o = Observed {
        copy: Some(c.clone()),
        ..o
    };
    assert_eq!(decide(&o), []);
    // A refusal without a digest (or of another spec) is tried once more.
    let mut older = c.clone();
    older.refused_spec = None;
    let a = decide(&Observed {
        copy: Some(older),
        ..o.clone()
    });
    assert_eq!(
        a,
        [
            Action::Remap(r("10.100.0.0/16", "10.70.0.0/16")),
            Action::ClearRefusal
        ]
    );
    // The spec changes (back to the ranges held): the refusal goes, the status follows.
    c.spec = copy_spec();
    let a = decide(&Observed {
        copy: Some(c.clone()),
        ..o.clone()
    });
    assert!(
        matches!(&a[..], [Action::ClearRefusal, Action::WriteCopyStatus(s), ..] if s.processed),
        "{a:?}"
    );
    // Another change of ranges: tried again.
    c.spec["externalCIDR"] = json!("10.90.0.0/16");
    assert_eq!(
        decide(&Observed { copy: Some(c), ..o }),
        [
            Action::Remap(r("10.244.0.0/16", "10.90.0.0/16")),
            Action::ClearRefusal
        ]
    );
}

#[test]
fn the_spec_digest_follows_the_spec() {
    let a = copy_spec();
    let mut b = copy_spec();
    assert_eq!(spec_digest(&a), spec_digest(&b));
    assert_eq!(spec_digest(&a).len(), 16);
    b["endpointIP"] = json!("127.0.0.3");
    assert_ne!(spec_digest(&a), spec_digest(&b));
}

#[test]
fn a_bad_config_after_processing_changes_nothing() {
    let status = serde_json::to_value(copy_status(
        r("10.244.0.0/16", "10.70.0.0/16"),
        r("10.71.0.0/16", "10.72.0.0/16"),
    ))
    .unwrap();
    let mut c = copy(Some(status));
    c.spec["backend_config"]["publicKey"] = json!("not-a-key");
    let o = Observed {
        own: Some(own(Some(processed()))),
        copy: Some(c),
        ipam: Some(held(Some(r("10.71.0.0/16", "10.72.0.0/16")))),
        ..base()
    };
    let a = decide(&o);
    assert!(
        matches!(&a[..], [Action::Refuse(m)] if m.starts_with("spec.backend_config.publicKey:")),
        "{a:?}"
    );
}

#[test]
fn a_peer_announcing_other_ranges_is_remapped_again_for_the_ipam_to_judge() {
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.100.0.0/16");
    let o = Observed {
        copy: Some(c),
        ipam: Some(held(None)),
        own: Some(own(None)),
        ..base()
    };
    assert_eq!(
        decide(&o),
        [Action::Remap(r("10.100.0.0/16", "10.70.0.0/16"))]
    );
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

fn established() -> Observed {
    Observed {
        own: Some(own(Some(processed()))),
        copy: Some(copy(Some(processed()))),
        ipam: Some(held(Some(r("10.71.0.0/16", "10.72.0.0/16")))),
        tunnel: Some(Tunnel {
            spec: json!({}),
            deleting_since: None,
        }),
        ..base()
    }
}

#[test]
fn unpeering_deletes_waits_then_releases_and_drops_the_finalizer() {
    let o = Observed {
        phase: PeeringPhase::Authenticated,
        ..established()
    };
    assert_eq!(
        decide(&o),
        [Action::DeleteOwn, Action::DeleteTunnel, Action::DeleteCopy]
    );
    // Deleting: wait within the grace.
    let since = Some("2026-11-23T07:58:00Z".parse().unwrap());
    let o = Observed {
        own: Some(Own {
            deleting_since: since,
            ..own(None)
        }),
        tunnel: Some(Tunnel {
            spec: json!({}),
            deleting_since: since,
        }),
        copy: None,
        ..o
    };
    assert!(decide(&o).is_empty());
    // Both gone: release, then the finalizer.
    let o = Observed {
        own: None,
        tunnel: None,
        ..o
    };
    assert_eq!(
        decide(&o),
        [Action::Release { forced: None }, Action::RemoveFinalizer]
    );
    let o = Observed { ipam: None, ..o };
    assert_eq!(decide(&o), [Action::RemoveFinalizer]);
    let o = Observed {
        has_finalizer: false,
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn a_peer_gone_forever_is_released_after_the_grace_with_the_reason() {
    let since = Some("2026-11-23T07:54:59Z".parse().unwrap());
    let o = Observed {
        fc_deleting: true,
        own: Some(Own {
            deleting_since: since,
            ..own(None)
        }),
        tunnel: None,
        copy: None,
        ..established()
    };
    let a = decide(&o);
    let [
        Action::Release { forced: Some(why) },
        Action::RemoveFinalizer,
    ] = &a[..]
    else {
        panic!("{a:?}")
    };
    assert_eq!(
        why,
        "released the IPAM ranges after the 300 s grace with our NetworkConfig (the peer did not remove its copy) still present"
    );
    // A deletion from the future (clock skew) is never overdue.
    let o = Observed {
        own: Some(Own {
            deleting_since: Some("2026-11-23T09:00:00Z".parse().unwrap()),
            ..own(None)
        }),
        ..o
    };
    assert!(decide(&o).is_empty());
}

#[test]
fn a_duplicate_foreign_cluster_never_touches_the_peers_network() {
    // The IPAM holds the peer for the ForeignCluster that owns it: a younger duplicate (no
    // tenant namespace of its own) must not release it.
    let o = Observed {
        processable: false,
        tenant_known: false,
        has_finalizer: false,
        ..established()
    };
    assert!(decide(&o).is_empty());
    let o = Observed {
        has_finalizer: true,
        ..o
    };
    assert_eq!(decide(&o), [Action::RemoveFinalizer]);
}

#[test]
fn the_peers_copy_goes_with_the_peering_only_and_once() {
    // Ours No, the peer's Yes: our network goes, the peer's copy stays (deleting it would
    // only have the peer's replicator make it again).
    let o = Observed {
        networking: NetworkingEnabled::No,
        ..established()
    };
    assert!(!wanted(&o));
    assert_eq!(decide(&o), [Action::DeleteOwn, Action::DeleteTunnel]);
    // No direction left, or the ForeignCluster deleted: it goes, once.
    for o in [
        Observed {
            phase: PeeringPhase::Authenticated,
            ..o.clone()
        },
        Observed {
            fc_deleting: true,
            ..o.clone()
        },
    ] {
        assert!(decide(&o).contains(&Action::DeleteCopy), "{o:?}");
        let mut c = o.copy.clone().unwrap();
        c.deleting = true;
        let again = decide(&Observed {
            copy: Some(c),
            ..o.clone()
        });
        assert!(!again.contains(&Action::DeleteCopy), "{again:?}");
    }
}
