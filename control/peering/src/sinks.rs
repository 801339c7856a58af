//! The small traits the orchestration drives, one per thing a cluster has: its gateway, its
//! overlay agents, its inventory of nodes and its record of peerings (the IPAM is
//! [`crate::ipam::Ipam`]). The lab implements them with files and processes; the controllers
//! will implement them with Kubernetes objects. Waiting (with a timeout) is the sinks' job.

use std::future::Future;

use liqo_types::{ClusterId, GatewayPeer, OverlayNode, PublicKey};

use crate::plan::{ClusterInfo, OverlayPlan, Peerings};

/// An error a sink may return.
pub trait SinkError: std::error::Error + Send + Sync + 'static {}
impl<E: std::error::Error + Send + Sync + 'static> SinkError for E {}

/// A cluster's gateway.
pub trait Gateway: Send {
    /// Why an operation failed.
    type Error: SinkError;

    /// Its WireGuard public key.
    fn public_key(&mut self) -> impl Future<Output = Result<PublicKey, Self::Error>> + Send;

    /// Makes `peers` its whole peer list (it reloads on its own).
    fn write(
        &mut self,
        peers: &[GatewayPeer],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Waits until it runs the last list written and has a session with `peer`.
    fn wait_handshaken(
        &mut self,
        peer: &ClusterId,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Waits until it runs the last list written and no longer has `peer`.
    fn wait_gone(
        &mut self,
        peer: &ClusterId,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Stops it; it removes what it created. An error if it had to be killed.
    fn stop(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Starts it on `node` (its public address follows it) with the last list written, and
    /// waits until it serves.
    fn start(&mut self, node: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// A cluster's overlay agents.
pub trait Overlay: Send {
    /// Why an operation failed.
    type Error: SinkError;

    /// Writes every agent's configuration ([`OverlayPlan::per_node`]).
    fn write(&mut self, plan: &OverlayPlan)
    -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Waits until every agent applied `plan`; what an agent refused or failed to apply is the
    /// error.
    fn wait_applied(
        &mut self,
        plan: &OverlayPlan,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What a cluster is made of.
pub trait Inventory: Send {
    /// Why it could not be read.
    type Error: SinkError;

    /// Its ID, pod CIDR and public endpoint.
    fn cluster(&mut self) -> impl Future<Output = Result<ClusterInfo, Self::Error>> + Send;

    /// Its nodes.
    fn nodes(&mut self) -> impl Future<Output = Result<Vec<OverlayNode>, Self::Error>> + Send;

    /// The node its gateway runs on.
    fn gateway_node(&mut self) -> impl Future<Output = Result<String, Self::Error>> + Send;
}

/// Who a cluster is peered with: recorded state, never read back from a daemon.
pub trait Records: Send {
    /// Why the record could not be read or written.
    type Error: SinkError;

    /// The peerings recorded (none at first).
    fn load(&mut self) -> impl Future<Output = Result<Peerings, Self::Error>> + Send;

    /// Replaces the record (atomically: a reader sees the old one or the new one).
    fn save(&mut self, p: &Peerings) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Everything of one cluster the orchestration drives.
#[derive(Debug)]
pub struct Side<I, G, O, N, R> {
    /// Its IPAM.
    pub ipam: I,
    /// Its gateway.
    pub gateway: G,
    /// Its overlay agents.
    pub overlay: O,
    /// Its inventory.
    pub inventory: N,
    /// Its record of peerings.
    pub records: R,
}
