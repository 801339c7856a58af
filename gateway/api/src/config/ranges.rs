//! The range checks every CIDR field of the file shares: a usable range, and overlap.

use ipnet::Ipv4Net;
use liqo_types::{
    Cidr,
    field::{FieldError as ConfigError, bad},
};

/// Whether `a` and `b` share addresses (one contains the other).
pub(super) fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

/// A pod or external range: `/1` to `/30` (a `/0` would take every destination, and the IPAM
/// never hands out ranges longer than `/30`).
pub(super) fn range(field: &str, c: Cidr) -> Result<Ipv4Net, ConfigError> {
    c.range()
        .map(|c| c.net())
        .map_err(|e| bad(field, e.to_string()))
}
