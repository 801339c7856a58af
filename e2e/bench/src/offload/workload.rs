//! The offload bench's Deployment on one cluster: creating and scaling it, a pod watch that
//! times every pod until N are Running, and the cleanup between runs (every pod gone, also the
//! remote ones on the provider).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::{Namespace, Pod, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;

use super::track::{PodView, Tracker};
use crate::{BenchError, options::fail};

/// The Deployment's name and its pods' `app` label.
pub(crate) const APP: &str = "liqo-bench";
/// How often the cleanup looks again.
const POLL: Duration = Duration::from_millis(500);

fn selector() -> String {
    format!("app={APP}")
}

/// The Deployment: `replicas` pods of one container whose requests are tiny (the capacity is
/// bound by pods), the same on both sides.
pub(crate) fn deployment(ns: &str, replicas: u32) -> Result<Deployment, BenchError> {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": APP, "namespace": ns, "labels": {"app": APP}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                }]},
            },
        },
    }))
    .map_err(|e| BenchError::step("the Deployment's manifest", &e))
}

/// Creates the Deployment with `replicas` in `ns`.
pub(crate) async fn create(client: &Client, ns: &str, replicas: u32) -> Result<(), BenchError> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment(ns, replicas)?)
        .await
        .map(drop)
        .map_err(|e| BenchError::step(format!("creating Deployment {ns}/{APP}"), &e))
}

/// Sets the Deployment's replicas.
pub(crate) async fn scale(client: &Client, ns: &str, replicas: u32) -> Result<(), BenchError> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            APP,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .map(drop)
        .map_err(|e| BenchError::step(format!("scaling Deployment {ns}/{APP} to {replicas}"), &e))
}

/// How often, after its last answer, a deletion of many pods is asked again while some are
/// left.
const REASK: Duration = Duration::from_secs(20);

/// Waits until `check` returns `Ok(true)`, looking every [`POLL`]; fails after `timeout`
/// naming `what` and the last state `check` described.
async fn poll<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<(), BenchError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(bool, String), BenchError>>,
{
    let start = Instant::now();
    loop {
        let (done, state) = check().await?;
        if done {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(fail(
                format!("waiting for {what}"),
                format!("not within {} s ({state})", timeout.as_secs()),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Creates namespace `ns` (one that exists already is fine).
pub(crate) async fn create_namespace(client: &Client, ns: &str) -> Result<(), BenchError> {
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))
        .map_err(|e| BenchError::step("the namespace's manifest", &e))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &body)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(BenchError::step(format!("creating namespace {ns}"), &e)),
    }
}

/// Waits for ServiceAccount `default` of `ns` (pods are refused until it exists).
pub(crate) async fn service_account(
    client: &Client,
    ns: &str,
    timeout: Duration,
) -> Result<(), BenchError> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    poll(&format!("ServiceAccount {ns}/default"), timeout, || {
        let api = api.clone();
        async move {
            let sa = api
                .get_opt("default")
                .await
                .map_err(|e| BenchError::step("reading ServiceAccount default", &e))?;
            Ok((sa.is_some(), "absent".to_owned()))
        }
    })
    .await
}

/// How many objects `api` lists (with `labels`, if any); metadata only.
pub(crate) async fn count<K>(api: &Api<K>, labels: Option<&str>) -> Result<usize, BenchError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = ListParams::default();
    if let Some(l) = labels {
        lp = lp.labels(l);
    }
    api.list_metadata(&lp)
        .await
        .map(|l| l.items.len())
        .map_err(|e| BenchError::step(format!("listing {}", K::plural(&())), &e))
}

