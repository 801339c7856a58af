//! Shared fixtures of the privileged tests: throwaway namespaces with a per-test prefix that are
//! removed (with every process inside) when the guard drops, even when the test panics.

#![allow(
    unreachable_pub,
    reason = "a module of the test binary: `pub` is its API"
)]

use std::{
    process::Output,
    sync::atomic::{AtomicUsize, Ordering},
};

use dataplane::{Netlink, Netns, NetnsName, netns::require_root};

pub mod gateway_nft;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A namespace that is deleted on drop.
pub struct TestNs {
    pub ns: Netns,
}

impl TestNs {
    /// A new namespace named `dpt<pid>-<tag>-<n>`, with `lo` up.
    pub async fn new(tag: &str) -> TestNs {
        require_root();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name: NetnsName = format!("dpt{}-{tag}-{n}", std::process::id())
            .parse()
            .unwrap();
        let ns = Netns::create(&name).unwrap();
        let guard = TestNs { ns };
        guard
            .nl()
            .set_up(&"lo".parse().unwrap(), true)
            .await
            .unwrap();
        guard
    }

    pub fn name(&self) -> &NetnsName {
        self.ns.name()
    }

    pub fn nl(&self) -> Netlink {
        Netlink::connect_in(&self.ns).unwrap()
    }

    /// Runs a program inside and returns its output.
    pub fn sh(&self, program: &str, args: &[&str]) -> Output {
        self.ns.command(program).args(args).output().unwrap()
    }

    /// Whether `ip` answers one ping within 2 s.
    pub fn ping(&self, ip: &str) -> bool {
        self.sh("ping", &["-c1", "-W2", "-q", ip]).status.success()
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let name = self.ns.name();
        if let Err(e) = Netns::purge(name) {
            eprintln!("test cleanup: purging namespace {name}: {e}");
        }
    }
}

/// Connects `a:a_if` to `b:b_if` with a veth pair, both ends up and addressed.
pub async fn wire(a: &TestNs, a_if: &str, a_addr: &str, b: &TestNs, b_if: &str, b_addr: &str) {
    dataplane::testing::wire(&a.ns, a_if, a_addr, None, &b.ns, b_if, b_addr).await;
}

/// Serves one TCP connection on `bind` inside `server`, dials `dial` from inside `client`, and
/// returns the client address the server saw.
pub fn tcp_source_seen(client: &TestNs, server: &TestNs, bind: &str, dial: &str) -> String {
    use std::{
        io::{Read, Write},
        net::{TcpListener, TcpStream},
    };
    let listener = server.ns.run(|| TcpListener::bind(bind)).unwrap().unwrap();
    let serve = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(peer.ip().to_string().as_bytes()).unwrap();
    });
    let mut c = client.ns.run(|| TcpStream::connect(dial)).unwrap().unwrap();
    let mut seen = String::new();
    c.read_to_string(&mut seen).unwrap();
    serve.join().unwrap();
    seen
}
