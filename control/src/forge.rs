//! Objects built whole from their inputs, as the components write them: the virtual node of
//! a peering ([`node`]). Pure: it never reads an apiserver or a clock (time is an input). The
//! ShadowPod of an offloaded pod and the status it reports back are [`crate::shadowpod`]'s.

pub mod node;
