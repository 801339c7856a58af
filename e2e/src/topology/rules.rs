//! What the validation rules share ([`super::validate`] and [`super::nodes`]): the limits, the
//! error a broken rule is ([`TopologyError`]), and the parsers of a name or CIDR field that
//! name the field on error.

use ipnet::Ipv4Net;

use super::name::{Name, NameError};

/// Largest number of nodes one cluster may declare.
pub const MAX_NODES_PER_CLUSTER: usize = 64;

/// Largest number of pods the whole topology may declare (each pod is a namespace on this host).
pub const MAX_TOTAL_PODS: usize = 512;

/// A topology that cannot be parsed or violates a rule: the shared field-path error.
///
/// `field` is the path of the offending field in the file format (`clusters[1].nodes[0].podSlice`,
/// `wan.cidr`); YAML syntax errors use `<file>`, an unknown preset uses `preset`.
pub type TopologyError = liqo_types::FieldError;

/// Parses a cluster or node name; the error names `field`.
pub(super) fn parse_name(field: &str, text: &str) -> Result<Name, TopologyError> {
    text.parse()
        .map_err(|err: NameError| liqo_types::field::bad(field, err.to_string()))
}

/// Parses an IPv4 CIDR without host bits ([`liqo_types::Cidr`]), naming `field` on error.
pub(super) fn parse_cidr(field: &str, text: &str) -> Result<Ipv4Net, TopologyError> {
    liqo_types::field::parse::<liqo_types::Cidr>(field, text).map(|c| c.net())
}
