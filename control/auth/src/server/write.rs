//! How the auth service writes to the apiserver: its field manager on every create and
//! replace ([`post`]), and the one reading of a conflict ([`is_conflict`]: the object exists,
//! or changed since it was read).

use kube::api::PostParams;

use crate::FIELD_MANAGER;

/// The parameters of every create and replace: the service's field manager.
pub(super) fn post() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

/// Whether the apiserver refused a write as a conflict (409).
pub(super) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
