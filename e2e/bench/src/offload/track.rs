//! What the offload bench sees of a Deployment's pods, pure: each pod's first sighting,
//! scheduling, Running and Ready as seconds on the bench's clock (time is an input), how many
//! are Running, and the per-pod latencies as percentiles.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

/// The facts of one pod that the bench times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodView {
    /// Its name (a home pod and its remote pod share it).
    pub(crate) name: String,
    /// Its UID (a pod re-created under the same name is another pod).
    pub(crate) uid: String,
    /// `PodScheduled=True` (or bound to a node).
    pub(crate) scheduled: bool,
    /// Phase `Running`.
    pub(crate) running: bool,
    /// `Ready=True`.
    pub(crate) ready: bool,
    /// It has a deletion timestamp.
    pub(crate) terminating: bool,
}

impl PodView {
    /// The view of `pod`; `None` without a UID (never the case for a pod read from an
    /// apiserver).
    pub(crate) fn of(pod: &Pod) -> Option<PodView> {
        let uid = pod.metadata.uid.clone()?;
        let status = pod.status.as_ref();
        let cond = |t: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == t && c.status == "True"))
        };
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        Some(PodView {
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid,
            scheduled: bound || cond("PodScheduled"),
            running: status.and_then(|s| s.phase.as_deref()) == Some("Running"),
            ready: cond("Ready"),
            terminating: pod.metadata.deletion_timestamp.is_some(),
        })
    }
}

/// When (seconds on the bench's clock) a pod was first seen in each state.
#[derive(Debug, Clone, Default, PartialEq)]
struct Times {
    name: String,
    seen: f64,
    scheduled: Option<f64>,
    running: Option<f64>,
    ready: Option<f64>,
    /// Running now (a pod can leave Running).
    running_now: bool,
    terminating: bool,
}

/// Every pod seen, by UID.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tracker {
    pods: BTreeMap<String, Times>,
}

/// Percentiles of per-pod latencies, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    /// How many pods have the latency.
    pub pods: usize,
    /// Median (nearest rank).
    pub p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Latency {
    /// The percentiles of `values` (milliseconds); `None` if there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Latency> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Latency {
            pods: v.len(),
            p50_ms: percentile(&v, 50.0),
            p99_ms: percentile(&v, 99.0),
            max_ms: v[v.len() - 1],
        })
    }
}

/// The nearest-rank `p`th percentile of `sorted` (ascending, not empty).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Tracker {
    /// Records `pod` as seen at `at` seconds.
    pub(crate) fn observe(&mut self, pod: &PodView, at: f64) {
        let t = self.pods.entry(pod.uid.clone()).or_insert(Times {
            name: pod.name.clone(),
            seen: at,
            ..Times::default()
        });
        let first = |slot: &mut Option<f64>, now: bool| {
            if now && slot.is_none() {
                *slot = Some(at);
            }
        };
        first(&mut t.scheduled, pod.scheduled);
        first(&mut t.running, pod.running);
        first(&mut t.ready, pod.ready);
        t.running_now = pod.running;
        t.terminating = pod.terminating;
    }

    /// Moves every time `by` seconds earlier (the clock restarted `by` seconds after its
    /// origin).
    pub(crate) fn shift(&mut self, by: f64) {
        for t in self.pods.values_mut() {
            t.seen -= by;
            for x in [&mut t.scheduled, &mut t.running, &mut t.ready]
                .into_iter()
                .flatten()
            {
                *x -= by;
            }
        }
    }

    /// Forgets pod `uid` (deleted).
    pub(crate) fn remove(&mut self, uid: &str) {
        self.pods.remove(uid);
    }

    /// Keeps only the pods whose UID is in `uids` (after a fresh list).
    pub(crate) fn retain(&mut self, uids: &[String]) {
        self.pods.retain(|k, _| uids.contains(k));
    }

    /// Pods Running now and not being deleted.
    pub(crate) fn running(&self) -> usize {
        self.pods
            .values()
            .filter(|t| t.running_now && !t.terminating)
            .count()
    }

    /// Pods known (not deleted).
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
    }

    /// Per pod first seen → first seen Running, milliseconds.
    pub(crate) fn created_to_running(&self) -> Option<Latency> {
        Latency::of(
            self.pods
                .values()
                .filter_map(|t| t.running.map(|r| (r - t.seen) * 1000.0)),
        )
    }

    /// Per pod first seen scheduled → first seen Ready, milliseconds.
    pub(crate) fn scheduled_to_ready(&self) -> Option<Latency> {
        Latency::of(self.pods.values().filter_map(|t| {
            let (s, r) = (t.scheduled?, t.ready?);
            Some((r - s).max(0.0) * 1000.0)
        }))
    }
}

/// Where an offloaded pod's time goes, per pod (matched by name), milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Breakdown {
    /// Home pod scheduled → its remote pod first seen on the provider (the virtual kubelet's
    /// ShadowPod and the provider's ShadowPod controller).
    pub to_remote: Option<Latency>,
    /// Remote pod first seen → Running (the provider's scheduler and kwok).
    pub remote_running: Option<Latency>,
    /// Remote pod Running → home pod Running (the virtual kubelet's status reflection).
    pub back_home: Option<Latency>,
}

