//! Namespace offloading's I/O in the controller-manager (issue 15): [`node`], the virtual
//! node of an accepted offer (applied, kept Ready by its Lease) until the virtual kubelet
//! takes it over; [`vnode`], the virtual-node controller (a NamespaceMap per virtual node). The decisions of the offloading controllers are `control::offloading`'s;
//! this module only observes and carries them out, and never serves admission reviews
//! (`crate::webhook` does).

pub mod node;
pub mod vnode;
