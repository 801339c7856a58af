use std::net::SocketAddr;

use super::*;
use crate::network::fixtures::{key, spec, tep};

fn no_dns(_: &str, _: u16) -> Option<SocketAddr> {
    None
}

#[test]
fn a_tunnel_endpoint_reads_as_the_cores_peering_with_the_nat_views() {
    let t = read(&tep("t1", "milan", spec("milan", 71)));
    assert!(!t.deleting);
    let p = t.parsed.unwrap();
    assert_eq!(p.peer.as_str(), "milan");
    // remote*: our decision (the NAT view, else the real range); local*: the peer's.
    assert_eq!(p.view.remote_pods.to_string(), "10.71.0.0/16");
    assert_eq!(p.view.remote_external.to_string(), "10.171.0.0/16");
    assert_eq!(p.view.local_pods_at_peer.to_string(), "10.50.0.0/16");
    assert_eq!(p.view.local_external_at_peer.to_string(), "10.201.0.0/16");
    assert_eq!(p.public_key.to_string(), key(71));
    assert_eq!(
        p.endpoint,
        Endpoint::Addr("198.18.0.2:51840".parse().unwrap())
    );
    let mut s = spec("milan", 71);
    s["remoteNATPodCIDR"] = "None".into();
    s["endpointIP"] = "".into();
    let p = parse(&tep("t1", "milan", s)).unwrap();
    assert_eq!(p.view.remote_pods.to_string(), "10.200.0.0/16");
    assert_eq!(p.endpoint, Endpoint::None, "a peer behind NAT calls us");
    assert_eq!(p.peering(None).endpoint, None);
}

#[test]
fn every_bad_field_is_named() {
    let cases: &[(&str, serde_json::Value, &str, &str)] = &[
        (
            "remotePodCIDR",
            "10.200.0.1/16".into(),
            "spec.remotePodCIDR",
            "host bits",
        ),
        (
            "remoteNATPodCIDR",
            "fd00::/64".into(),
            "spec.remoteNATPodCIDR",
            "",
        ),
        (
            "localNATExternalCIDR",
            "none".into(),
            "spec.localNATExternalCIDR",
            "",
        ),
        ("clusterID", "Not_An_ID".into(), "spec.clusterID", ""),
        (
            "backendType",
            "ipsec".into(),
            "spec.backendType",
            "\"ipsec\" is not \"wireguard\"",
        ),
        (
            "endpointIP",
            "not an address".into(),
            "spec.endpointIP",
            "neither",
        ),
        // As the network manager checks it (one function): names are lowercase.
        (
            "endpointIP",
            "GW.Milan.Example".into(),
            "spec.endpointIP",
            "neither",
        ),
        (
            "backend_config",
            serde_json::json!({"publicKey": "short", "port": "51840"}),
            "spec.backend_config.publicKey",
            "",
        ),
        (
            "backend_config",
            serde_json::json!({"publicKey": key(1), "port": "70000"}),
            "spec.backend_config.port",
            "",
        ),
        (
            "backend_config",
            serde_json::json!({"publicKey": key(1), "port": "0"}),
            "spec.backend_config.port",
            "not a port",
        ),
        (
            "backend_config",
            serde_json::json!({"port": "1"}),
            "spec.backend_config.publicKey",
            "missing",
        ),
    ];
    for (field, value, named, problem) in cases {
        let mut s = spec("milan", 71);
        s[*field] = value.clone();
        let e = parse(&tep("t1", "milan", s)).unwrap_err();
        assert_eq!(e.field, *named, "{field}={value}: {e}");
        assert!(e.problem.contains(problem), "{field}={value}: {e}");
    }
    let mut s = spec("milan", 71);
    s.as_object_mut().unwrap().remove("remotePodCIDR");
    assert_eq!(
        parse(&tep("t1", "milan", s)).unwrap_err().field,
        "spec.remotePodCIDR"
    );
    let mut o = tep("t1", "milan", spec("milan", 71));
    o.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("clusterID".into(), "turin".into());
    assert_eq!(parse(&o).unwrap_err().field, "metadata.labels.clusterID");
    let mut o = tep("t1", "milan", spec("milan", 71));
    o.data.as_object_mut().unwrap().remove("spec");
    assert_eq!(parse(&o).unwrap_err().field, "spec");
}

#[test]
fn the_record_keeps_the_good_ones_and_names_why_each_other_is_left_out() {
    let mut bad = spec("turin", 73);
    bad["remotePodCIDR"] = "10.200.0.1/16".into();
    let mut named = spec("naples", 74);
    named["endpointIP"] = "gw.naples.example".into();
    let mut dup = tep("t9", "milan-again", spec("milan", 75));
    dup.metadata.name = Some("milan-again".into());
    let mut gone = read(&tep("t5", "venice", spec("venice", 76)));
    gone.deleting = true;
    let teps = vec![
        read(&tep("t2", "turin", bad)),
        read(&tep("t1", "milan", spec("milan", 71))),
        read(&dup),
        read(&tep("t3", "naples", named.clone())),
        gone,
    ];
    let (p, refused) = peerings(&teps, no_dns);
    assert_eq!(p.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["milan"]);
    let why: Vec<(String, String)> = refused
        .iter()
        .map(|(k, e)| (k.clone(), e.field.clone()))
        .collect();
    assert_eq!(
        why,
        [
            ("t2/turin".to_owned(), "spec.remotePodCIDR".to_owned()),
            ("t3/naples".into(), "spec.endpointIP".into()),
            ("t9/milan-again".into(), "spec.clusterID".into()),
        ]
    );
    assert!(refused["t9/milan-again"].problem.contains("t1/milan"));
    let (p, refused) = peerings(&[read(&tep("t3", "naples", named))], |h, port| {
        (h == "gw.naples.example").then(|| SocketAddr::new([203, 0, 113, 9].into(), port))
    });
    assert!(refused.is_empty());
    assert_eq!(
        p.values().next().unwrap().endpoint.unwrap().to_string(),
        "203.0.113.9:51840"
    );
}

#[test]
fn a_tunnel_endpoint_gives_the_remapped_ranges_else_the_announced() {
    let spec: crate::api::net::TunnelEndpointSpec = serde_json::from_value(serde_json::json!({
        "clusterID": "milan",
        "localPodCIDR": "10.200.0.0/16", "localNATPodCIDR": "10.50.0.0/16",
        "localExternalCIDR": "10.201.0.0/16", "localNATExternalCIDR": "None",
        "remotePodCIDR": "10.200.0.0/16", "remoteNATPodCIDR": "10.71.0.0/16",
        "remoteExternalCIDR": "10.201.0.0/16", "remoteNATExternalCIDR": "10.72.0.0/16",
        "endpointIP": "198.18.0.2", "backendType": "wireguard", "backend_config": {},
    }))
    .unwrap();
    let v = view(&spec);
    assert_eq!(v.remote_pods.to_string(), "10.71.0.0/16");
    assert_eq!(v.remote_external.to_string(), "10.72.0.0/16");
    assert_eq!(v.local_pods_at_peer.to_string(), "10.50.0.0/16");
    assert_eq!(v.local_external_at_peer.to_string(), "10.201.0.0/16");
}