/// The [`Breakdown`] of the pods of `home` whose remote pods `remote` saw (both on one clock).
pub(crate) fn breakdown(home: &Tracker, remote: &Tracker) -> Breakdown {
    let remote: BTreeMap<&str, &Times> =
        remote.pods.values().map(|t| (t.name.as_str(), t)).collect();
    let pairs: Vec<(&Times, &Times)> = home
        .pods
        .values()
        .filter_map(|h| Some((h, *remote.get(h.name.as_str())?)))
        .collect();
    let ms = |f: &dyn Fn(&Times, &Times) -> Option<f64>| {
        Latency::of(
            pairs
                .iter()
                .filter_map(|(h, r)| f(h, r))
                .map(|s| s.max(0.0) * 1000.0),
        )
    };
    Breakdown {
        to_remote: ms(&|h, r| Some(r.seen - h.scheduled?)),
        remote_running: ms(&|_, r| Some(r.running? - r.seen)),
        back_home: ms(&|h, r| Some(h.running? - r.running?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(uid: &str, scheduled: bool, running: bool, ready: bool) -> PodView {
        PodView {
            name: format!("pod-{uid}"),
            uid: uid.into(),
            scheduled,
            running,
            ready,
            terminating: false,
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], 99.0), 2.0);
        let l = Latency::of([3.0, 1.0, f64::NAN, 2.0]).unwrap();
        assert_eq!((l.pods, l.p50_ms, l.p99_ms, l.max_ms), (3, 2.0, 3.0, 3.0));
        assert!(Latency::of([]).is_none());
    }

    #[test]
    fn first_sightings_count_and_running_pods_are_counted_until_deleted() {
        let mut t = Tracker::default();
        t.observe(&view("a", false, false, false), 1.0);
        t.observe(&view("a", true, false, false), 1.5);
        t.observe(&view("b", true, false, false), 2.0);
        assert_eq!(t.running(), 0);
        t.observe(&view("a", true, true, true), 3.0);
        // A later update does not move the first sighting.
        t.observe(&view("a", true, true, true), 9.0);
        t.observe(&view("b", true, true, false), 4.0);
        t.observe(&view("b", true, true, true), 4.25);
        assert_eq!(t.running(), 2);
        let c = t.created_to_running().unwrap();
        assert_eq!((c.pods, c.p50_ms, c.max_ms), (2, 2000.0, 2000.0));
        let s = t.scheduled_to_ready().unwrap();
        assert_eq!((s.pods, s.p50_ms, s.p99_ms), (2, 1500.0, 2250.0));

        let mut gone = view("b", true, true, true);
        gone.terminating = true;
        t.observe(&gone, 5.0);
        assert_eq!(t.running(), 1, "a terminating pod is not Running");
        t.remove("b");
        assert_eq!(t.len(), 1);
        t.observe(&view("c", true, true, true), 6.0);
        t.retain(&["c".to_owned()]);
        assert_eq!((t.len(), t.running()), (1, 1));
        t.observe(&view("d", true, false, false), 7.0);
        t.shift(5.0);
        t.observe(&view("d", true, true, true), 3.0);
        let c = t.created_to_running().unwrap();
        assert_eq!((c.pods, c.max_ms), (2, 1000.0), "d: seen 2.0, Running 3.0");
    }

    #[test]
    fn an_offloaded_pods_time_split_at_the_remote_pod() {
        let (mut home, mut remote) = (Tracker::default(), Tracker::default());
        home.observe(&view("h1", true, false, false), 1.0);
        home.observe(&view("h2", true, false, false), 1.0);
        home.observe(&view("h3", true, false, false), 1.0);
        // The remote pods have the home pods' names and their own UIDs.
        let mut r1 = view("r1", false, false, false);
        r1.name = "pod-h1".into();
        remote.observe(&r1, 1.5);
        r1.running = true;
        remote.observe(&r1, 3.5);
        let mut r2 = view("r2", false, false, false);
        r2.name = "pod-h2".into();
        remote.observe(&r2, 2.0);
        home.observe(&view("h1", true, true, true), 4.0);
        let b = breakdown(&home, &remote);
        let to = b.to_remote.unwrap();
        assert_eq!((to.pods, to.p50_ms, to.max_ms), (2, 500.0, 1000.0));
        let run = b.remote_running.unwrap();
        assert_eq!((run.pods, run.p50_ms), (1, 2000.0));
        let back = b.back_home.unwrap();
        assert_eq!((back.pods, back.p50_ms), (1, 500.0));
        assert_eq!(breakdown(&home, &Tracker::default()), Breakdown::default());
    }

    #[test]
    fn a_pod_read_from_the_apiserver() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"nodeName": "liqo-milan", "containers": []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"}]},
        }))
        .unwrap();
        let mut want = view("u1", true, true, true);
        want.name = "p".into();
        assert_eq!(PodView::of(&pod), Some(want));
        let pending: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u2", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Pending"},
        }))
        .unwrap();
        let v = PodView::of(&pending).unwrap();
        assert!(
            !v.scheduled && !v.running && !v.ready && v.terminating,
            "{v:?}"
        );
        let no_uid: Pod = serde_json::from_value(serde_json::json!({"metadata": {}})).unwrap();
        assert!(PodView::of(&no_uid).is_none());
    }
}
