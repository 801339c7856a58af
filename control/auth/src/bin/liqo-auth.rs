//! The `liqo-auth` daemon (in progress).

fn main() {}
