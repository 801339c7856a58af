//! What the peering bench reads: a watch that reports when an object first satisfies a
//! predicate, the apiserver floor, and a process's memory and CPU from `/proc`.

use std::{
    fmt::Debug,
    time::{Duration, Instant},
};

use control::api::offloading::{NamespaceOffloading, NamespaceOffloadingStatus};
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client, Resource,
    api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use serde::de::DeserializeOwned;

use crate::{BenchError, options::fail, parse};

/// The field manager of every write of the bench.
const MANAGER: &str = "liqo-bench";
/// The namespace of the floor's object.
pub(crate) const FLOOR_NAMESPACE: &str = "liqo-bench-floor";
/// The floor's object (a NamespaceOffloading must have this name).
const FLOOR_NAME: &str = "offloading";

/// A list then a watch from its resource version: every change after [`Watch::open`] is seen.
pub(crate) struct Watch<K> {
    api: Api<K>,
    what: String,
    fields: Option<String>,
    initial: Vec<K>,
    events: Option<BoxStream<'static, kube::Result<WatchEvent<K>>>>,
}

impl<K> Watch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// Lists the objects (those matching `fields`, a field selector) and opens a watch.
    pub(crate) async fn open(
        api: Api<K>,
        what: impl Into<String>,
        fields: Option<String>,
    ) -> Result<Watch<K>, BenchError> {
        let mut w = Watch {
            api,
            what: what.into(),
            fields,
            initial: Vec::new(),
            events: None,
        };
        w.relist().await?;
        Ok(w)
    }

    /// The objects the last list returned (until [`Watch::until`] runs).
    pub(crate) fn listed(&self) -> &[K] {
        &self.initial
    }

    async fn relist(&mut self) -> Result<(), BenchError> {
        let mut lp = ListParams::default();
        let mut wp = WatchParams::default().timeout(290);
        if let Some(f) = &self.fields {
            lp = lp.fields(f);
            wp = wp.fields(f);
        }
        let list = self
            .api
            .list(&lp)
            .await
            .map_err(|e| BenchError::step(format!("listing {}", self.what), &e))?;
        let rv = list.metadata.resource_version.unwrap_or_default();
        self.initial = list.items;
        let events = self
            .api
            .watch(&wp, &rv)
            .await
            .map_err(|e| BenchError::step(format!("watching {}", self.what), &e))?;
        self.events = Some(events.boxed());
        Ok(())
    }

    /// The moment an object first satisfies `done` (at once if one listed does); fails after
    /// `timeout` naming `waiting_for`.
    pub(crate) async fn until(
        &mut self,
        waiting_for: &str,
        timeout: Duration,
        done: impl Fn(&K) -> bool,
    ) -> Result<Instant, BenchError> {
        match tokio::time::timeout(timeout, self.until_inner(&done)).await {
            Ok(r) => r,
            Err(_) => Err(fail(
                format!("waiting for {waiting_for}"),
                format!("not seen within {} s", timeout.as_secs()),
            )),
        }
    }

    async fn until_inner(&mut self, done: &impl Fn(&K) -> bool) -> Result<Instant, BenchError> {
        loop {
            if self.initial.iter().any(done) {
                self.initial.clear();
                return Ok(Instant::now());
            }
            self.initial.clear();
            let Some(events) = self.events.as_mut() else {
                self.relist().await?;
                continue;
            };
            match events.next().await {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) if done(&o) => {
                    return Ok(Instant::now());
                }
                Some(Ok(_)) => {}
                // An expired resource version or a closed stream: list again (the list shows
                // the current state, so nothing is missed).
                Some(Err(_)) | None => {
                    self.events = None;
                    self.relist().await?;
                }
            }
        }
    }
}

/// Prepares the floor's namespace on `client`'s cluster.
pub(crate) async fn floor_namespace(client: &Client) -> Result<(), BenchError> {
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(FLOOR_NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(BenchError::step(
            format!("creating namespace {FLOOR_NAMESPACE}"),
            &e,
        )),
    }
}