/// Deletes the Deployment and every one of its pods (grace 0) in `ns`, and waits until none
/// is left there nor (for the offloaded side) in `remote`'s namespace, whose pods the
/// provider's controllers remove.
pub(crate) async fn clear(
    client: &Client,
    ns: &str,
    remote: Option<(&Client, &str)>,
    timeout: Duration,
) -> Result<(), BenchError> {
    let sel = selector();
    match Api::<Deployment>::namespaced(client.clone(), ns)
        .delete(APP, &DeleteParams::background())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(BenchError::step(
                format!("deleting Deployment {ns}/{APP}"),
                &e,
            ));
        }
    }
    // Its ReplicaSets go first, or they would re-create the pods deleted below.
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    poll(
        &format!("the ReplicaSets of {ns}/{APP} gone"),
        timeout,
        || {
            let (rss, sel) = (rss.clone(), sel.clone());
            async move {
                let n = rss
                    .list(&ListParams::default().labels(&sel))
                    .await
                    .map_err(|e| BenchError::step("listing ReplicaSets", &e))?
                    .items
                    .len();
                Ok((n == 0, format!("{n} left")))
            }
        },
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    // Asked again REASK after the last answer while pods are left: one request for thousands
    // of pods can outlast the API server's request timeout (10,000 at once did: "connection
    // closed before message completed"), while the deletion goes on server-side. A refusal
    // by the API server (an error status) ends the cleanup.
    let answered: Arc<Mutex<Option<Instant>>> = Arc::default();
    poll(&format!("the pods of {ns} gone"), timeout, || {
        let again = answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|a| a.elapsed() >= REASK);
        let (pods, sel, now, ns) = (pods.clone(), sel.clone(), now.clone(), ns.to_owned());
        let answered = answered.clone();
        async move {
            if again {
                let r = pods
                    .delete_collection(&now, &ListParams::default().labels(&sel))
                    .await;
                *answered.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                match r {
                    Ok(_) => {}
                    Err(e @ kube::Error::Api(_)) => {
                        return Err(BenchError::step(format!("deleting the pods of {ns}"), &e));
                    }
                    Err(e) => eprintln!(
                        "bench: deleting the pods of {ns}: {e}; asked again while any is left"
                    ),
                }
            }
            let n = count(&pods, Some(&sel)).await?;
            Ok((n == 0, format!("{n} left")))
        }
    })
    .await?;
    if let Some((remote, rns)) = remote {
        let rpods: Api<Pod> = Api::namespaced(remote.clone(), rns);
        poll(&format!("the remote pods of {rns} gone"), timeout, || {
            let rpods = rpods.clone();
            async move {
                let n = count(&rpods, None).await?;
                Ok((n == 0, format!("{n} left")))
            }
        })
        .await?;
    }
    Ok(())
}

/// A list then a watch of the Deployment's pods in one namespace, every change fed to a
/// [`Tracker`] with the seconds since `t0`.
pub(crate) struct PodWatch {
    api: Api<Pod>,
    what: String,
    /// A label selector (none: every pod of the namespace).
    labels: Option<String>,
    t0: Instant,
    tracker: Tracker,
    events: Option<BoxStream<'static, kube::Result<WatchEvent<Pod>>>>,
}

impl PodWatch {
    /// Lists the Deployment's pods and opens the watch; times count from now until
    /// [`PodWatch::restart_clock`].
    pub(crate) async fn open(client: &Client, ns: &str) -> Result<PodWatch, BenchError> {
        PodWatch::open_with(client, ns, Some(selector())).await
    }

    /// [`PodWatch::open`] for every pod of `ns` (a provider's namespace: only the
    /// offloaded pods are there, whatever labels the ShadowPods give them).
    pub(crate) async fn open_all(client: &Client, ns: &str) -> Result<PodWatch, BenchError> {
        PodWatch::open_with(client, ns, None).await
    }

    async fn open_with(
        client: &Client,
        ns: &str,
        labels: Option<String>,
    ) -> Result<PodWatch, BenchError> {
        let mut w = PodWatch {
            api: Api::namespaced(client.clone(), ns),
            what: format!("the pods of {ns}"),
            labels,
            t0: Instant::now(),
            tracker: Tracker::default(),
            events: None,
        };
        w.relist().await?;
        Ok(w)
    }

    /// Times count from now on (what was seen so far keeps its times, now negative).
    pub(crate) fn restart_clock(&mut self) {
        self.restart_clock_at(Instant::now());
    }

