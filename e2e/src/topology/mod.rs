//! The lab's topology: the file format, its validation, and the resolved address plan.
//!
//! A topology file (YAML) declares the clusters the lab builds on one host: each cluster's
//! CIDRs and its nodes and pods. [`Topology::from_yaml`] parses such a file and validates
//! every rule before anything exists, then resolves it into a plan in which every address is
//! computed: the WAN address of each cluster's gateway node, each node's LAN address, pod
//! slice and bridge address, and each pod's address. Built-in presets ([`Topology::preset`])
//! are YAML texts that go through the same path.
//!
//! This module never does I/O and never touches namespaces or links: it takes text and returns
//! values. The caller reads files and builds the lab from the plan. IPv4 only.
//!
//! Naming: clusters and nodes have a validated [`Name`] (`[a-z][a-z0-9]{0,11}`, no dashes), so
//! that joining names with `-` (namespace `lq-rome-n0-p1`) is unambiguous. Pod names are
//! composed from the node name and the pod index (`n0-p1`) and are plain `String`s.

mod file;
mod name;
mod nodes;
mod plan;
mod presets;
mod rules;
mod validate;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod validate_tests;

pub use name::{Name, NameError};
pub use plan::{Cluster, Node, Pod, Topology};
pub use rules::{MAX_NODES_PER_CLUSTER, MAX_TOTAL_PODS, TopologyError};

impl Topology {
    /// Parses and validates a topology file.
    pub fn from_yaml(text: &str) -> Result<Topology, TopologyError> {
        validate::resolve(file::parse(text)?)
    }

    /// One of the built-in topologies; see [`Topology::preset_names`].
    pub fn preset(name: &str) -> Result<Topology, TopologyError> {
        match presets::yaml(name) {
            Some(text) => Self::from_yaml(text),
            None => Err(liqo_types::field::bad(
                "preset",
                format!(
                    "unknown preset {name:?} (known presets: {})",
                    presets::NAMES.join(", ")
                ),
            )),
        }
    }

    /// Names of the built-in topologies.
    pub fn preset_names() -> &'static [&'static str] {
        presets::NAMES
    }

    /// Serialises the plan back to the file format, with explicit node lists, so that
    /// `Topology::from_yaml(&t.to_yaml()) == Ok(t)` for any validated `t`.
    pub fn to_yaml(&self) -> String {
        file::render(self)
    }
}
