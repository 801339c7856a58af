//! The gateway's wire types, for the gateway and for whoever writes its config or reads its
//! status (the gateway operator, the lab, the tests): the config file and what it means
//! ([`config`]: its parts, defaults and validation, endpoint mappings included, into the
//! configuration a gateway runs), the `/status` document ([`status`]) and the private key and its
//! file ([`keys`]). The `gateway` crate re-exports each where it always was.
//!
//! It never touches the kernel and never runs WireGuard: no boringtun, no TUN device, no
//! `dataplane` (the kernel's rules for names are `liqo_types::names`'). It never decides what a
//! gateway's config should say.

pub mod config;
pub mod keys;
pub mod status;
