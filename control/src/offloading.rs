//! Namespace offloading's decisions (being written): the NamespaceOffloading status and the
//! mappings it asks of each provider (consumer side), the remote namespaces a provider creates
//! for a NamespaceMap, and the pod and NamespaceOffloading webhooks.

pub mod consumer;
pub mod provider;
pub mod status;
pub mod webhook;
