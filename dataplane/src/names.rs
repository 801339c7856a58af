//! Validated names: interface names and network namespace names (`liqo_types::names`, where
//! the daemons' wire types read them too). Checked once, at the boundary, so the rest of the
//! crate never handles a raw string that the kernel would reject halfway through a change.

pub use liqo_types::names::{IfName, InvalidName, NetnsName};
