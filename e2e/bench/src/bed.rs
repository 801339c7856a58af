//! The test bed: four namespaces in a line, podA - gwA - gwB - podB, built with [`dataplane`],
//! and everything needed to change the gateway leg's routes and read counters. Dropping the bed
//! removes everything the bench created (also on error and on panic).

use std::{
    fs::{self, File},
    io,
    net::Ipv4Addr,
    os::unix::fs::DirBuilderExt,
    path::PathBuf,
};

use dataplane::{
    IfName, Netlink, Netns,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    netlink,
    route::RouteSpec,
    sysctl,
};
use ipnet::{IpNet, Ipv4Net};
use nix::{
    errno::Errno,
    fcntl::{Flock, FlockArg},
};

pub(crate) use super::names::{Names, Node, cleanup};
use super::names::{cleanup_failed, remove_file};
use super::{BenchError, names::WG_SOCKET_DIR, parse};
use e2e::lab::Prefix;

/// podA's network.
pub(crate) const POD_A_NET: &str = "10.201.1.0/24";
/// podB's network.
pub(crate) const POD_B_NET: &str = "10.201.2.0/24";
/// podA's address (iperf3 client).
pub(crate) const POD_A: Ipv4Addr = Ipv4Addr::new(10, 201, 1, 2);
/// podB's address (iperf3 server).
pub(crate) const POD_B: Ipv4Addr = Ipv4Addr::new(10, 201, 2, 2);
/// gwA's address on podA's network.
const GW_A_IN: Ipv4Addr = Ipv4Addr::new(10, 201, 1, 1);
/// gwB's address on podB's network.
const GW_B_IN: Ipv4Addr = Ipv4Addr::new(10, 201, 2, 1);
/// gwA's underlay address.
pub(crate) const GW_A_UNDERLAY: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// gwB's underlay address.
pub(crate) const GW_B_UNDERLAY: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// The WireGuard interfaces' own addresses (a /30 each side).
pub(crate) const TUN_A: Ipv4Addr = Ipv4Addr::new(10, 201, 9, 1);
/// See [`TUN_A`].
pub(crate) const TUN_B: Ipv4Addr = Ipv4Addr::new(10, 201, 9, 2);
/// gwA's underlay veth, whose byte counters measure the packets moved.
pub(crate) const UNDERLAY_A: &str = "wanA";

fn step<E: std::error::Error + 'static>(what: impl Into<String>) -> impl FnOnce(E) -> BenchError {
    let what = what.into();
    move |e| BenchError::step(what, &e)
}

fn ifname(s: &str) -> IfName {
    s.parse().expect("constant interface names are valid")
}

fn net(s: &str) -> Ipv4Net {
    s.parse().expect("constant networks are valid")
}

/// The four namespaces, their netlink connections, and the lock that keeps a second bench with
/// the same prefix out.
pub(crate) struct Bed {
    pub(crate) names: Names,
    nodes: Vec<(Netns, Netlink)>,
    lock: Option<Flock<File>>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.nodes.clear();
        cleanup(&self.names);
        if self.lock.take().is_some() {
            remove_file(&self.names.lock());
        }
    }
}

