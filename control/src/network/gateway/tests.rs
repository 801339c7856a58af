use liqo_types::reload::{Applied, Refused, ReloadStatus};

use super::*;
use crate::network::{
    fixtures::{spec, tep},
    tunnel::{self, read},
};

fn base() -> File {
    File::parse("localPodCIDR: 10.200.0.0/16\nlistenPort: 51840\nnamespace: liqo-gateway\n")
        .unwrap()
}

fn teps() -> Vec<Tep> {
    vec![
        read(&tep("t1", "milan", spec("milan", 71))),
        read(&tep("t2", "turin", spec("turin", 73))),
    ]
}

fn status(digest: &str, peers: &[(&str, Option<u64>)]) -> liqo_gateway_api::status::Status {
    let peers: Vec<serde_json::Value> = peers
        .iter()
        .map(|(id, age)| {
            serde_json::json!({"id": id, "publicKey": "k", "endpoint": "198.18.0.2:51840",
                "handshakeAgeSecs": age, "txPackets": 0, "txBytes": 0, "rxPackets": 0,
                "rxBytes": 0, "dropped": 0})
        })
        .collect();
    let reload = ReloadStatus {
        source: "g.yaml".into(),
        applied: Some(Applied {
            digest: digest.into(),
            count: 1,
            micros: 0,
        }),
        ..ReloadStatus::default()
    };
    serde_json::from_value(serde_json::json!({"publicKey": "k", "listenPort": 51840,
        "noRoute": 0, "peers": peers, "reload": reload}))
    .unwrap()
}

#[test]
fn the_file_is_the_base_with_the_cores_peer_list_and_the_ipams_endpoints() {
    let (p, refused) = tunnel::peerings(&teps(), |_, _| None);
    assert!(refused.is_empty());
    let ext = Endpoints {
        local_external_cidr: Some("10.201.0.0/16".parse().unwrap()),
        endpoints: vec![EndpointMapping {
            ip: "172.18.0.5".parse().unwrap(),
            external_ip: "10.201.0.5".parse().unwrap(),
            peers: vec!["milan".parse().unwrap()],
        }],
    };
    let r = render(&base(), Some("/var/lib/k"), None, &p, &ext).unwrap();
    assert!(r.refused.is_empty());
    assert_eq!(
        r.file.peers,
        plan::gateway_peers(&p),
        "the core's plan, as is"
    );
    assert_eq!(r.file.private_key_file.as_deref(), Some("/var/lib/k"));
    assert_eq!(r.file.endpoints, ext.endpoints);
    assert_eq!(r.file.local_external_cidr, ext.local_external_cidr);
    assert_eq!(
        File::parse(&r.text).unwrap(),
        r.file,
        "the text is the file"
    );
    assert!(r.file.validate(None).is_ok());
    // The same input gives the same text (no rewrite, same digest).
    assert_eq!(
        render(&base(), Some("/var/lib/k"), None, &p, &ext)
            .unwrap()
            .text,
        r.text
    );
    let mut with_peer = base();
    with_peer.peers = r.file.peers.clone();
    assert!(matches!(
        render(&with_peer, None, None, &p, &ext),
        Err(RenderError::BaseHasPeers)
    ));
}

#[test]
fn a_peer_the_gateway_would_refuse_is_left_out_naming_the_field_and_the_others_stay() {
    // turin's pods seen here overlap our own pods.
    let mut s = spec("turin", 73);
    s["remoteNATPodCIDR"] = "10.200.128.0/17".into();
    let mut own = spec("naples", 74);
    own["backend_config"]["publicKey"] = crate::network::fixtures::key(9).into();
    let teps = vec![
        read(&tep("t1", "milan", spec("milan", 71))),
        read(&tep("t2", "turin", s)),
        read(&tep("t3", "naples", own)),
    ];
    let (p, _) = tunnel::peerings(&teps, |_, _| None);
    let own_key = Some(liqo_types::PublicKey([9; 32]));
    // Without our external CIDR every peer would be refused (each names its view of it).
    let none = render(&base(), None, None, &p, &Endpoints::default()).unwrap();
    assert!(none.file.peers.is_empty());
    let milan = &none.refused[&"milan".parse().unwrap()];
    assert!(
        milan.problem.contains("localExternalCIDR is not"),
        "{milan}"
    );
    let ext = Endpoints {
        local_external_cidr: tunnel::local_external(&teps),
        endpoints: Vec::new(),
    };
    assert_eq!(
        ext.local_external_cidr.unwrap().to_string(),
        "10.201.0.0/16"
    );
    let r = render(&base(), None, own_key, &p, &ext).unwrap();
    let ids: Vec<&str> = r.file.peers.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["milan"], "{:?}", r.refused);
    let turin = &r.refused[&"turin".parse().unwrap()];
    assert_eq!(turin.field, "spec.remoteNATPodCIDR/remotePodCIDR");
    assert!(turin.problem.contains("overlaps localPodCIDR"), "{turin}");
    let naples = &r.refused[&"naples".parse().unwrap()];
    assert_eq!(naples.field, "spec.backend_config.publicKey", "{naples}");
    let e = render(&File::default(), None, None, &p, &Endpoints::default()).unwrap_err();
    assert!(
        liqo_types::chain(&e).contains("localPodCIDR"),
        "{}",
        liqo_types::chain(&e)
    );
}

