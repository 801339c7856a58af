//! The peering phase of a ForeignCluster, read from its conditions, and what it drives: the
//! peering ClusterRoles bound to the remote cluster's user in our tenant namespace, and the
//! kinds the CRD replicator copies to the remote cluster (upstream Liqo v0.5's
//! `foreignCluster.GetPeeringPhase`, peering permissions and replicator resources).
//!
//! All pure: the ForeignCluster controller binds and unbinds [`roles`], the replicator watches
//! [`replicated_kinds`].

use std::fmt;

use kube::core::ApiResource;

use crate::{
    api::{
        discovery::{
            ForeignClusterStatus, NetworkingEnabled, PeeringCondition, PeeringConditionStatus,
            PeeringConditionType, ResourceRequest,
        },
        net::NetworkConfig,
        sharing::ResourceOffer,
        virtualkubelet::NamespaceMap,
    },
    conditions,
};

/// The peering phase with a remote cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeeringPhase {
    /// Nothing: not even our identity at the remote cluster.
    None,
    /// We hold an identity at the remote cluster, no direction is active.
    Authenticated,
    /// We consume the remote cluster (`OutgoingPeering` ≠ None).
    Outgoing,
    /// The remote cluster consumes us (`IncomingPeering` ≠ None).
    Incoming,
    /// Both.
    Bidirectional,
}

impl PeeringPhase {
    /// Every phase.
    pub const ALL: [PeeringPhase; 5] = [
        PeeringPhase::None,
        PeeringPhase::Authenticated,
        PeeringPhase::Outgoing,
        PeeringPhase::Incoming,
        PeeringPhase::Bidirectional,
    ];

    /// The phase a ForeignCluster's conditions say: a direction is active when its condition
    /// is anything but `None` (pending and disconnecting included); with none active,
    /// `Authenticated` when `AuthenticationStatus` is `Established`.
    pub fn of(conditions: &[PeeringCondition]) -> Self {
        let active = |t| conditions::status(conditions, t) != PeeringConditionStatus::None;
        let outgoing = active(PeeringConditionType::OutgoingPeering);
        let incoming = active(PeeringConditionType::IncomingPeering);
        let authenticated =
            conditions::status(conditions, PeeringConditionType::AuthenticationStatus)
                == PeeringConditionStatus::Established;
        match (outgoing, incoming) {
            (true, true) => PeeringPhase::Bidirectional,
            (false, true) => PeeringPhase::Incoming,
            (true, false) => PeeringPhase::Outgoing,
            (false, false) if authenticated => PeeringPhase::Authenticated,
            (false, false) => PeeringPhase::None,
        }
    }

    /// The phase of a ForeignCluster's status (no status: `None`).
    pub fn of_status(status: Option<&ForeignClusterStatus>) -> Self {
        status.map_or(PeeringPhase::None, |s| Self::of(&s.peering_conditions))
    }

    /// We consume the remote cluster.
    pub fn outgoing(self) -> bool {
        matches!(self, PeeringPhase::Outgoing | PeeringPhase::Bidirectional)
    }

    /// The remote cluster consumes us.
    pub fn incoming(self) -> bool {
        matches!(self, PeeringPhase::Incoming | PeeringPhase::Bidirectional)
    }

    /// A direction is active (upstream's "established" phase filter).
    pub fn established(self) -> bool {
        self.outgoing() || self.incoming()
    }
}

/// Whether a peering needs a network with the peer: a direction is pending or established,
/// or it is in-band (its authentication and API traffic go through the tunnel, so the network
/// comes before any direction). With neither, the network and the peer's NetworkConfig copy go.
pub fn network_needed(phase: PeeringPhase, in_band: bool) -> bool {
    phase.established() || in_band
}

/// Whether we keep a network with the peer (our NetworkConfig, the TunnelEndpoint): Liqo
/// handles the network (`networkingEnabled` Yes) and the peering [needs one](network_needed).
/// The one definition, for the network manager and (with `in_band` false: an in-band
/// peering's NetworkConfigs are exchanged by liqoctl until a direction is granted) the
/// replicator.
pub fn network_wanted(phase: PeeringPhase, networking: NetworkingEnabled, in_band: bool) -> bool {
    networking == NetworkingEnabled::Yes && network_needed(phase, in_band)
}

impl fmt::Display for PeeringPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            PeeringPhase::None => "None",
            PeeringPhase::Authenticated => "Authenticated",
            PeeringPhase::Outgoing => "Outgoing",
            PeeringPhase::Incoming => "Incoming",
            PeeringPhase::Bidirectional => "Bidirectional",
        })
    }
}