    /// Times count from `t0` (two watches on one clock).
    pub(crate) fn restart_clock_at(&mut self, t0: Instant) {
        let shift = t0.saturating_duration_since(self.t0).as_secs_f64();
        self.tracker.shift(shift);
        self.t0 = t0;
    }

    /// What was seen.
    pub(crate) fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    async fn relist(&mut self) -> Result<(), BenchError> {
        let (mut lp, mut wp) = (ListParams::default(), WatchParams::default().timeout(290));
        if let Some(sel) = &self.labels {
            lp = lp.labels(sel);
            wp = wp.labels(sel);
        }
        // After a 290 s watch, the pooled connection a list takes may be one the server closed
        // while it idled: such a request never reached it and is sent again (twice at most).
        let mut attempt = 0;
        let list = loop {
            attempt += 1;
            match self.api.list(&lp).await {
                Err(e) if attempt < 3 && !matches!(e, kube::Error::Api(_)) => {
                    eprintln!("bench: listing {} failed ({e}), again", self.what);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                r => {
                    break r.map_err(|e| BenchError::step(format!("listing {}", self.what), &e))?;
                }
            }
        };
        let at = self.now();
        let mut uids = Vec::new();
        for p in &list.items {
            if let Some(v) = PodView::of(p) {
                self.tracker.observe(&v, at);
                uids.push(v.uid);
            }
        }
        self.tracker.retain(&uids);
        let rv = list.metadata.resource_version.unwrap_or_default();
        let events = self
            .api
            .watch(&wp, &rv)
            .await
            .map_err(|e| BenchError::step(format!("watching {}", self.what), &e))?;
        self.events = Some(events.boxed());
        Ok(())
    }

    /// The seconds since `t0` at which `n` pods were first Running at once; fails after
    /// `timeout` with how many were.
    pub(crate) async fn until_running(
        &mut self,
        n: usize,
        timeout: Duration,
    ) -> Result<f64, BenchError> {
        match tokio::time::timeout(timeout, self.until_inner(n)).await {
            Ok(r) => r,
            Err(_) => Err(fail(
                format!("waiting for {n} Running among {}", self.what),
                format!(
                    "{} Running of {} pods after {} s",
                    self.tracker.running(),
                    self.tracker.len(),
                    timeout.as_secs()
                ),
            )),
        }
    }

    async fn until_inner(&mut self, n: usize) -> Result<f64, BenchError> {
        loop {
            if self.tracker.running() >= n {
                return Ok(self.now());
            }
            let Some(events) = self.events.as_mut() else {
                self.relist().await?;
                continue;
            };
            match events.next().await {
                Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
                    if let Some(v) = PodView::of(&p) {
                        let at = self.now();
                        self.tracker.observe(&v, at);
                    }
                }
                Some(Ok(WatchEvent::Deleted(p))) => {
                    if let Some(uid) = p.metadata.uid.as_deref() {
                        self.tracker.remove(uid);
                    }
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                // An expired resource version, an error or a closed stream: list again (the
                // list shows the current state, so nothing is missed).
                Some(Ok(WatchEvent::Error(_)) | Err(_)) | None => {
                    self.events = None;
                    self.relist().await?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deployment_is_tiny_and_selects_its_pods() {
        let d = deployment("ns1", 7).unwrap();
        assert_eq!(d.metadata.namespace.as_deref(), Some("ns1"));
        let spec = d.spec.unwrap();
        assert_eq!(spec.replicas, Some(7));
        let labels = spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels["app"], APP);
        assert_eq!(
            spec.selector.match_labels.unwrap()["app"],
            APP,
            "the selector matches the template"
        );
        let c = &spec.template.spec.unwrap().containers[0];
        let req = c.resources.clone().unwrap().requests.unwrap();
        assert_eq!(
            (req["cpu"].0.as_str(), req["memory"].0.as_str()),
            ("1m", "1Mi")
        );
        assert_eq!(selector(), "app=liqo-bench");
    }
}
