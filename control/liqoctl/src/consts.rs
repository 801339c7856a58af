//! liqoctl's constants shared by its commands: the field manager of its writes.

/// The field manager of liqoctl's writes.
pub const FIELD_MANAGER: &str = "liqoctl";