#[test]
fn the_connection_follows_the_gateways_status() {
    use ConnectionStatus::{Connected, Connecting, Error};
    let t = &teps()[0];
    let got = |seen: Observed<'_>| {
        let c = connection(t, None, "d2", seen);
        (c.status.unwrap(), c.status_message.unwrap())
    };
    assert_eq!(got(Observed::Fake).0, Connected);
    let (s, m) = got(Observed::Unreachable("connection refused"));
    assert_eq!(
        (s, m.as_str()),
        (Connecting, "the gateway's status: connection refused")
    );
    let (s, m) = got(Observed::Status(&status("d1", &[("milan", Some(1))])));
    assert_eq!(
        (s, m.as_str()),
        (Connecting, "waiting for the gateway to run config d2")
    );
    let (s, m) = got(Observed::Status(&status("d2", &[("turin", Some(1))])));
    assert_eq!(
        (s, m.as_str()),
        (Connecting, "the gateway does not list milan")
    );
    assert_eq!(
        got(Observed::Status(&status("d2", &[("milan", None)]))).0,
        Connecting
    );
    let (s, m) = got(Observed::Status(&status("d2", &[("milan", Some(181))])));
    assert_eq!(
        (s, m.as_str()),
        (Connecting, "no handshake in the last 180 s")
    );
    let c = connection(
        t,
        None,
        "d2",
        Observed::Status(&status("d2", &[("milan", Some(180))])),
    );
    assert_eq!(c.status, Some(Connected));
    assert_eq!(c.peer_configuration["endpoint"], "198.18.0.2:51840");
    let mut refused = status("d1", &[]);
    refused.reload.refused = Some(Refused {
        digest: "d2".into(),
        field: "peers[0].endpoint".into(),
        problem: "bad".into(),
    });
    let (s, m) = got(Observed::Status(&refused));
    assert_eq!(
        (s, m.as_str()),
        (
            Error,
            "the gateway refused its config: peers[0].endpoint: bad"
        )
    );
    let e = bad("spec.remotePodCIDR", "has host bits");
    let c = connection(t, Some(&e), "d2", Observed::Fake);
    assert_eq!(c.status, Some(Error));
    assert_eq!(
        c.status_message.unwrap(),
        "spec.remotePodCIDR: has host bits"
    );
}

#[test]
fn a_deleted_peer_is_released_once_the_gateway_dropped_it() {
    let mut all = teps();
    all[0].deleting = true;
    let (p, _) = tunnel::peerings(&all, |_, _| None);
    let ext = Endpoints {
        local_external_cidr: tunnel::local_external(&all),
        endpoints: Vec::new(),
    };
    let r = render(&base(), None, None, &p, &ext).unwrap();
    assert_eq!(r.file.peers.len(), 1);
    let milan = &all[0];
    assert!(released(milan, &r, "d2", Observed::Fake));
    assert!(!released(milan, &r, "d2", Observed::Unreachable("down")));
    let still = status("d2", &[("milan", Some(1)), ("turin", Some(1))]);
    assert!(!released(milan, &r, "d2", Observed::Status(&still)));
    let old = status("d1", &[("turin", Some(1))]);
    assert!(
        !released(milan, &r, "d2", Observed::Status(&old)),
        "an older text"
    );
    let gone = status("d2", &[("turin", Some(1))]);
    assert!(released(milan, &r, "d2", Observed::Status(&gone)));
    let mut bad_one = milan.clone();
    bad_one.parsed = Err(bad("spec", "x"));
    assert!(
        released(&bad_one, &r, "d2", Observed::Status(&still)),
        "nothing rendered"
    );
}

#[test]
fn the_gateway_fails_when_unreadable_or_refusing_the_text_written_not_when_only_slow() {
    assert_eq!(failing(Observed::Fake, "d2"), None);
    let why = failing(Observed::Unreachable("connection refused"), "d2").unwrap();
    assert!(why.contains("connection refused"), "{why}");
    assert_eq!(
        failing(Observed::Status(&status("d1", &[])), "d2"),
        None,
        "slow"
    );
    let mut refused = status("d1", &[]);
    refused.reload.refused = Some(Refused {
        digest: "d2".into(),
        field: "peers[0].endpoint".into(),
        problem: "bad".into(),
    });
    let why = failing(Observed::Status(&refused), "d2").unwrap();
    assert!(
        why.contains("refuses") && why.contains("peers[0].endpoint"),
        "{why}"
    );
    assert_eq!(
        failing(Observed::Status(&refused), "d3"),
        None,
        "another text refused"
    );
}
