//! The writes to a home pod that the virtual kubelet's store does not show yet (pure).
//!
//! A worker writes a home pod's label or status, and the watch brings the new version a moment
//! later. A key handled again in between (another event: the remote pod moved on) would see
//! the old version and write the same again. What was written is kept beside the version it
//! was written on, and laid over the stored pod while the store still shows that version: the
//! decision then sees the pod as the writes left it. Once the store shows another version (our
//! write's event came, or a later one), the record is dropped.
//!
//! It never holds a record past the next version of its pod, and none for a write that made
//! no new version (no event would come to drop it).

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::consts::{labels, values};

/// What was written to one home pod on one version of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pending {
    /// The version the writes were made on (as the store showed it).
    pub resource_version: Option<String>,
    /// The offloaded label was written.
    pub labelled: bool,
    /// The status the API server answered the write with.
    pub status: Option<Box<PodStatus>>,
}

impl Pending {
    /// Whether it still stands for `stored`: the store shows the version the writes were made
    /// on.
    pub fn stands(&self, stored: &Pod) -> bool {
        self.resource_version.is_some() && self.resource_version == stored.metadata.resource_version
    }

    /// `stored` as the writes left it.
    pub fn apply(&self, stored: &mut Pod) {
        if self.labelled {
            stored
                .metadata
                .labels
                .get_or_insert_default()
                .insert(labels::SHADOW_POD.into(), values::TRUE.into());
        }
        if let Some(s) = &self.status {
            stored.status = Some((**s).clone());
        }
    }

    /// The record after a write on `stored` (`record` names what): added to this one when
    /// it was made on the same version, started afresh otherwise.
    pub fn after(self, stored: &Pod, record: impl FnOnce(&mut Pending)) -> Pending {
        let mut next = if self.stands(stored) {
            self
        } else {
            Pending {
                resource_version: stored.metadata.resource_version.clone(),
                ..Pending::default()
            }
        };
        record(&mut next);
        next
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn running() -> PodStatus {
        PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        }
    }

    #[test]
    fn writes_on_one_version_are_laid_over_it_until_the_store_moves_on() {
        let v1 = pod("1");
        let p = Pending::default()
            .after(&v1, |p| p.labelled = true)
            .after(&v1, |p| p.status = Some(Box::new(running())));
        assert!(p.stands(&v1));
        let mut seen = v1.clone();
        p.apply(&mut seen);
        assert_eq!(
            seen.metadata.labels.as_ref().unwrap()[labels::SHADOW_POD],
            values::TRUE
        );
        assert_eq!(seen.status, Some(running()));
        // The store shows our write (or a later one): the record no longer stands.
        assert!(!p.stands(&pod("2")));
        // A write on the new version starts a new record: the label is not assumed again.
        let q = p.after(&pod("2"), |p| p.status = Some(Box::new(running())));
        assert_eq!(q.resource_version.as_deref(), Some("2"));
        assert!(!q.labelled);
    }

    #[test]
    fn a_pod_without_a_version_never_matches() {
        let mut v = pod("1");
        v.metadata.resource_version = None;
        let p = Pending::default().after(&v, |p| p.labelled = true);
        assert!(!p.stands(&v));
    }
}
