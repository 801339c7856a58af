//! Parameters of API requests the binaries share (pure: it builds them, never sends them).

use kube::core::params::{DeleteParams, Preconditions};

/// Deletes only the object of this UID: one deleted and made again under the same name in the
/// meantime is never deleted in its place (the API server answers 409 Conflict).
pub fn delete_by_uid(uid: impl Into<String>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}
