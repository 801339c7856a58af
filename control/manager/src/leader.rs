//! The controller-manager's leader election (`--leader-elect`) on the Lease
//! [`control::consts::objects::MANAGER_LEADER_LEASE`]: [`liqo_lease`]'s elector, which the
//! gateway operators share.

pub use liqo_lease::{Elector, LeaderError, identity};
