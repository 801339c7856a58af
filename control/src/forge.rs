//! Objects built whole from their inputs, as the components write them: the virtual node of
//! a peering ([`node`]), the ShadowPod of an offloaded pod and the status it reports back
//! ([`pod`]). Pure: it never reads an apiserver or a clock (time is an input).

pub mod node;
pub mod pod;
