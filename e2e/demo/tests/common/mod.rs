//! What the tests of the `liqo-demo` binary share: an instance started on a free loopback port
//! and polled until `/healthz` answers, killed when dropped; a few-line HTTP client over
//! `std::net` (one request per connection); a temporary directory.

#![allow(dead_code, reason = "each test file uses a part of it")]

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

/// A running instance, killed when dropped (a failed assertion leaves nothing behind).
pub(crate) struct Demo {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Err(e) = self.child.kill().and_then(|()| self.child.wait().map(drop)) {
            eprintln!("stopping liqo-demo: {e}");
        }
    }
}

/// A loopback port nothing listens on now (the kernel's choice, released at once).
pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    l.local_addr().unwrap().port()
}

/// Starts the binary as pod `pod` of `cluster`, and waits until `/healthz` answers 200.
pub(crate) fn start(pod: &str, cluster: &str) -> Demo {
    start_with(pod, cluster, |_| {})
}

/// As [`start`], `configure` adding flags or variables (none of the demo's comes from the
/// test's own environment).
pub(crate) fn start_with(pod: &str, cluster: &str, configure: impl FnOnce(&mut Command)) -> Demo {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_liqo-demo"));
    command
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--cluster-name")
        .arg(cluster)
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", "demo")
        .env("NODE_NAME", format!("{cluster}-worker"))
        .env_remove("CLUSTER_NAME")
        .env_remove("DEMO_DATA_DIR")
        .stdout(Stdio::null());
    configure(&mut command);
    let child = command.spawn().unwrap();
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

/// An answer: its status, content type and `Allow` header (lowercase, empty when absent), its
/// body, and the local address of the connection (the client the server saw).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) allow: String,
    pub(crate) body: String,
    pub(crate) local: SocketAddr,
}

/// One request with an empty body.
pub(crate) fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    accept: Option<&str>,
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n{accept}Content-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix(&format!("{name}: ")).map(str::to_owned)
            })
            .unwrap_or_default()
    };
    Ok(Answer {
        status,
        content_type: header("content-type"),
        allow: header("allow"),
        body: body.to_owned(),
        local: s.local_addr()?,
    })
}

/// One request; a failure to connect or read fails the test.
pub(crate) fn request(addr: SocketAddr, method: &str, target: &str) -> Answer {
    try_request(addr, method, target, None)
        .unwrap_or_else(|e| panic!("{method} {target} on {addr}: {e}"))
}

/// One GET: (status, content type, body, the local address of the connection).
pub(crate) fn try_get(
    addr: SocketAddr,
    target: &str,
    accept: Option<&str>,
) -> std::io::Result<(u16, String, String, SocketAddr)> {
    let a = try_request(addr, "GET", target, accept)?;
    Ok((a.status, a.content_type, a.body, a.local))
}

pub(crate) fn get(addr: SocketAddr, target: &str) -> (u16, String, String, SocketAddr) {
    try_get(addr, target, None).unwrap_or_else(|e| panic!("GET {target} on {addr}: {e}"))
}

pub(crate) fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// A fresh directory under the system's temporary one, removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "liqo-demo-test-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::UNIX_EPOCH
                .elapsed()
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}
