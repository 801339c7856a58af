//! The small write helpers every controller uses: server-side apply (of an object, of a
//! status) under [`crate::FIELD_MANAGER`], finalizer lists guarded by the resourceVersion,
//! controller references, a merge patch's parameters, the clock, and "already gone is done".
//! Finalizers are only ever changed through [`with_finalizer`] and [`set_finalizers`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{
    Api, Resource,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    FIELD_MANAGER,
    error::{Error, kube as kerr},
};

/// `current` finalizers without `name`, then with it at the end when `add`.
pub fn with_finalizer(current: &[String], name: &str, add: bool) -> Vec<String> {
    let mut list: Vec<String> = current.iter().filter(|f| *f != name).cloned().collect();
    if add {
        list.push(name.to_owned());
    }
    list
}

/// The parameters of a merge patch, under our field manager (the fields it sets are ours).
pub fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(crate::FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// Now, as the API's time.
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Server-side applies an object (forced: the controller owns what it writes).
pub async fn apply<K>(api: &Api<K>, name: &str, object: &Value) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(kerr(format!("apply {} {name}", K::kind(&()))))
}

/// Server-side applies a status (`{apiVersion, kind, status}`).
pub async fn apply_status<K>(api: &Api<K>, name: &str, status: &Value) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let object = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map_err(kerr(format!("apply status of {} {name}", K::kind(&()))))
}

/// Sets an object's finalizers to a new list, guarded by its resourceVersion.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    finalizers: Vec<String>,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": resource_version, "finalizers": finalizers},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(kerr(format!("finalizers of {name}")))
}

/// A controller reference to an object (for `ownerReferences`).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<Value> {
    let meta = owner.meta();
    Some(serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": meta.name.as_ref()?,
        "uid": meta.uid.as_ref()?,
        "controller": true,
        "blockOwnerDeletion": true,
    }))
}

/// Errors other than 404 (a delete of something already gone is done).
pub fn not_found(e: kube::Error) -> Result<(), kube::Error> {
    match &e {
        kube::Error::Api(s) if s.code == 404 => Ok(()),
        _ => Err(e),
    }
}

#[cfg(test)]
mod finalizer_tests {
    use super::with_finalizer;

    #[test]
    fn a_finalizer_is_added_once_and_removed_alone() {
        let cur = vec!["a".to_owned(), "x".to_owned(), "b".to_owned()];
        assert_eq!(with_finalizer(&cur, "x", true), ["a", "b", "x"]);
        assert_eq!(with_finalizer(&cur, "x", false), ["a", "b"]);
        assert_eq!(with_finalizer(&[], "x", true), ["x"]);
    }
}
