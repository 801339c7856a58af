//! One look at a gateway's or an overlay agent's status, as the operators and the lab wait.

use super::*;

const RUNS_D1: &str = r#""reload":{"source":"g.yaml","applied":{"digest":"d1","count":1}}"#;

fn status(json: &str) -> Result<liqo_gateway_api::status::Status, serde_json::Error> {
    serde_json::from_str(json)
}

fn milan() -> ClusterId {
    "milan".parse().unwrap()
}

#[test]
fn a_status_without_the_peers_key_is_not_a_removed_peer() {
    // A body that lacks `peers` does not decode: it is never read as "the peer is gone".
    let body = format!(r#"{{"publicKey":"k","listenPort":1,"noRoute":0,{RUNS_D1}}}"#);
    let e = status(&body).unwrap_err();
    assert!(liqo_types::chain(&e).contains("peers"), "{e}");
    let body = format!(r#"{{"publicKey":"k","listenPort":1,"noRoute":0,"peers":[],{RUNS_D1}}}"#);
    let s = status(&body).unwrap();
    assert_eq!(
        gateway_look(&s, Some("d1"), &milan(), Want::Gone),
        Look::Ready
    );
    // Gone from a status that still runs the previous text is not gone yet.
    assert!(matches!(
        gateway_look(&s, Some("d2"), &milan(), Want::Gone),
        Look::NotYet(w) if w.contains("running d1 instead of d2")
    ));
}

#[test]
fn a_refused_text_is_refused_naming_the_field_and_a_stale_handshake_is_not_fresh() {
    let body = r#"{"publicKey":"k","listenPort":1,"noRoute":0,"peers":[],
        "reload":{"source":"g.yaml","applied":{"digest":"d1","count":1},
        "refused":{"digest":"d2","field":"peers[0].remotePodCIDR","problem":"overlaps"}}}"#;
    let s = status(body).unwrap();
    let Look::Refused(e) = gateway_look(&s, Some("d2"), &milan(), Want::Session) else {
        panic!("not refused")
    };
    assert_eq!(e.to_string(), "peers[0].remotePodCIDR: overlaps");
    // A refusal of another text does not concern this one.
    assert!(matches!(
        gateway_look(&s, Some("d1"), &milan(), Want::Session),
        Look::NotYet(w) if w == "no peer milan"
    ));
    let peer = |age: &str| {
        format!(
            r#"{{"publicKey":"k","listenPort":1,"noRoute":0,
            "peers":[{{"id":"milan","publicKey":"x","endpoint":null,"handshakeAgeSecs":{age},
            "txPackets":0,"txBytes":0,"rxPackets":0,"rxBytes":0,"dropped":0}}],
            "reload":{{"source":"g.yaml","applied":{{"digest":"d2","count":2}}}}}}"#
        )
    };
    let s = status(&peer("3")).unwrap();
    assert_eq!(
        gateway_look(&s, Some("d2"), &milan(), Want::Session),
        Look::Ready
    );
    assert_eq!(
        gateway_look(&s, Some("d2"), &milan(), Want::Fresh),
        Look::Ready
    );
    assert!(matches!(
        gateway_look(&s, None, &milan(), Want::Gone),
        Look::NotYet(_)
    ));
    let s = status(&peer("181")).unwrap();
    assert_eq!(
        gateway_look(&s, Some("d2"), &milan(), Want::Session),
        Look::Ready
    );
    assert!(matches!(
        gateway_look(&s, Some("d2"), &milan(), Want::Fresh),
        Look::NotYet(w) if w.contains("181 s ago")
    ));
    let s = status(&peer("null")).unwrap();
    assert!(matches!(
        gateway_look(&s, Some("d2"), &milan(), Want::Fresh),
        Look::NotYet(w) if w == "no handshake with milan yet"
    ));
}

#[test]
fn a_failed_apply_is_the_reason_given() {
    let body = r#"{"node":"n0","overlayIp":"240.0.0.1","gateway":"n0","nodes":["n0"],
        "remoteCIDRs":[],"reload":{"source":"o.yaml","applied":{"digest":"d1","count":1},
        "applyError":{"digest":"d2","error":"RTNETLINK: no","attempts":3}}}"#;
    let s: liqo_overlay_api::status::Status = serde_json::from_str(body).unwrap();
    assert!(matches!(overlay_look(&s, "d2"), Look::NotYet(w) if w.contains("RTNETLINK: no")));
    assert_eq!(overlay_look(&s, "d1"), Look::Ready);
}
