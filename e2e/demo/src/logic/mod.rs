//! The demo's pure core, no I/O: the route a request asks for ([`route`]), the URL check of
//! `/call` ([`target`]) and the answers built from their inputs ([`reply`]). The server and the
//! client around it only move bytes.

pub(crate) mod reply;
pub(crate) mod route;
pub(crate) mod target;
