//! The ShadowPod contract in one place: what a consumer's virtual kubelet makes of a local pod
//! and reports back ([`consumer`]: the ShadowPod forged from the pod, the local status forged
//! from the remote pod's, the refusals), what its reflection decides for one pod from what it
//! observed ([`reflection`]; when it looks again unasked: [`recheck`]), the remote pod's Events mirrored home ([`events`]), its ServiceAccount token ([`token`]), and what
//! the provider makes of the ShadowPod ([`provider`]: the confined pod and the ShadowPod
//! controller's decision). Pure: the virtual kubelet's
//! reflection and the controller-manager's ShadowPod controller carry it out.

pub mod consumer;
pub mod events;
pub mod pending;
pub mod provider;
pub mod recheck;
pub mod reflection;
pub mod token;

#[cfg(test)]
mod reflection_offload_tests;
#[cfg(test)]
mod reflection_tests;
#[cfg(test)]
mod token_tests;
