//! The peering core (being written).
