//! wireguard-go as the other side of our gateway (needs `wireguard-go` and `wg`): a host
//! namespace on the WAN at 198.18.0.2 running it, configured with `wg`, and a pod 10.90.0.2
//! behind it. It reaches our pods at 10.77.0.0/16 (they are not remapped on its side). The
//! process is stopped on drop, also when an assertion fails, and its UAPI socket removed.

use std::{
    io,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use dataplane::{Netlink, Netns, route::RouteSpec, supervisor::Attached, supervisor::Spec};

use super::{Spaces, eventually, route, wire};

/// Panics unless `tool` is on the PATH (naming the Debian packages).
pub fn need(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "this test needs `{tool}` (Debian packages wireguard-go and wireguard-tools; .ci/install installs them)"
    );
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A running wireguard-go.
pub struct WgGo {
    pub host: Netns,
    pub pod: Netns,
    /// Its interface (the UAPI socket directory is shared by all namespaces: a per-test name).
    pub ifname: String,
    /// Its public key (base64).
    pub public: String,
    /// Its log is verbose: every handshake message it sends and receives.
    pub child: Attached,
}

impl WgGo {
    /// Builds the host and its pod under `prefix`, attaches the host to `wan`, and starts
    /// wireguard-go listening on 51840 with a new key (files and log in `dir`), with a route
    /// to our pods' view (10.77.0.0/16) through it. No peer yet.
    pub async fn start(spaces: &mut Spaces, prefix: &str, wan: &Netns, dir: &Path) -> WgGo {
        need("wireguard-go");
        need("wg");
        let host = spaces.create(&format!("{prefix}-wggo")).await;
        let pod = spaces.create(&format!("{prefix}-wggo-pod")).await;
        wire(wan, "wggo", "", Some("br0"), &host, "wan0", "198.18.0.2/24").await;
        wire(
            &host,
            "p0",
            "10.90.0.1/24",
            None,
            &pod,
            "eth0",
            "10.90.0.2/24",
        )
        .await;
        route(&pod, "0.0.0.0/0", "10.90.0.1").await;
        host.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
            .unwrap()
            .unwrap();
        let ifname = format!(
            "wg{}x{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let key = Command::new("wg").arg("genkey").output().unwrap().stdout;
        let key = String::from_utf8(key).unwrap().trim().to_owned();
        let key_file = dir.join("wggo.key");
        std::fs::write(&key_file, &key).unwrap();
        let mut pubkey = Command::new("wg")
            .arg("pubkey")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(pubkey.stdin.as_mut().unwrap(), key.as_bytes()).unwrap();
        let public = String::from_utf8(pubkey.wait_with_output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_owned();
        let child = Spec::new("wireguard-go", "wireguard-go", dir.join("wireguard-go.log"))
            .args(["-f", &ifname])
            // Handshakes and keepalives are logged, not data packets.
            .env("LOG_LEVEL", "verbose")
            .netns(&host)
            .kill_on_drop()
            .attached()
            .expect("starting wireguard-go");
        assert!(
            eventually(5, || Path::new(&format!(
                "/var/run/wireguard/{ifname}.sock"
            ))
            .exists()),
            "wireguard-go did not start"
        );
        let go = WgGo {
            host,
            pod,
            ifname,
            public,
            child,
        };
        go.wg(&[
            "set",
            &go.ifname,
            "listen-port",
            "51840",
            "private-key",
            key_file.to_str().unwrap(),
        ]);
        let nl = Netlink::connect_in(&go.host).unwrap();
        let dev = go.ifname.parse().unwrap();
        nl.set_mtu(&dev, 1420).await.unwrap();
        nl.set_up(&dev, true).await.unwrap();
        nl.add_route(&RouteSpec {
            dev: Some(go.ifname.parse().unwrap()),
            ..RouteSpec::to("10.77.0.0/16".parse().unwrap())
        })
        .await
        .unwrap();
        go
    }

    /// The end of its log, and what `wg show` says of its interface.
    pub fn log(&self) -> String {
        let log = self.child.tail(200);
        let show = self
            .host
            .command("wg")
            .args(["show", &self.ifname])
            .output();
        let show = show.map_or_else(
            |e| format!("(wg show: {e})"),
            |o| String::from_utf8_lossy(&o.stdout).into_owned(),
        );
        format!("wireguard-go's log:\n{log}\nwg show:\n{show}")
    }

    /// Runs `wg` in its namespace; panics with its stderr if it fails. Returns its stdout.
    pub fn wg(&self, args: &[&str]) -> String {
        let out = self.host.command("wg").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "wg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Adds (or updates) the peer `public` at our gateway's address (198.18.0.1:51840), with our
    /// pods' view as its allowed IPs and a keepalive of 5 s (a new peer is called at once).
    pub fn add_peer(&self, public: &str) {
        self.wg(&[
            "set",
            &self.ifname,
            "peer",
            public,
            "endpoint",
            "198.18.0.1:51840",
            "allowed-ips",
            "10.77.0.0/16",
            "persistent-keepalive",
            "5",
        ]);
    }

    /// Removes the peer `public`.
    pub fn remove_peer(&self, public: &str) {
        self.wg(&["set", &self.ifname, "peer", public, "remove"]);
    }

    /// The Unix time of the latest handshake with `public` (0: never), if it is a peer.
    pub fn latest_handshake(&self, public: &str) -> Option<u64> {
        self.wg(&["show", &self.ifname, "latest-handshakes"])
            .lines()
            .find_map(|l| l.strip_prefix(public))
            .and_then(|t| t.trim().parse().ok())
    }

    /// Whether `ip` answers one ping from its pod within `wait_secs` seconds.
    pub fn ping(&self, ip: &str, wait_secs: u32) -> bool {
        self.pod
            .command("ping")
            .args(["-c1", "-q", "-W", &wait_secs.to_string(), ip])
            .output()
            .unwrap()
            .status
            .success()
    }
}

/// The UAPI socket of wireguard-go's interface `ifname`.
fn socket(ifname: &str) -> PathBuf {
    PathBuf::from(format!("/var/run/wireguard/{ifname}.sock"))
}

impl Drop for WgGo {
    fn drop(&mut self) {
        // SIGTERM first (it removes its socket itself); a process killed (here or by the test)
        // leaves the socket behind, removed below.
        if let Err(e) = self.child.stop(Duration::from_secs(2)) {
            eprintln!("stopping wireguard-go: {e}");
        }
        match std::fs::remove_file(socket(&self.ifname)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("removing the socket of {}: {e}", self.ifname),
        }
    }
}
