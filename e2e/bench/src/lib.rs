//! The benchmarks of liqo-rs, behind the `liqo-bench` binary.
//!
//! It owns the measuring and the reports of five benches:
//!
//! - `tunnel` ([`run`]): our gateway against the plain routed path, boringtun-cli and
//!   wireguard-go, on one bed where only the gateway-to-gateway leg changes:
//!
//!   ```text
//!   <p>-bench-podA --veth-- <p>-bench-gwA ==veth (underlay)== <p>-bench-gwB --veth-- <p>-bench-podB
//!   iperf3 client                 tunnel daemon A       tunnel daemon B          iperf3 server
//!   ```
//!
//!   Each (repeat, profile, variant) brings one leg up, measures TCP with 1 and 4 streams, ping
//!   RTT and the daemons' CPU time per packet, and takes the leg down again; repeats are
//!   interleaved so that drift on a shared machine spreads over every variant. The peers are
//!   installed by the bench itself ([`install`]);
//! - `peers` ([`mod@peers`]): our gateway on the same bed with 1 to 1,000 peers on gwA;
//! - `path` ([`mod@path`]): pod-to-pod paths of a peered lab, beside the gateway alone;
//! - `peering` ([`mod@peering`]) and `offload` ([`offload`]): the control plane's, on two of the
//!   test kit's clusters with Liqo.
//!
//! Every report is built on one core ([`crate::report_core`]): the header (when, the command line, the
//! machine, the tools and how they were installed), [`Spread`], [`ratio`] and [`Target`]; each
//! family adds its own fields and tables.
//!
//! It never builds a lab or a cluster itself: the lab, the topology and the test kit's clusters
//! are the `e2e` crate's, which never depends on this one. Everything a bench creates lives under
//! its prefix (namespaces `<prefix>-bench-*`, the UAPI sockets of the WireGuard daemons in
//! `/var/run/wireguard/`, clusters `<prefix>pb` and `<prefix>ob`) and is removed at the end, on
//! failure, on Ctrl-C, and at the start of the next run after a crash; no packet leaves or
//! enters the root namespace.

mod bed;
mod daemon;
mod fetch;
pub mod install;
mod keys;
mod measure;
mod names;
pub mod offload;
mod options;
pub mod parse;
pub mod path;
pub mod peering;
pub mod peers;
pub mod reflection;
pub mod render;
pub mod report;
pub mod report_core;
pub mod run;
mod tooling;
mod variant;

pub use crate::report_core::{Header, Spread, Target, ratio};
pub use options::{BenchError, DEFAULT_CACHE, MIN_REPEATS, Options, Profile, TUNNEL_MTU, Variant};
pub use path::path;
pub use peering::peering;
pub use peers::peers;
pub use report::Report;
pub use run::tunnel;