/// One floor sample, milliseconds: server-side apply of the NamespaceOffloading (a new
/// annotation each time, so it is a real write), a merge patch of its status, and the watch
/// event that carries that status.
pub(crate) async fn floor_sample(client: &Client, tag: &str) -> Result<f64, BenchError> {
    let api: Api<NamespaceOffloading> = Api::namespaced(client.clone(), FLOOR_NAMESPACE);
    let mut watch = Watch::open(
        api.clone(),
        "the floor's NamespaceOffloading",
        Some(format!("metadata.name={FLOOR_NAME}")),
    )
    .await?;
    let body = serde_json::json!({
        "apiVersion": "offloading.liqo.io/v1alpha1",
        "kind": "NamespaceOffloading",
        "metadata": {
            "name": FLOOR_NAME,
            "annotations": { "bench.liqo.io/sample": tag },
        },
        "spec": {},
    });
    let status = serde_json::json!({ "status": { "remoteNamespaceName": tag } });
    let start = Instant::now();
    api.patch(
        FLOOR_NAME,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|e| BenchError::step("floor: applying the NamespaceOffloading", &e))?;
    api.patch_status(FLOOR_NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| BenchError::step("floor: patching its status", &e))?;
    let seen = watch
        .until(
            "the floor's status in a watch event",
            Duration::from_secs(30),
            |o: &NamespaceOffloading| {
                o.status
                    .as_ref()
                    .and_then(|s: &NamespaceOffloadingStatus| s.remote_namespace_name.as_deref())
                    == Some(tag)
            },
        )
        .await?;
    Ok(seen.duration_since(start).as_secs_f64() * 1000.0)
}

/// `VmRSS` and `VmHWM` of `pid`, KiB.
pub(crate) fn memory_kib(pid: u32) -> Result<(u64, u64), BenchError> {
    memory_and_file_kib(pid).map(|(rss, hwm, _)| (rss, hwm))
}

/// [`memory_kib`] and `RssFile` (KiB: the resident pages mapped from files, mostly the
/// program's own code as far as it has run), all from one read; `RssFile` is `None` on a
/// kernel that does not say it (before Linux 4.5).
pub(crate) fn memory_and_file_kib(pid: u32) -> Result<(u64, u64, Option<u64>), BenchError> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        fail(
            format!("reading {path} (did the process exit?)"),
            e.to_string(),
        )
    })?;
    let (rss, hwm) = vm_kib(&text).map_err(|e| BenchError::step(format!("parsing {path}"), &e))?;
    Ok((rss, hwm, status_kib(&text, "RssFile").ok()))
}

/// The number of KiB on the line `<name>: <number> kB` of a `/proc/<pid>/status`
/// (`liqo_daemon::memory::status_kib`).
fn status_kib(text: &str, name: &'static str) -> Result<u64, StatusError> {
    liqo_daemon::memory::status_kib(text, name).ok_or(StatusError::NoLine(name))
}

/// A `/proc/<pid>/status` without one of the lines read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StatusError {
    /// No line `<name>: <number> kB`.
    #[error("no {0} line")]
    NoLine(&'static str),
}

/// `VmRSS` and `VmHWM` from the text of `/proc/<pid>/status`, KiB.
pub(crate) fn vm_kib(text: &str) -> Result<(u64, u64), StatusError> {
    Ok((status_kib(text, "VmRSS")?, status_kib(text, "VmHWM")?))
}

/// CPU seconds (user + system) of `pid` so far.
pub(crate) fn cpu_secs(pid: u32, hz: u64) -> Result<f64, BenchError> {
    let path = format!("/proc/{pid}/stat");
    let line = std::fs::read_to_string(&path).map_err(|e| {
        fail(
            format!("reading {path} (did the process exit?)"),
            e.to_string(),
        )
    })?;
    let ticks = parse::proc_pid_ticks(&line)
        .map_err(|e| BenchError::step(format!("parsing {path}"), &e))?;
    Ok(ticks as f64 / hz.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_and_peak_memory_from_proc_status() {
        let text = "Name:\tliqo-controller\nVmPeak:\t  900000 kB\nVmHWM:\t   41234 kB\n\
                    VmRSS:\t   30120 kB\nThreads:\t5\n";
        assert_eq!(vm_kib(text), Ok((30120, 41234)));
        assert_eq!(vm_kib("Name: x\n"), Err(StatusError::NoLine("VmRSS")));
        assert_eq!(
            vm_kib("Name: x\n").unwrap_err().to_string(),
            "no VmRSS line"
        );
        let text = "VmRSS:\t   30120 kB\nRssAnon:\t   20000 kB\nRssFile:\t   10000 kB\n";
        assert_eq!(status_kib(text, "RssFile"), Ok(10000));
        assert_eq!(
            status_kib(text, "RssShmem"),
            Err(StatusError::NoLine("RssShmem"))
        );
    }

    #[test]
    fn our_own_memory_and_cpu_are_readable() {
        let me = std::process::id();
        let (rss, hwm) = memory_kib(me).unwrap();
        assert!(rss > 0 && hwm >= rss, "{rss} {hwm}");
        assert!(cpu_secs(me, 100).unwrap() >= 0.0);
        let (rss, _, file) = memory_and_file_kib(me).unwrap();
        let file = file.expect("RssFile (Linux >= 4.5)");
        assert!(file > 0 && file <= rss, "{file} {rss}");
        assert!(memory_and_file_kib(u32::MAX).is_err());
        assert!(memory_kib(u32::MAX).is_err());
    }
}
