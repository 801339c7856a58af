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

#[tokio::test]
async fn the_head_is_read_in_buffers_and_the_rest_kept() {
    // The blank line split across reads, tunnel bytes in the same read as its end.
    let (mut client, mut server) = tokio::io::duplex(64);
    let reader = tokio::spawn(async move { read_head(&mut server).await.unwrap() });
    client
        .write_all(b"CONNECT a:1 HTTP/1.1\r\n\r")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    client.write_all(b"\n\x16\x03\x01TLS").await.unwrap();
    let got = reader.await.unwrap().unwrap();
    assert_eq!(got.head, b"CONNECT a:1 HTTP/1.1\r\n\r\n");
    assert_eq!(got.rest, b"\x16\x03\x01TLS");
    // Too long without a blank line, or closed first: no head.
    let (mut client, mut server) = tokio::io::duplex(MAX_HEAD * 2);
    client.write_all(&vec![b'a'; MAX_HEAD + 1]).await.unwrap();
    assert_eq!(read_head(&mut server).await.unwrap(), None);
    let (client, mut server) = tokio::io::duplex(64);
    drop(client);
    assert_eq!(read_head(&mut server).await.unwrap(), None);
}

async fn proxy(allow: Vec<Target>, max: usize) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap();
    tokio::spawn(serve(l, allow, max));
    at
}

#[tokio::test]
async fn bytes_after_the_head_reach_the_target() {
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let t = target.local_addr().unwrap();
    let at = proxy(vec![format!("up.test:1={t}").parse().unwrap()], 4).await;
    let mut c = TcpStream::connect(at).await.unwrap();
    c.write_all(b"CONNECT up.test:1 HTTP/1.1\r\n\r\nhello")
        .await
        .unwrap();
    let (mut up, _) = target.accept().await.unwrap();
    let mut got = [0u8; 5];
    tokio::time::timeout(Duration::from_secs(5), up.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"hello");
    let mut answer = vec![0u8; ESTABLISHED.len()];
    c.read_exact(&mut answer).await.unwrap();
    assert_eq!(answer, ESTABLISHED.as_bytes());
}

#[tokio::test]
async fn clients_over_the_cap_wait() {
    let at = proxy(allow(), 1).await;
    // The first client holds the only slot (no head yet).
    let first = TcpStream::connect(at).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut second = TcpStream::connect(at).await.unwrap();
    second
        .write_all(b"CONNECT evil:443 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    let early = tokio::time::timeout(Duration::from_millis(500), second.read(&mut buf)).await;
    assert!(early.is_err(), "served over the cap: {early:?}");
    // The slot freed, the second is answered.
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), second.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"HTTP/1.1 403");
}
