//! `offload namespace` and `unoffload namespace`: write (server-side apply, field manager
//! `liqoctl`) or delete the NamespaceOffloading `offloading` of a namespace, then watch it and
//! print the phases until done, failed or `--timeout`; `-o yaml|json` prints the object and
//! writes nothing.
//!
//! It owns only the writing, the deleting and the waiting; the object, the lines and the
//! verdicts are [`decide`]'s (pure). It never touches NamespaceMaps, remote namespaces or the
//! scheduling label: those are the controllers'.

use std::time::Duration;

use control::api::offloading::{NAME, NamespaceOffloading};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};

use crate::{client::ApiFailure, consts::FIELD_MANAGER};

pub mod args;
pub mod decide;

#[cfg(test)]
mod tests;

pub use decide::{Outcome, RenderError};

/// Why `offload namespace` or `unoffload namespace` failed.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The namespace does not exist.
    #[error("namespace {0:?} not found (create it first: kubectl create namespace {0})")]
    NoNamespace(String),
    /// A call to the apiserver failed (a refusal carries the apiserver's message).
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ApiFailure,
    },
    /// `-o` could not render the object.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The offloading failed (the line names each failing cluster and why).
    #[error("{0}")]
    Failed(String),
    /// `--timeout` passed (the line says in which phase).
    #[error("{0}")]
    Timeout(String),
    /// The NamespaceOffloading vanished while `offload` waited.
    #[error(
        "the NamespaceOffloading of namespace {0:?} was deleted while waiting for it (was it \
         unoffloaded meanwhile?)"
    )]
    Deleted(String),
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> OffloadError {
    let what = what.into();
    move |e| OffloadError::Kube {
        what,
        source: e.into(),
    }
}

/// Fails unless namespace `ns` exists.
async fn require_namespace(client: &Client, ns: &str) -> Result<(), OffloadError> {
    let nss: Api<Namespace> = Api::all(client.clone());
    match nss
        .get_opt(ns)
        .await
        .map_err(kube_err(format!("reading namespace {ns}")))?
    {
        Some(_) => Ok(()),
        None => Err(OffloadError::NoNamespace(ns.to_owned())),
    }
}

/// `offload namespace`: applies `obj` (its namespace must exist), then waits for its
/// controller's verdict on this generation.
pub async fn offload(
    client: &Client,
    obj: &NamespaceOffloading,
    timeout: Duration,
) -> Result<(), OffloadError> {
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    require_namespace(client, &ns).await?;
    let api: Api<NamespaceOffloading> = Api::namespaced(client.clone(), &ns);
    let what = format!("writing the NamespaceOffloading {NAME:?} in namespace {ns:?}");
    // A NamespaceOffloading being deleted would vanish under the wait: say so before writing.
    if let Some(existing) = api.get_opt(NAME).await.map_err(kube_err(what.clone()))?
        && existing.metadata.deletion_timestamp.is_some()
        && let Outcome::Failed(line) = decide::progress(&ns, &existing)
    {
        return Err(OffloadError::Failed(line));
    }
    let applied = api
        .patch(
            NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await
        .map_err(kube_err(what))?;
    let terms = obj
        .spec
        .cluster_selector
        .as_ref()
        .map(|s| s.node_selector_terms.as_slice())
        .unwrap_or_default();
    println!(
        "NamespaceOffloading applied: namespace {ns:?}, mapping {:?}, pods {:?}, selector {}",
        applied.spec.namespace_mapping_strategy,
        applied.spec.pod_offloading_strategy,
        decide::describe_terms(terms)
    );
    let mut stream = watcher::watch_object(api, NAME).default_backoff().boxed();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = Some(applied);
    let mut printed = None;
    let mut watch_error = None;
    loop {
        let obj = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Ok(Some(obj)))) => obj,
            Ok(Some(Ok(None))) => return Err(OffloadError::Deleted(ns)),
            Ok(Some(Err(e))) => {
                let e = liqo_types::chain(&e);
                tracing::debug!(error = %e, "watching the NamespaceOffloading of {ns}");
                watch_error = Some(e);
                continue;
            }
        };
        let outcome = decide::progress(&ns, &obj);
        last = Some(obj);
        match outcome {
            Outcome::Done(line) => {
                println!("{line}");
                return Ok(());
            }
            Outcome::Failed(line) => return Err(OffloadError::Failed(line)),
            Outcome::Waiting(Some(phase)) if printed != Some(phase) => {
                println!("Offloading phase: {phase:?}");
                printed = Some(phase);
            }
            Outcome::Waiting(_) => {}
        }
    }
    let timeout = humantime::format_duration(timeout).to_string();
    let mut line = decide::offload_timeout_line(&ns, &timeout, last.as_ref());
    if let Some(e) = watch_error {
        line.push_str(&format!("; the last watch failed: {e}"));
    }
    Err(OffloadError::Timeout(line))
}

/// `unoffload namespace`: deletes the NamespaceOffloading of `ns` and waits until it is gone
/// (its controller removes the remote namespaces first). A namespace that does not exist is
/// an error (a mistyped name); one that exists but is not offloaded is a no-op, said so.
pub async fn unoffload(client: &Client, ns: &str, timeout: Duration) -> Result<(), OffloadError> {
    require_namespace(client, ns).await?;
    let api: Api<NamespaceOffloading> = Api::namespaced(client.clone(), ns);
    let what = format!("deleting the NamespaceOffloading {NAME:?} in namespace {ns:?}");
    let deleted = match api.delete(NAME, &DeleteParams::default()).await {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => return Err(kube_err(what)(e)),
    };
    if !deleted {
        println!("Namespace {ns:?} is not offloaded: nothing to do");
        return Ok(());
    }
    println!(
        "NamespaceOffloading of namespace {ns:?} deleted: waiting for the remote namespaces to be removed"
    );
    let mut stream = watcher::watch_object(api, NAME).default_backoff().boxed();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = None;
    let mut printed = None;
    let mut watch_error = None;
    loop {
        let obj = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Ok(Some(obj)))) => obj,
            Ok(Some(Ok(None))) => {
                println!("Offloading of namespace {ns:?} removed");
                return Ok(());
            }
            Ok(Some(Err(e))) => {
                let e = liqo_types::chain(&e);
                tracing::debug!(error = %e, "watching the NamespaceOffloading of {ns}");
                watch_error = Some(e);
                continue;
            }
        };
        let phase = obj.status.as_ref().and_then(|s| s.offloading_phase);
        if let Some(phase) = phase
            && printed != Some(phase)
        {
            println!("Offloading phase: {phase:?}");
            printed = Some(phase);
        }
        last = Some(obj);
    }
    let timeout = humantime::format_duration(timeout).to_string();
    let mut line = match &last {
        Some(obj) => decide::unoffload_timeout_line(ns, &timeout, obj),
        None => format!(
            "timed out after {timeout} waiting for the offloading of namespace {ns:?} to be \
             removed"
        ),
    };
    if let Some(e) = watch_error {
        line.push_str(&format!("; the last watch failed: {e}"));
    }
    Err(OffloadError::Timeout(line))
}