/// A set of peering ClusterRoles: those labelled
/// `auth.liqo.io/remote-peering-permissions=<value>` (chart files
/// `liqo-remote-peering-<value>-ClusterRole.yaml`), each bound in the tenant namespace to the
/// remote cluster's user (its cluster ID) as RoleBinding `liqo-binding-<ClusterRole>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleSet {
    /// What any authenticated peer needs: its ResourceRequest and their status. Bound by
    /// `liqo-auth` when it issues the identity, kept in every phase.
    Basic,
    /// While we consume the peer (Outgoing): it may write ResourceOffers and NetworkConfigs.
    Outgoing,
    /// While the peer consumes us (Incoming): it may write NamespaceMaps and NetworkConfigs.
    Incoming,
}

impl RoleSet {
    /// Every set.
    pub const ALL: [RoleSet; 3] = [RoleSet::Basic, RoleSet::Outgoing, RoleSet::Incoming];

    /// The value of `auth.liqo.io/remote-peering-permissions` that selects its ClusterRoles.
    pub const fn label_value(self) -> &'static str {
        match self {
            RoleSet::Basic => "basic",
            RoleSet::Outgoing => "outgoing",
            RoleSet::Incoming => "incoming",
        }
    }

    /// The chart's ClusterRole of this set (`liqo-remote-peering-<value>`): bound by this
    /// fixed name, so a ClusterRole someone else labels is never bound (and the components'
    /// `bind` right names exactly these).
    pub const fn cluster_role(self) -> &'static str {
        match self {
            RoleSet::Basic => "liqo-remote-peering-basic",
            RoleSet::Outgoing => "liqo-remote-peering-outgoing",
            RoleSet::Incoming => "liqo-remote-peering-incoming",
        }
    }

    /// Whether this set is bound in a phase (unbound otherwise).
    pub fn bound(self, phase: PeeringPhase) -> bool {
        match self {
            RoleSet::Basic => true,
            RoleSet::Outgoing => phase.outgoing(),
            RoleSet::Incoming => phase.incoming(),
        }
    }
}

/// The role sets bound in a phase; the others are unbound.
pub fn roles(phase: PeeringPhase) -> Vec<RoleSet> {
    RoleSet::ALL
        .into_iter()
        .filter(|r| r.bound(phase))
        .collect()
}

/// A kind the CRD replicator copies into the remote cluster's tenant namespace (sources
/// labelled `liqo.io/replication=true`, `liqo.io/remoteID=<peer>`; spec flows to the copy,
/// status back to the source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicatedKind {
    /// The consumer's request (consumer → provider).
    ResourceRequest,
    /// The provider's offer (provider → consumer).
    ResourceOffer,
    /// Each side's network parameters.
    NetworkConfig,
    /// The namespaces a consumer offloads (consumer → provider).
    NamespaceMap,
}

impl ReplicatedKind {
    /// Every kind.
    pub const ALL: [ReplicatedKind; 4] = [
        ReplicatedKind::ResourceRequest,
        ReplicatedKind::ResourceOffer,
        ReplicatedKind::NetworkConfig,
        ReplicatedKind::NamespaceMap,
    ];

    /// Whether the replicator copies this kind in a phase: ResourceRequests once the phase
    /// is not None; ResourceOffers while the peer consumes us; NetworkConfigs while a
    /// direction is active and Liqo handles the network; NamespaceMaps while we consume
    /// the peer.
    pub fn replicated(self, phase: PeeringPhase, networking: NetworkingEnabled) -> bool {
        match self {
            ReplicatedKind::ResourceRequest => phase != PeeringPhase::None,
            ReplicatedKind::ResourceOffer => phase.incoming(),
            ReplicatedKind::NetworkConfig => network_wanted(phase, networking, false),
            ReplicatedKind::NamespaceMap => phase.outgoing(),
        }
    }

    /// Group, version, kind and plural, for the replicator's dynamic clients.
    pub fn api_resource(self) -> ApiResource {
        match self {
            ReplicatedKind::ResourceRequest => ApiResource::erase::<ResourceRequest>(&()),
            ReplicatedKind::ResourceOffer => ApiResource::erase::<ResourceOffer>(&()),
            ReplicatedKind::NetworkConfig => ApiResource::erase::<NetworkConfig>(&()),
            ReplicatedKind::NamespaceMap => ApiResource::erase::<NamespaceMap>(&()),
        }
    }
}

/// The kinds the replicator copies in a phase.
pub fn replicated_kinds(phase: PeeringPhase, networking: NetworkingEnabled) -> Vec<ReplicatedKind> {
    ReplicatedKind::ALL
        .into_iter()
        .filter(|k| k.replicated(phase, networking))
        .collect()
}

#[cfg(test)]
mod tests;
