//! Fixtures of the gateway's privileged tests: sites (a host namespace running the real
//! `liqo-gateway` and one pod behind it) on a shared WAN bridge. Every namespace carries a
//! per-test prefix and is removed on drop, with every process inside.

#![allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "shared by the gateway's two test binaries (`gateway`, `gateway_load`), each using a part"
)]

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Command, ExitStatus},
    sync::atomic::{AtomicUsize, Ordering},
    thread,
    time::{Duration, Instant},
};

use dataplane::{
    Netlink, Netns,
    link::{LinkKind, LinkSpec},
    netns::require_root,
    supervisor::{Attached, Spec},
};

pub use dataplane::testing::{Spaces, route, wire};

pub mod capture;
pub mod forge;
pub mod hub;
pub mod iperf;
pub mod wggo;

pub const BIN: &str = env!("CARGO_BIN_EXE_liqo-gateway");
/// How long a gateway may take to exit on SIGTERM (it removes what it created).
pub const GRACE: Duration = Duration::from_secs(10);
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A unique prefix for one test's namespaces.
pub fn prefix(tag: &str) -> String {
    require_root();
    format!(
        "gwt{}{tag}{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The WAN: a namespace with a bridge `br0` that sites attach to.
pub async fn wan(spaces: &mut Spaces, prefix: &str) -> Netns {
    let wan = spaces.create(&format!("{prefix}-wan")).await;
    Netlink::connect_in(&wan)
        .unwrap()
        .add_link(&LinkSpec {
            name: "br0".parse().unwrap(),
            kind: LinkKind::Bridge,
            mtu: None,
            controller: None,
            up: true,
        })
        .await
        .unwrap();
    wan
}

/// One cluster's gateway node: a host namespace with a pod (10.200.0.2) behind it.
pub struct Site {
    pub name: String,
    pub host: Netns,
    pub pod: Netns,
    pub gw_ns: String,
    pub dir: PathBuf,
    pub key: String,
    /// The running `liqo-gateway`, SIGKILLed on drop.
    pub child: Option<Attached>,
}

impl Site {
    /// Builds the site and attaches its host to the WAN bridge with `wan_addr`.
    pub async fn new(
        spaces: &mut Spaces,
        prefix: &str,
        name: &str,
        wan: &Netns,
        wan_addr: &str,
    ) -> Site {
        let host = spaces.create(&format!("{prefix}-{name}")).await;
        let pod = spaces.create(&format!("{prefix}-{name}-pod")).await;
        let gw_ns = format!("{prefix}-{name}-gw");
        spaces.adopt(&gw_ns);
        wire(
            &host,
            "p0",
            "10.200.0.1/24",
            None,
            &pod,
            "eth0",
            "10.200.0.2/24",
        )
        .await;
        route(&pod, "0.0.0.0/0", "10.200.0.1").await;
        host.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
            .unwrap()
            .unwrap();
        if !wan_addr.is_empty() {
            wire(wan, name, "", Some("br0"), &host, "wan0", wan_addr).await;
        }
        let dir = std::env::temp_dir().join(format!("{prefix}-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new(BIN)
            .args(["pubkey", "--private-key-file"])
            .arg(dir.join("key"))
            .output()
            .unwrap();
        assert!(out.status.success());
        let key = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Site {
            name: name.into(),
            host,
            pod,
            gw_ns,
            dir,
            key,
            child: None,
        }
    }

    /// The config file.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.yaml")
    }

    /// Writes the configuration (peers given as YAML list items, already indented); returns
    /// the text written.
    pub fn configure(&self, peers: &str, extra: &str) -> String {
        let text = format!(
            "namespace: {}\nprivateKeyFile: {}\nlocalPodCIDR: 10.200.0.0/16\n{extra}peers:{}\n",
            self.gw_ns,
            self.dir.join("key").display(),
            if peers.trim().is_empty() {
                " []".to_owned()
            } else {
                format!("\n{peers}")
            }
        );
        let tmp = self.dir.join("config.yaml.tmp");
        std::fs::write(&tmp, &text).unwrap();
        std::fs::rename(&tmp, self.config_path()).unwrap();
        text
    }

    /// Starts `liqo-gateway run` in the host namespace and waits for its status endpoint.
    pub fn start(&mut self) {
        self.start_with(&[]);
    }

    /// [`Site::start`] with more arguments of `liqo-gateway run`.
    pub fn start_with(&mut self, extra: &[&str]) {
        let child = Spec::new("liqo-gateway", BIN, self.dir.join("gateway.log"))
            .args(["run", "--config"])
            .args([self.config_path()])
            .args(extra.iter().copied())
            .netns(&self.host)
            .truncate_log()
            .kill_on_drop()
            .attached()
            .expect("starting liqo-gateway");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.status_json().is_none() {
            assert!(
                Instant::now() < deadline,
                "gateway {} did not start: {}",
                self.name,
                self.log()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The running gateway's process ID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the gateway runs").pid()
    }

    /// Whether the gateway started last is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .expect("the gateway was started")
            .exited()
            .unwrap()
            .is_none()
    }

    /// The running gateway's resident memory (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {status}"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("gateway.log")).unwrap_or_default()
    }

    /// The gateway's `/status`, if it answers.
    pub fn status_json(&self) -> Option<serde_json::Value> {
        let body = self
            .host
            .run(|| -> Option<String> {
                let mut s = TcpStream::connect("127.0.0.1:9107").ok()?;
                s.write_all(b"GET /status HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
                    .ok()?;
                let mut out = String::new();
                s.read_to_string(&mut out).ok()?;
                Some(out.split_once("\r\n\r\n")?.1.to_owned())
            })
            .ok()??;
        serde_json::from_str(&body).ok()
    }

    /// The gateway's `/status`, typed, if it answers.
    pub fn status(&self) -> Option<gateway::status::Status> {
        serde_json::from_value(self.status_json()?).ok()
    }

    /// Polls the typed status every 10 ms for up to 10 s until `f` holds; panics with the last
    /// status and the log otherwise.
    pub fn wait_status(
        &self,
        what: &str,
        mut f: impl FnMut(&gateway::status::Status) -> bool,
    ) -> gateway::status::Status {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.status();
            if let Some(s) = s.as_ref().filter(|s| f(s)) {
                return s.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: status {s:#?}\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM and waits for the process (SIGKILL after [`GRACE`]); returns how it
    /// exited.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let exit = self
            .child
            .take()?
            .stop(GRACE)
            .expect("stopping the gateway");
        Some(exit.status)
    }

    /// Sends SIGTERM and waits for the process; it must exit cleanly.
    pub fn stop(&mut self) {
        if let Some(status) = self.terminate() {
            assert!(
                status.success(),
                "{} exited with {status}: {}",
                self.name,
                self.log()
            );
        }
    }

    /// Kills the process with SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("killing the gateway");
        }
    }

    /// Peer entry for this site as seen from another: its pods appear there as `remote_view`,
    /// and it sees the other's pods as `local_view`.
    pub fn as_peer(&self, endpoint: Option<&str>, remote_view: &str, local_view: &str) -> String {
        let ep = endpoint
            .map(|e| format!("    endpoint: {e}\n"))
            .unwrap_or_default();
        format!(
            "  - id: {}\n    publicKey: {}\n{ep}    remotePodCIDR: {remote_view}\n    localPodCIDRAtPeer: {local_view}\n",
            self.name, self.key
        )
    }

    /// Whether `ip` answers one ping from the pod.
    pub fn ping(&self, ip: &str) -> bool {
        self.pod
            .command("ping")
            .args(["-c1", "-W2", "-q", ip])
            .output()
            .unwrap()
            .status
            .success()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.kill9();
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("removing {}: {e}", self.dir.display());
        }
    }
}

/// Serves one TCP connection in `server`'s pod on `port`; dials `addr:port` from `client`'s
/// pod; returns the client address the server saw.
pub fn tcp_seen(client: &Site, server: &Site, addr: &str, port: u16) -> String {
    tcp_seen_raw(&client.pod, &server.pod, addr, port)
}

/// Peer `id` in a `/status` document (`Null` if absent).
pub fn peer_status<'a>(status: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    status["peers"]
        .as_array()
        .and_then(|peers| peers.iter().find(|p| p["id"] == id))
        .unwrap_or(&serde_json::Value::Null)
}

/// The counter at `path` in a `/status` document (or one of its parts); panics naming it and
/// showing the document if it is missing.
pub fn counter(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {} in {v:#}", path.join(".")))
}

/// Polls `f` every 100 ms for up to `secs` seconds.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Like [`tcp_seen`] with plain namespaces: serves one connection in `server` on `addr:port`'s
/// port, dials `addr:port` from `client`, returns the client address the server saw.
pub fn tcp_seen_raw(client: &Netns, server: &Netns, addr: &str, port: u16) -> String {
    let listener = server
        .run(move || TcpListener::bind(("0.0.0.0", port)))
        .unwrap()
        .unwrap();
    let serve = thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(peer.ip().to_string().as_bytes()).unwrap();
    });
    let dial = format!("{addr}:{port}");
    let mut c = client
        .run(move || TcpStream::connect(dial))
        .unwrap()
        .unwrap();
    let mut seen = String::new();
    c.read_to_string(&mut seen).unwrap();
    serve.join().unwrap();
    seen
}

/// `n` peer entries (YAML list items) with fresh keys, distinct /24 ranges in 10.1.0.0/14 and no
/// endpoint: peers that can only be called.
pub fn endpointless_peers(n: usize) -> String {
    assert!(n <= 1024, "the ranges hold 1,024 peers");
    (0..n)
        .map(|i| {
            let key = gateway::keys::PrivateKey::generate().unwrap().public();
            format!(
                "  - id: idle-{i}\n    publicKey: {key}\n    remotePodCIDR: 10.{}.{}.0/24\n    localPodCIDRAtPeer: 10.72.0.0/16\n",
                1 + i / 256,
                i % 256
            )
        })
        .collect()
}
