//! The daemons' shared runtime (being written).
