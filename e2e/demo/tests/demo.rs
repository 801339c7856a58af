//! The `liqo-demo` binary over loopback: two instances (a front in "rome", a back in "milan"),
//! each started on a free port and polled until `/healthz` answers. `/` names the pod and the
//! client address the server saw; `/call` crosses from one to the other; a bad URL is a 400, a
//! refused one a 502, both naming the URL; an unknown path a 404; SIGTERM stops it cleanly.
//! The HTTP client is a few lines over `std::net` (one request per connection).

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// A running instance, killed when dropped (a failed assertion leaves nothing behind).
struct Demo {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on now (the kernel's choice, released at once).
fn free_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    l.local_addr().unwrap().port()
}

/// Starts the binary as pod `pod` of `cluster`, and waits until `/healthz` answers 200.
fn start(pod: &str, cluster: &str) -> Demo {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let child = Command::new(env!("CARGO_BIN_EXE_liqo-demo"))
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--cluster-name")
        .arg(cluster)
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", "demo")
        .env("NODE_NAME", format!("{cluster}-worker"))
        .env_remove("CLUSTER_NAME")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut demo = Demo { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            panic!("liqo-demo on {addr} exited before it was ready: {status}");
        }
        if let Ok((200, _, body, _)) = try_get(addr, "/healthz", None) {
            assert_eq!(body, "ok\n");
            return demo;
        }
        assert!(
            Instant::now() < deadline,
            "liqo-demo on {addr}: /healthz not 200 in 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One GET: (status, content type, body, the local address of the connection).
fn try_get(
    addr: SocketAddr,
    target: &str,
    accept: Option<&str>,
) -> std::io::Result<(u16, String, String, SocketAddr)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    Ok((status, content_type, body.to_owned(), s.local_addr()?))
}

fn get(addr: SocketAddr, target: &str) -> (u16, String, String, SocketAddr) {
    try_get(addr, target, None).unwrap_or_else(|e| panic!("GET {target} on {addr}: {e}"))
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn version_names_the_program() {
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-demo"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    assert_eq!(v.trim(), format!("liqo-demo {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn answers_who_served_calls_across_and_reports_bad_calls() {
    let front = start("front-1", "rome");
    let back = start("back-1", "milan");

    // `/`: the pod's fields, the client as the server saw it (this connection), the count.
    let (status, ctype, body, local) = get(front.addr, "/");
    assert_eq!(
        (status, ctype.as_str()),
        (200, "application/json"),
        "{body}"
    );
    let v = json(&body);
    assert_eq!(v["pod"], "front-1");
    assert_eq!(v["namespace"], "demo");
    assert_eq!(v["node"], "rome-worker");
    assert_eq!(v["cluster"], "rome");
    assert_eq!(v["client"], local.to_string());
    assert!(local.to_string().starts_with("127.0.0.1:"));
    assert_eq!(v["served"], 1, "probes are not counted: {body}");
    let (_, _, body, _) = get(front.addr, "/");
    assert_eq!(json(&body)["served"], 2);

    // The one line of text, by parameter or by Accept.
    let (status, ctype, line, local) = get(front.addr, "/?format=text");
    assert_eq!((status, ctype.as_str()), (200, "text/plain; charset=utf-8"));
    assert_eq!(
        line,
        format!(
            "pod=front-1 namespace=demo node=rome-worker cluster=rome client={local} served=3\n"
        )
    );
    let (_, ctype, line, _) = try_get(front.addr, "/", Some("text/plain")).unwrap();
    assert!(
        ctype.starts_with("text/plain") && line.starts_with("pod=front-1 "),
        "{line}"
    );

    // `/call`: rome calls milan; the back saw the front's outbound connection.
    let url = format!("http://{}/", back.addr);
    let (status, _, body, local) = get(front.addr, &format!("/call?url={url}"));
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["via"]["cluster"], "rome");
    assert_eq!(v["via"]["pod"], "front-1");
    assert_eq!(v["via"]["client"], local.to_string());
    assert_eq!(v["url"], url);
    assert_eq!(v["status"], 200);
    assert_eq!(v["answer"]["cluster"], "milan");
    assert_eq!(v["answer"]["pod"], "back-1");
    assert_eq!(v["answer"]["node"], "milan-worker");
    let back_client = v["answer"]["client"].as_str().unwrap();
    assert!(back_client.starts_with("127.0.0.1:"), "{back_client}");
    assert_ne!(back_client, local.to_string());

    // And back again, the URL percent-encoded and nested: milan → rome → milan.
    let nested = format!("http://{}/call?url=http://{}/", front.addr, back.addr);
    let encoded = nested
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace('?', "%3F");
    let (status, _, body, _) = get(back.addr, &format!("/call?url={encoded}"));
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["via"]["cluster"], "milan");
    assert_eq!(v["answer"]["via"]["cluster"], "rome");
    assert_eq!(v["answer"]["answer"]["cluster"], "milan");

    // A bad URL: 400 naming it; a refused one: 502 naming it and the error.
    let (status, _, body, _) = get(front.addr, "/call?url=ftp://back.demo/");
    assert_eq!(status, 400, "{body}");
    let error = json(&body)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("\"ftp://back.demo/\"") && error.contains("http://"),
        "{error}"
    );
    let (status, _, body, _) = get(front.addr, "/call");
    assert_eq!(status, 400, "{body}");
    let refused = format!("http://127.0.0.1:{}/", free_port());
    let (status, _, body, _) = get(front.addr, &format!("/call?url={refused}"));
    assert_eq!(status, 502, "{body}");
    let v = json(&body);
    assert_eq!(v["url"], refused);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("calling {refused}: cannot connect: ")),
        "{error}"
    );
    assert!(error.to_lowercase().contains("refused"), "{error}");

    // Unknown path, other method.
    assert_eq!(get(front.addr, "/nothing").0, 404);
    let mut s = TcpStream::connect(front.addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 405 "), "{raw}");
}

#[test]
fn sigterm_stops_it_cleanly() {
    let mut demo = start("front-1", "rome");
    let pid = demo.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "liqo-demo still running 15 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert!(
        TcpStream::connect(demo.addr).is_err(),
        "still listening after it stopped"
    );
}
