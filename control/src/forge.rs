//! Objects built whole from their inputs (being written).

pub mod node;
