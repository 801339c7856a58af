//! In-memory sides for the tests: the real in-memory IPAM and fake gateway, overlay,
//! inventory and record store, each of which fails on demand at a named point: before the
//! call takes effect, or after (it took effect, then an error is returned, as when an answer is
//! lost).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use liqo_types::{Cidr, ClusterId, GatewayPeer, OverlayNode, PublicKey};

use crate::{
    ipam::{Ipam, IpamPeer, Ranges},
    plan::{ClusterInfo, OverlayPlan, Peerings},
    sinks::{Gateway, Inventory, Overlay, Records, Side},
};

/// A failure injected by a test.
#[derive(Debug, thiserror::Error)]
#[error("injected failure at {0}")]
pub(crate) struct Injected(pub(crate) String);

/// When an injected failure fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum When {
    /// Before the call takes effect: nothing changed.
    Before,
    /// After it took effect: the change happened, then the error (an answer lost).
    After,
}

/// Where a side fails next: a point name, when, and how many more times.
#[derive(Debug, Clone, Default)]
pub(crate) struct Faults(Arc<Mutex<BTreeMap<(&'static str, When), usize>>>);

impl Faults {
    /// Fail the next `times` calls at `point`, before they take effect.
    pub(crate) fn set(&self, point: &'static str, times: usize) {
        self.set_when(When::Before, point, times);
    }

    /// Fail the next `times` calls at `point`, `when`.
    pub(crate) fn set_when(&self, when: When, point: &'static str, times: usize) {
        self.0.lock().unwrap().insert((point, when), times);
    }

    fn check(&self, point: &'static str, when: When) -> Result<(), Injected> {
        let mut m = self.0.lock().unwrap();
        match m.get_mut(&(point, when)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Err(Injected(match when {
                    When::Before => point.into(),
                    When::After => format!("{point} (after it took effect)"),
                }))
            }
            _ => Ok(()),
        }
    }

    fn fire(&self, point: &'static str) -> Result<(), Injected> {
        self.check(point, When::Before)
    }

    fn after(&self, point: &'static str) -> Result<(), Injected> {
        self.check(point, When::After)
    }
}

/// Either side's failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FakeError {
    #[error(transparent)]
    Injected(#[from] Injected),
    #[error(transparent)]
    Ipam(#[from] ::ipam::Error),
    #[error("{0}")]
    Other(String),
}

/// The in-memory IPAM, with the calls that changed it (in order) and, like the `liqo-ipam`
/// service, optionally no way to forget a peer's view.
pub(crate) struct FaultyIpam {
    pub(crate) inner: ::ipam::Ipam,
    pub(crate) changes: Vec<&'static str>,
    pub(crate) can_clear: bool,
    faults: Faults,
}

impl FaultyIpam {
    /// Runs the change `point` with its faults, logged when it took effect.
    fn change<T>(
        &mut self,
        point: &'static str,
        f: impl FnOnce(&mut ::ipam::Ipam) -> Result<T, ::ipam::Error>,
    ) -> Result<T, FakeError> {
        self.faults.fire(point)?;
        let out = f(&mut self.inner)?;
        self.changes.push(point);
        self.faults.after(point)?;
        Ok(out)
    }
}

impl Ipam for FaultyIpam {
    type Error = FakeError;

    async fn external_cidr(&mut self) -> Result<Cidr, FakeError> {
        self.faults.fire("external_cidr")?;
        let c = Ipam::external_cidr(&mut self.inner).await?;
        self.faults.after("external_cidr")?;
        Ok(c)
    }

    async fn peer(&mut self, p: &ClusterId) -> Result<Option<IpamPeer>, FakeError> {
        self.faults.fire("ipam_peer")?;
        let held = Ipam::peer(&mut self.inner, p).await?;
        self.faults.after("ipam_peer")?;
        Ok(held)
    }

    async fn remap(&mut self, p: &ClusterId, a: Ranges) -> Result<Ranges, FakeError> {
        let (pods, ext) = self.change("remap", |i| i.acquire(p, a.pods.net(), a.external.net()))?;
        Ok(Ranges {
            pods: Cidr::new(pods).unwrap(),
            external: Cidr::new(ext).unwrap(),
        })
    }

    async fn set_peer_view(&mut self, p: &ClusterId, v: Ranges) -> Result<(), FakeError> {
        self.change("set_peer_view", |i| {
            i.set_peer_view(p, v.pods.net(), v.external.net())
        })
    }

    async fn clear_peer_view(&mut self, p: &ClusterId) -> Result<bool, FakeError> {
        if !self.can_clear {
            return Ok(false);
        }
        self.faults.fire("clear_peer_view")?;
        let cleared = Ipam::clear_peer_view(&mut self.inner, p).await?;
        self.changes.push("clear_peer_view");
        self.faults.after("clear_peer_view")?;
        Ok(cleared)
    }

    async fn release(&mut self, p: &ClusterId) -> Result<(), FakeError> {
        self.change("release", |i| i.release(p).map(drop))
    }
}

/// A gateway: its list, where it runs (shared with the inventory), whether it runs.
pub(crate) struct FakeGateway {
    key: PublicKey,
    pub(crate) peers: Vec<GatewayPeer>,
    pub(crate) node: Arc<Mutex<String>>,
    pub(crate) running: bool,
    faults: Faults,
}

impl Gateway for FakeGateway {
    type Error = FakeError;

    async fn public_key(&mut self) -> Result<PublicKey, FakeError> {
        self.faults.fire("public_key")?;
        self.faults.after("public_key")?;
        Ok(self.key)
    }

    async fn write(&mut self, peers: &[GatewayPeer]) -> Result<(), FakeError> {
        self.faults.fire("write_gateway")?;
        self.peers = peers.to_vec();
        self.faults.after("write_gateway")?;
        Ok(())
    }

    async fn wait_handshaken(&mut self, peer: &ClusterId) -> Result<(), FakeError> {
        self.faults.fire("handshake")?;
        if self.running && self.peers.iter().any(|p| &p.id == peer) {
            Ok(self.faults.after("handshake")?)
        } else {
            Err(FakeError::Other(format!("no session with {peer}")))
        }
    }

    async fn wait_gone(&mut self, peer: &ClusterId) -> Result<(), FakeError> {
        self.faults.fire("gone")?;
        if self.peers.iter().any(|p| &p.id == peer) {
            Err(FakeError::Other(format!("{peer} still there")))
        } else {
            Ok(self.faults.after("gone")?)
        }
    }

    async fn stop(&mut self) -> Result<(), FakeError> {
        self.faults.fire("stop")?;
        self.running = false;
        Ok(self.faults.after("stop")?)
    }

    async fn start(&mut self, node: &str) -> Result<(), FakeError> {
        self.faults.fire("start")?;
        *self.node.lock().unwrap() = node.into();
        self.running = true;
        Ok(self.faults.after("start")?)
    }
}

/// The overlay agents: what was written and what they applied.
#[derive(Default)]
pub(crate) struct FakeOverlay {
    pub(crate) written: Option<OverlayPlan>,
    pub(crate) applied: Option<OverlayPlan>,
    faults: Faults,
}

impl Overlay for FakeOverlay {
    type Error = FakeError;

    async fn write(&mut self, plan: &OverlayPlan) -> Result<(), FakeError> {
        self.faults.fire("write_overlay")?;
        self.written = Some(plan.clone());
        Ok(self.faults.after("write_overlay")?)
    }

    async fn wait_applied(&mut self, plan: &OverlayPlan) -> Result<(), FakeError> {
        self.faults.fire("apply_overlay")?;
        if self.written.as_ref() != Some(plan) {
            return Err(FakeError::Other("the agents run another plan".into()));
        }
        self.applied = self.written.clone();
        Ok(self.faults.after("apply_overlay")?)
    }
}

pub(crate) struct FakeInventory {
    info: ClusterInfo,
    nodes: Vec<OverlayNode>,
    gateway: Arc<Mutex<String>>,
    faults: Faults,
}

impl Inventory for FakeInventory {
    type Error = FakeError;

    async fn cluster(&mut self) -> Result<ClusterInfo, FakeError> {
        self.faults.fire("cluster")?;
        self.faults.after("cluster")?;
        Ok(self.info.clone())
    }

    async fn nodes(&mut self) -> Result<Vec<OverlayNode>, FakeError> {
        self.faults.fire("nodes")?;
        self.faults.after("nodes")?;
        Ok(self.nodes.clone())
    }

    async fn gateway_node(&mut self) -> Result<String, FakeError> {
        self.faults.fire("gateway_node")?;
        self.faults.after("gateway_node")?;
        Ok(self.gateway.lock().unwrap().clone())
    }
}

#[derive(Default)]
pub(crate) struct FakeRecords {
    pub(crate) peerings: Peerings,
    faults: Faults,
}

impl Records for FakeRecords {
    type Error = FakeError;

    async fn load(&mut self) -> Result<Peerings, FakeError> {
        self.faults.fire("load")?;
        self.faults.after("load")?;
        Ok(self.peerings.clone())
    }

    async fn save(&mut self, p: &Peerings) -> Result<(), FakeError> {
        self.faults.fire("save")?;
        self.peerings = p.clone();
        Ok(self.faults.after("save")?)
    }
}

pub(crate) type FakeSide = Side<FaultyIpam, FakeGateway, FakeOverlay, FakeInventory, FakeRecords>;

/// A cluster `name` with pod CIDR 10.200.0.0/16 (like every other), `nodes` nodes, its gateway
/// on `n0`, reachable at `endpoint` (`None`: behind NAT), and `reserved` subnets in its IPAM.
pub(crate) fn side(
    name: &str,
    key: u8,
    endpoint: Option<SocketAddr>,
    reserved: &[&str],
) -> (FakeSide, Faults) {
    let faults = Faults::default();
    let pod: Cidr = "10.200.0.0/16".parse().unwrap();
    let mut cfg = ::ipam::Config::new(pod.net(), "10.96.0.0/12".parse().unwrap());
    cfg.reserved = reserved.iter().map(|r| r.parse().unwrap()).collect();
    let nodes = (0..3u8)
        .map(|i| OverlayNode {
            name: format!("n{i}"),
            address: format!("172.18.0.{}", i + 1).parse().unwrap(),
            pod_cidr: format!("10.200.{i}.0/24").parse().unwrap(),
        })
        .collect();
    let gateway_node = Arc::new(Mutex::new("n0".to_owned()));
    let side = Side {
        ipam: FaultyIpam {
            inner: ::ipam::Ipam::new(cfg).unwrap(),
            changes: Vec::new(),
            can_clear: true,
            faults: faults.clone(),
        },
        gateway: FakeGateway {
            key: PublicKey([key; 32]),
            peers: Vec::new(),
            node: Arc::clone(&gateway_node),
            running: true,
            faults: faults.clone(),
        },
        overlay: FakeOverlay {
            faults: faults.clone(),
            ..Default::default()
        },
        inventory: FakeInventory {
            info: ClusterInfo {
                id: name.parse().unwrap(),
                pod_cidr: pod,
                endpoint,
            },
            nodes,
            gateway: gateway_node,
            faults: faults.clone(),
        },
        records: FakeRecords {
            faults: faults.clone(),
            ..Default::default()
        },
    };
    (side, faults)
}

/// Everything observable of a side, to compare before and after a rolled-back operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    ipam_peers: Vec<::ipam::Peer>,
    pool_usage: Vec<(ipnet::Ipv4Net, u64, u64)>,
    gateway: Vec<GatewayPeer>,
    gateway_node: String,
    running: bool,
    overlay: Option<OverlayPlan>,
    records: Peerings,
}

pub(crate) fn snapshot(s: &FakeSide) -> Snapshot {
    Snapshot {
        ipam_peers: s.ipam.inner.peers().cloned().collect(),
        pool_usage: s.ipam.inner.pool_usage(),
        gateway: s.gateway.peers.clone(),
        gateway_node: s.gateway.node.lock().unwrap().clone(),
        running: s.gateway.running,
        overlay: s.overlay.applied.clone(),
        records: s.records.peerings.clone(),
    }
}
