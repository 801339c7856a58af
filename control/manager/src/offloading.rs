//! Namespace offloading's controllers (issue 15; being written): the virtual node of an
//! accepted offer, the virtual-node controller (its NamespaceMap), the NamespaceOffloading
//! controller on the consumer and the NamespaceMap controller on the provider. Their decisions
//! are `control::offloading`'s; this module only observes and carries them out.
