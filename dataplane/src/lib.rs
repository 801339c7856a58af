//! The OS-facing layer every daemon and the lab share: named network namespaces, links,
//! addresses, routes, policy rules, neighbours, sysctls, TUN devices (and their per-CPU
//! steering: `steer`; both behind the default feature `tun`) and nftables; and the one
//! process supervisor ([`supervisor`]: start a program, optionally inside a namespace, watch
//! it, stop it with SIGTERM then SIGKILL) that the lab, the Kubernetes harness, the bench and
//! every crate's tests use, with [`procs`], the one read-only scan of `/proc` that finds
//! processes by program, flag, environment, parent or namespace.
//!
//! It is organised in three layers, as in the rest of the project:
//! 1. plain desired-state types ([`link::LinkSpec`], [`route::RouteSpec`], [`nft::Ruleset`], ...);
//! 2. pure builders that turn them into kernel requests ([`request::Request`]) or one atomic
//!    nftables batch, unit-tested without root;
//! 3. a small I/O layer ([`netlink::Netlink`], [`nft::apply`], [`netns::Netns`]); batches of
//!    many netlink messages per `sendmsg` (routes and rules, nftables elements) are framed and
//!    parsed purely (`batch`) and sent on one blocking socket type (`nlsock`).
//!
//! It owns no policy: it never decides which addresses, routes or NAT rules a cluster needs, it
//! never shells out to `ip`, it never moves the caller's thread into another namespace, and
//! the supervisor never decides what to run.

pub mod addr;
mod batch;
pub mod link;
pub mod names;
pub mod neigh;
pub mod netlink;
pub mod netns;
pub mod nft;
mod nlsock;
pub mod procs;
pub mod request;
pub mod route;
pub mod rule;
#[cfg(feature = "tun")]
pub mod steer;
pub mod supervisor;
pub mod sysctl;
pub mod testing;
#[cfg(feature = "tun")]
pub mod tun;

pub use names::{IfName, InvalidName, NetnsName};
pub use netlink::Netlink;
pub use netns::Netns;