impl Bed {
    /// Takes the lock, removes what a crashed run left, and builds the four namespaces.
    pub(crate) async fn build(prefix: Prefix) -> Result<Bed, BenchError> {
        let names = Names { prefix };
        let dir = PathBuf::from("/run/liqo-lab");
        fs::create_dir_all(&dir).map_err(step(format!("creating {}", dir.display())))?;
        let file = File::create(names.lock()).map_err(step("creating the bench lock"))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| BenchError::Busy(names.prefix.clone(), names.lock()))?;
        let mut bed = Bed {
            names,
            nodes: Vec::new(),
            lock: Some(lock),
        };
        let stale = cleanup(&bed.names);
        if stale > 0 {
            eprintln!("bench: removed {stale} namespaces left by an earlier run");
        }
        fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(bed.names.run_dir())
            .map_err(step("creating the run directory"))?;
        fs::create_dir_all(WG_SOCKET_DIR).map_err(step(format!("creating {WG_SOCKET_DIR}")))?;
        for n in Node::ALL {
            let name = bed.names.netns(n);
            let ns = Netns::create(&name)?;
            let nl = Netlink::connect_in(&ns).map_err(step(format!("netlink in {name}")))?;
            nl.set_up(&ifname("lo"), true)
                .await
                .map_err(step(format!("lo in {name}")))?;
            bed.nodes.push((ns, nl));
        }
        bed.wire(Node::PodA, "eth0", POD_A, 24, Node::GwA, "pod0", GW_A_IN)
            .await?;
        bed.wire(
            Node::GwA,
            UNDERLAY_A,
            GW_A_UNDERLAY,
            30,
            Node::GwB,
            "wanB",
            GW_B_UNDERLAY,
        )
        .await?;
        bed.wire(Node::PodB, "eth0", POD_B, 24, Node::GwB, "pod0", GW_B_IN)
            .await?;
        for gw in [Node::GwA, Node::GwB] {
            bed.ns(gw)
                .run(|| sysctl::set("net.ipv4.ip_forward", "1"))?
                .map_err(step(format!("ip_forward in {}", bed.names.netns(gw))))?;
        }
        bed.pod_routes(None).await?;
        Ok(bed)
    }

    pub(crate) fn ns(&self, n: Node) -> &Netns {
        &self.nodes[n as usize].0
    }

    pub(crate) fn nl(&self, n: Node) -> &Netlink {
        &self.nodes[n as usize].1
    }

    /// A veth `a_if` in `a` (address `a_ip/len`) to `b_if` in `b` (`b_ip/len`), both up.
    #[expect(
        clippy::too_many_arguments,
        reason = "both ends of a veth, spelled out"
    )]
    async fn wire(
        &self,
        a: Node,
        a_if: &str,
        a_ip: Ipv4Addr,
        len: u8,
        b: Node,
        b_if: &str,
        b_ip: Ipv4Addr,
    ) -> Result<(), BenchError> {
        let what = format!("veth {}/{a_if} - {}/{b_if}", a.suffix(), b.suffix());
        let spec = LinkSpec {
            name: ifname(a_if),
            kind: LinkKind::Veth {
                peer: ifname(b_if),
                peer_netns: Some(self.names.netns(b)),
            },
            mtu: None,
            controller: None,
            up: true,
        };
        self.nl(a).add_link(&spec).await.map_err(step(&what))?;
        self.nl(b)
            .set_up(&ifname(b_if), true)
            .await
            .map_err(step(&what))?;
        for (n, i, ip) in [(a, a_if, a_ip), (b, b_if, b_ip)] {
            let addr = Ipv4Net::new(ip, len).expect("valid prefix length");
            self.nl(n)
                .add_address(&AddressSpec {
                    link: ifname(i),
                    addr: IpNet::V4(addr),
                })
                .await
                .map_err(step(&what))?;
        }
        Ok(())
    }

    /// The pods' default routes, with the tunnel MTU when a tunnel is measured (so TCP starts
    /// with the right MSS), then every route cache flushed (path-MTU exceptions included).
    pub(crate) async fn pod_routes(&self, mtu: Option<u32>) -> Result<(), BenchError> {
        for (pod, via) in [(Node::PodA, GW_A_IN), (Node::PodB, GW_B_IN)] {
            let spec = RouteSpec {
                via: Some(via.into()),
                mtu,
                ..RouteSpec::to(IpNet::V4(net("0.0.0.0/0")))
            };
            self.nl(pod)
                .replace_route(&spec)
                .await
                .map_err(step(format!("default route in {}", pod.suffix())))?;
        }
        for n in Node::ALL {
            self.ns(n)
                .run(|| sysctl::set("net.ipv4.route.flush", "1"))?
                .map_err(step(format!("flushing the route cache in {}", n.suffix())))?;
        }
        Ok(())
    }

    /// The routes of the gateway leg: each gateway's route to the other side's pods, through
    /// the underlay (`plain`) or a WireGuard interface.
    pub(crate) fn leg_routes(&self, tunnel: bool) -> [(Node, RouteSpec); 2] {
        let route = |side_a: bool| {
            let (dst, via) = if side_a {
                (POD_B_NET, GW_B_UNDERLAY)
            } else {
                (POD_A_NET, GW_A_UNDERLAY)
            };
            let base = RouteSpec::to(IpNet::V4(net(dst)));
            let spec = if tunnel {
                RouteSpec {
                    dev: Some(self.names.wg_if(side_a)),
                    ..base
                }
            } else {
                RouteSpec {
                    via: Some(via.into()),
                    ..base
                }
            };
            (Node::gw(side_a), spec)
        };
        [route(true), route(false)]
    }

    /// Installs the leg's routes.
    pub(crate) async fn add_leg_routes(&self, tunnel: bool) -> Result<(), BenchError> {
        for (n, r) in self.leg_routes(tunnel) {
            self.nl(n)
                .replace_route(&r)
                .await
                .map_err(step(format!("route {r} in {}", n.suffix())))?;
        }
        Ok(())
    }

    /// Removes the leg's routes if they are still there (a tunnel's go with its interface).
    pub(crate) async fn remove_leg_routes(&self, tunnel: bool) {
        for (n, r) in self.leg_routes(tunnel) {
            match self.nl(n).delete_route(&r).await {
                Ok(()) => {}
                // Already gone: ESRCH for the route, or its interface went and took it along.
                Err(e)
                    if e.errno() == Some(Errno::ESRCH as i32)
                        || matches!(e, netlink::Error::NoSuchLink(_)) => {}
                Err(e) => cleanup_failed(format_args!("removing route {r} in {}", n.suffix()), &e),
            }
        }
    }

    /// Received + transmitted bytes of gwA's underlay veth.
    pub(crate) fn underlay_bytes(&self) -> Result<u64, BenchError> {
        let text = self
            .ns(Node::GwA)
            .run(|| fs::read_to_string("/proc/thread-self/net/dev"))?
            .map_err(step("reading gwA's /proc/net/dev"))?;
        let (rx, tx) = parse::net_dev_bytes(&text, UNDERLAY_A)
            .map_err(|e| BenchError::step("gwA's underlay counters", &e))?;
        Ok(rx + tx)
    }

    /// Whether something listens on `addr:port` (TCP) in `n`.
    pub(crate) fn listening(&self, n: Node, addr: Ipv4Addr, port: u16) -> bool {
        self.ns(n)
            .run(|| fs::read_to_string("/proc/thread-self/net/tcp"))
            .ok()
            .and_then(|r: io::Result<String>| r.ok())
            .is_some_and(|t| parse::tcp_listening(&t, addr, port))
    }
}
