//! Fixtures of the overlay's privileged tests: namespaces under a per-test prefix, the agent
//! (the real `liqo-overlay`) started and stopped through [`dataplane::supervisor`], its typed
//! `/status`, and the test's config directory, removed even when the test fails.

#![allow(
    unreachable_pub,
    reason = "a module of the test binary: `pub` is its API"
)]

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
    thread,
    time::{Duration, Instant},
};

use dataplane::{
    Netlink, Netns,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    netns::require_root,
    supervisor::{Attached, Spec},
    testing::{Spaces, route, wire},
};
use overlay::status::Status;

pub const BIN: &str = env!("CARGO_BIN_EXE_liqo-overlay");
/// How long an agent may take to exit on SIGTERM (it removes what it created).
pub const GRACE: Duration = Duration::from_secs(10);
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A unique prefix for one test's namespaces: `ov<tag><pid><n>`.
pub fn prefix(tag: &str) -> String {
    require_root();
    format!(
        "ov{tag}{}{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A namespace with `lo` up and forwarding on, removed on drop.
pub async fn add(s: &mut Spaces, name: String) -> Netns {
    let ns = s.create(&name).await;
    ns.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    ns
}

/// The LAN: `<prefix>-lan` with a bridge `br0` that nodes attach to.
pub async fn lan(s: &mut Spaces, prefix: &str) -> Netns {
    let lan = add(s, format!("{prefix}-lan")).await;
    Netlink::connect_in(&lan)
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
    lan
}

/// Node `n<i>`: `<prefix>-n<i>` on the LAN's bridge as 172.18.0.<i+1>/24 (its `eth0`).
pub async fn node(s: &mut Spaces, prefix: &str, lan: &Netns, i: usize) -> Netns {
    let n = add(s, format!("{prefix}-n{i}")).await;
    wire(
        lan,
        &format!("n{i}"),
        "",
        Some("br0"),
        &n,
        "eth0",
        &format!("172.18.0.{}/24", i + 1),
    )
    .await;
    n
}

/// A stand-in for the remote cluster behind `gateway_node`: `<prefix>-remote`, answering on
/// 10.71.0.2, which the gateway node routes 10.71.0.0/16 to.
pub async fn remote(s: &mut Spaces, prefix: &str, gateway_node: &Netns) {
    let remote = add(s, format!("{prefix}-remote")).await;
    wire(
        gateway_node,
        "liqo.host", // the gateway's host-side link, which the overlay expects (gatewayInterface)
        "169.254.1.1/30",
        None,
        &remote,
        "eth0",
        "169.254.1.2/30",
    )
    .await;
    Netlink::connect_in(&remote)
        .unwrap()
        .add_address(&AddressSpec {
            link: "eth0".parse().unwrap(),
            addr: "10.71.0.2/32".parse().unwrap(),
        })
        .await
        .unwrap();
    route(&remote, "0.0.0.0/0", "169.254.1.1").await;
    route(gateway_node, "10.71.0.0/16", "169.254.1.2").await;
}

/// Writes `text` to `path` atomically (the agent never reads half a file).
pub fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Polls `f` every 50 ms for up to `secs` seconds.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The agent's typed `/status` in `ns`, if it answers.
pub fn status(ns: &Netns) -> Option<Status> {
    let body = ns
        .run(|| liqo_daemon::localhttp::get("127.0.0.1:9108".parse().unwrap(), "/status"))
        .unwrap()
        .ok()?;
    Some(serde_json::from_str(&body).expect("/status decodes as overlay::status::Status"))
}

/// Polls the status every 10 ms for up to 10 s until `f` holds.
pub fn wait_status(ns: &Netns, what: &str, mut f: impl FnMut(&Status) -> bool) -> Status {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let s = status(ns);
        if let Some(s) = s.as_ref().filter(|s| f(s)) {
            return s.clone();
        }
        assert!(Instant::now() < end, "{what}: {s:#?}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// An agent (`liqo-overlay run --config <config>`) in a node's namespace, its output in a fresh
/// log; SIGKILLed on drop if the test did not stop it.
pub struct Agent(Attached);

impl Agent {
    pub fn start(ns: &Netns, config: &Path, log: &Path) -> Agent {
        let child = Spec::new("liqo-overlay", BIN, log)
            .args(["run", "--config"])
            .args([config])
            .netns(ns)
            .truncate_log()
            .kill_on_drop()
            .attached()
            .expect("starting liqo-overlay");
        Agent(child)
    }

    /// SIGTERM; the agent must exit cleanly within [`GRACE`].
    pub fn stop(&mut self) {
        let exit = self.0.stop(GRACE).expect("stopping liqo-overlay");
        let killed = if exit.killed {
            " (SIGKILLed: no exit within the grace period)"
        } else {
            ""
        };
        assert!(
            exit.status.success(),
            "{}{killed}:\n    {}",
            exit.status,
            self.0.tail(40)
        );
    }

    /// SIGKILL, reaped.
    pub fn kill9(&mut self) {
        self.0.kill().expect("killing liqo-overlay");
    }
}

/// The test's config directory, removed even when the test fails.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}
