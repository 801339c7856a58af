//! The demo's pure core, no I/O: the route a request asks for ([`route`]), the URL check of
//! `/call` ([`target`]), the entry check of `/append` ([`entry`]) and the answers built from
//! their inputs ([`reply`]). The server, the client and the store around it only move bytes.

pub(crate) mod entry;
pub(crate) mod reply;
pub(crate) mod route;
pub(crate) mod target;
