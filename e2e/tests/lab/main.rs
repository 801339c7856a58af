//! The lab's end-to-end tests, one binary (root: whole clusters out of network namespaces, real
//! packets): the lab itself (`lab_root`), the peering core on it (`peering_root`), gateway
//! endpoints (`endpoint_lab_root`), path MTU (`pmtu_root`) and the mutation run (`mutation_root`).
//! Shared helpers in `common`.

mod common;
mod mutation;

mod endpoint_lab_root;
mod lab_root;
mod mutation_root;
mod peering_root;
mod pmtu_root;
