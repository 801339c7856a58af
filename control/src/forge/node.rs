//! The virtual node object (being written).
