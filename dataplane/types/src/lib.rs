//! Validated values shared by the data plane and the control plane, each defined once.
//!
//! - [`ClusterId`] and [`ClusterName`]: RFC 1123 labels ([`id`]);
//! - [`Cidr`]: an IPv4 network written without host bits, the one CIDR parser of the tree
//!   ([`cidr`]);
//! - [`dns::is_dns_name`]: a DNS name where an address may be given (a gateway endpoint);
//! - [`PeerView`]: how a cluster sees a peer and how the peer sees it, with address translation
//!   ([`view`]);
//! - [`PublicKey`]: a WireGuard public key ([`key`]);
//! - [`names::IfName`] and [`names::NetnsName`]: the kernel's interface and network namespace
//!   names ([`names`]);
//! - [`FieldError`]: a refused value named by its field path, and YAML/JSON decoding that names
//!   the field of every error ([`field`]);
//! - [`chain()`]: an error and its causes on one line;
//! - [`reload::ReloadStatus`]: the `reload` block of every daemon's `/status` ([`reload`]);
//! - [`string_newtype!`]: the one definition of a validated string newtype ([`newtype`]);
//! - [`addr::unusable_node_address`]: why an address cannot be a node's (the overlay's node
//!   addresses and the gateway's endpoints share it);
//! - [`GatewayPeer`], [`EndpointMapping`] and [`OverlayNode`]: the entries the control plane (or the lab) writes into
//!   the gateway's and the overlay agents' configurations ([`wire`]);
//! - with the `certs` feature, `certs`: the CA and serving certificate a component makes and
//!   keeps itself in a Secret (the controller-manager's webhooks, liqo-ipam): reading them back,
//!   the decision to reuse, reissue or replace them, and making them.
//!
//! This crate does no I/O (but for `certs`' new keys, from the kernel's random source) and holds
//! no policy (a `certs::Profile`, how long certificates live, is the caller's): it only parses,
//! validates and prints values. With the `schemars` feature the identifiers and CIDRs carry
//! JSON schemas for the CRDs.

pub mod addr;
#[cfg(feature = "certs")]
pub mod certs;
pub mod chain;
pub mod cidr;
pub mod dns;
pub mod field;
pub mod id;
pub mod key;
pub mod names;
pub mod newtype;
pub mod reload;
pub mod view;
pub mod wire;

pub use chain::chain;
pub use cidr::{Cidr, InvalidCidr};
pub use field::FieldError;
pub use id::{ClusterId, ClusterName, InvalidId};
pub use key::{InvalidKey, PublicKey};
pub use view::PeerView;
pub use wire::{EndpointMapping, GATEWAY_HOST_LINK, GatewayPeer, OverlayNode};
