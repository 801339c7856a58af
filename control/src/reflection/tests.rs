//! Unit tests of resource reflection (§5 of the control-plane spec), split by subject.

mod claim;
mod configmap;
mod decide;
mod endpointslice;
mod fixture;
mod meta;
mod objects;
mod same;
mod service;
