//! The deletions a worker makes, each with a UID precondition: a key's ShadowPod (recorded,
//! so that it is seen going until the watch shows it: no second deletion meanwhile) and its
//! home pod (grace 0: nothing of it runs on the provider any more). A deletion whose object is
//! gone already (404) or replaced (409) is done; any other failure is the caller's to retry.

use control::api::virtualkubelet::ShadowPod;
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::Api;

use super::{key::Key, shared::Shared};

/// Deletes `key`'s ShadowPod of `uid` in remote namespace `ns`.
pub async fn shadow(shared: &Shared, key: &Key, ns: &str, uid: String) -> Result<(), kube::Error> {
    let api: Api<ShadowPod> = Api::namespaced(shared.cfg.remote.api.clone(), ns);
    let r = api
        .delete(&key.name, &control::requests::delete_by_uid(uid.clone()))
        .await;
    // A failure returns here: any record stays, for the retry.
    if deleted(r)? {
        let at = Time(Timestamp::now());
        tracing::info!(pod = %key, remote = %ns, %uid, "ShadowPod deleted");
        (shared.created).deleted(key, ns, uid, at, std::time::Instant::now());
    } else {
        // Gone already, or another: the store's view decides.
        shared.created.forget(key);
    }
    Ok(())
}

/// Deletes `key`'s home pod of `uid`, at once.
pub async fn local(shared: &Shared, key: &Key, uid: String) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(shared.cfg.local.clone(), &key.namespace);
    let mut dp = control::requests::delete_by_uid(uid);
    dp.grace_period_seconds = Some(0);
    if deleted(api.delete(&key.name, &dp).await)? {
        tracing::info!(pod = %key, "local pod deleted");
    }
    Ok(())
}

/// A deletion whose object is already gone (404) or replaced (409: UID precondition) is done
/// (`false`: not by us).
fn deleted<T>(r: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
