use std::os::unix::fs::PermissionsExt;

use super::*;

const RUNS_D1: &str = r#""reload":{"source":"g.yaml","applied":{"digest":"d1","count":1}}"#;

fn status(json: &str) -> Result<liqo_gateway_api::status::Status, FilesError> {
    decode(json, "test")
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
    let s: liqo_overlay_api::status::Status = decode(body, "test").unwrap();
    assert!(matches!(overlay_look(&s, "d2"), Look::NotYet(w) if w.contains("RTNETLINK: no")));
    assert_eq!(overlay_look(&s, "d1"), Look::Ready);
}

#[test]
fn files_are_replaced_whole_and_secrets_are_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/gateway.yaml");
    let d = write_config(&path, "peers: []\n").unwrap();
    assert_eq!(d, digest("peers: []\n"));
    assert_eq!(fs::read_to_string(&path).unwrap(), "peers: []\n");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o600, 0o600);
    // Same text: not rewritten (same inode), same digest.
    let before = fs::metadata(&path).unwrap().modified().unwrap();
    let same = ensure_config(&path, "peers: []\n").unwrap();
    assert_eq!((same.digest.as_str(), same.written), (d.as_str(), false));
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before);
    let other = ensure_config(&path, "peers: [x]\n").unwrap();
    assert!(other.written);
    assert_ne!(other.digest, d);
    let key = dir.path().join("private.key");
    write_atomic_mode(&key, b"secret\n", 0o600).unwrap();
    assert_eq!(
        fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let names: Vec<String> = fs::read_dir(dir.path().join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["gateway.yaml"], "no temporary file left");
    let e = write_config(Path::new("/proc/nope/x.yaml"), "x").unwrap_err();
    assert!(e.to_string().contains("/proc/nope/x.yaml"), "{e}");
}

#[test]
fn status_urls_are_http_with_an_address() {
    let u: StatusUrl = "http://127.0.0.1:9107/status".parse().unwrap();
    assert_eq!(u.addr.port(), 9107);
    assert_eq!(u.path, "/status");
    assert_eq!(u.to_string(), "http://127.0.0.1:9107/status");
    let u: StatusUrl = "http://10.0.0.1:80".parse().unwrap();
    assert_eq!(u.path, "/status");
    for bad in [
        "https://127.0.0.1:1/status",
        "http://localhost:1/status",
        "127.0.0.1:1",
    ] {
        let e = bad.parse::<StatusUrl>().unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}
