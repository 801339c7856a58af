//! The lab: whole clusters built out of network namespaces on one host.
//!
//! Every node and every pod is a namespace. A cluster's nodes share a LAN (a bridge inside the
//! cluster's `lan` namespace) and route to each other's pod slices like a host-gateway CNI; each
//! node has a `cni0` bridge its pods hang off. The gateway node (`nodes[0]`) of every cluster also
//! attaches to one WAN segment (a bridge inside the `wan` namespace) with its public address.
//!
//! Everything the lab creates is a namespace named `<prefix>-...`; links, addresses and routes live
//! inside those namespaces, so the root namespace only gains namespace entries, and deleting the
//! namespaces ([`down`]) removes everything, even after a crash. Labs with different prefixes
//! coexist. The lab never sends a packet from the root namespace.

mod build;
pub mod check;
mod names;
pub mod outage;
pub mod overlay;
pub mod peering;
pub mod placement;
pub mod services;
mod state;
pub mod status;

use std::path::PathBuf;

use dataplane::{Netns, NetnsName};

pub use build::up;
pub use names::{Prefix, Target};
pub use peering::{peer, unpeer};
pub use placement::move_gateway;
pub use state::{DownReport, down};

use crate::topology::Topology;

/// What went wrong in the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A lab with this prefix exists already.
    #[error(
        "lab {prefix} is already up ({namespaces} namespaces); run `liqo-lab --prefix {prefix} down` first"
    )]
    AlreadyUp {
        /// The prefix.
        prefix: Prefix,
        /// How many of its namespaces exist.
        namespaces: usize,
    },
    /// No lab with this prefix is up.
    #[error("no lab with prefix {0} is up (no state in {dir}); start one with `liqo-lab --prefix {0} up`", dir = state::STATE_DIR)]
    NotUp(Prefix),
    /// The target of `exec` does not exist.
    #[error("unknown target {target:?}: {why}")]
    BadTarget {
        /// The target as given.
        target: String,
        /// Why it was refused, with the valid choices.
        why: String,
    },
    /// Building a part of the lab failed (everything built so far was removed).
    #[error("building {what}")]
    Build {
        /// The part.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading or writing the lab state failed.
    #[error("lab state {path}")]
    State {
        /// The state file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A namespace operation failed.
    #[error(transparent)]
    Netns(#[from] dataplane::netns::Error),
}

/// A lab that is up: its prefix and its topology.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The prefix of everything it created.
    pub prefix: Prefix,
    /// The plan it was built from.
    pub topology: Topology,
}

impl Lab {
    /// The lab with this prefix, from its state file.
    pub fn load(prefix: &Prefix) -> Result<Lab, LabError> {
        state::load(prefix)
    }

    /// The namespace of a target (`rome/n0`, `rome/n0-p1`, `rome/lan`, `wan`).
    pub fn netns(&self, target: &Target) -> Result<Netns, LabError> {
        Ok(Netns::open(&self.netns_name(target)?)?)
    }

    /// The namespace name of a target, checked against the topology.
    pub fn netns_name(&self, target: &Target) -> Result<NetnsName, LabError> {
        names::resolve(&self.prefix, &self.topology, target)
    }

    /// Namespace name of a pod.
    pub fn pod_netns(&self, cluster: &str, pod: &str) -> NetnsName {
        names::netns(&self.prefix, &[cluster, pod])
    }

    /// Namespace name of a node.
    pub fn node_netns(&self, cluster: &str, node: &str) -> NetnsName {
        names::netns(&self.prefix, &[cluster, node])
    }
}
