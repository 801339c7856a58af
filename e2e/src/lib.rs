//! placeholder

pub mod topology;
