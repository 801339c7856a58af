use super::*;

fn allow() -> Vec<Target> {
    vec![
        "kubernetes.default:443=10.0.0.1:6443".parse().unwrap(),
        "api.example:6443".parse().unwrap(),
    ]
}

#[test]
fn targets_parse() {
    let t: Target = "Kubernetes.Default:443=10.0.0.1:6443".parse().unwrap();
    assert_eq!(t.authority, "kubernetes.default:443");
    assert_eq!(t.dial, "10.0.0.1:6443");
    let t: Target = "10.1.2.3:6443".parse().unwrap();
    assert_eq!(t.dial, "10.1.2.3:6443");
    for bad in [
        "",
        "host",
        "host:0",
        "host:99999",
        ":443",
        "a b:1",
        "h:1=x",
        "h/x:1",
    ] {
        let e = bad.parse::<Target>().unwrap_err();
        assert!(e.to_string().contains("host:port"), "{bad}: {e}");
    }
}

#[test]
fn connect_to_an_allowed_target() {
    let d = decide(
        b"CONNECT KUBERNETES.default:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        &allow(),
    );
    assert_eq!(
        d,
        Decision::Connect {
            authority: "kubernetes.default:443".into(),
            dial: "10.0.0.1:6443".into()
        }
    );
}

fn status(d: Decision) -> u16 {
    match d {
        Decision::Refuse { status, .. } => status,
        Decision::Connect { .. } => panic!("connected"),
    }
}

#[test]
fn everything_else_is_refused() {
    let a = allow();
    assert_eq!(
        status(decide(b"CONNECT evil:443 HTTP/1.1\r\n\r\n", &a)),
        403
    );
    // Same host, another port.
    assert_eq!(
        status(decide(b"CONNECT api.example:443 HTTP/1.1\r\n\r\n", &a)),
        403
    );
    // The dialled address itself is not a target.
    assert_eq!(
        status(decide(b"CONNECT 10.0.0.1:6443 HTTP/1.1\r\n\r\n", &a)),
        403
    );
    assert_eq!(
        status(decide(b"GET http://api.example:6443/ HTTP/1.1\r\n\r\n", &a)),
        405
    );
    assert_eq!(status(decide(b"CONNECT api.example:6443\r\n\r\n", &a)), 400);
    assert_eq!(
        status(decide(b"CONNECT api.example:6443 SPDY/3\r\n\r\n", &a)),
        400
    );
    assert_eq!(status(decide(b"\xff\xfe\r\n\r\n", &a)), 400);
    assert_eq!(
        status(decide(b"CONNECT api.example:6443 HTTP/1.1\r\n\r\n", &[])),
        403
    );
}

#[test]
fn refusals_are_complete_responses() {
    for s in [400, 403, 405, 502] {
        let r = refusal_response(s);
        assert!(r.starts_with(&format!("HTTP/1.1 {s} ")), "{r}");
        assert!(r.ends_with("\r\n\r\n"));
    }
}
