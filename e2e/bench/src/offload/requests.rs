//! Requests per pod, from the API servers' audit logs (the harness's `Named::audit`): every
//! request of a timed run (from the create to every pod gone on both sides) by cluster, client,
//! verb and resource. The client is who made it: our program named in its user agent
//! (`liqo-virtual-kubelet/0.1.0`), else a ServiceAccount's name, a kube-controller-manager
//! controller (`kcm/<controller>`, from its user agent), the program of the user agent, or the
//! user.
//!
//! A run's requests are the lines written between two [`Mark`]s (the audit log is buffered for
//! up to a second: [`Mark::now`] waits that long first).

use std::{
    collections::BTreeMap,
    io::{Read, Seek, SeekFrom},
    path::PathBuf,
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::BenchError;

/// How long the API server may hold an audit line before writing it
/// (`--audit-log-batch-max-wait` plus margin).
const FLUSH: Duration = Duration::from_millis(1500);

/// Where each cluster's audit log ended at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Mark(Vec<(String, PathBuf, u64)>);

impl Mark {
    /// The end of each log (`(cluster, path)`), once what happened before is written.
    pub(crate) async fn now(logs: &[(String, PathBuf)]) -> Result<Mark, BenchError> {
        tokio::time::sleep(FLUSH).await;
        let mut out = Vec::new();
        for (cluster, path) in logs {
            let len = std::fs::metadata(path)
                .map_err(|e| BenchError::step(format!("the audit log {}", path.display()), &e))?
                .len();
            out.push((cluster.clone(), path.clone(), len));
        }
        Ok(Mark(out))
    }

    /// The requests written between `self` and `end`.
    pub(crate) fn until(&self, end: &Mark) -> Result<Counts, BenchError> {
        let mut counts = Counts::default();
        for ((cluster, path, from), (_, _, to)) in self.0.iter().zip(&end.0) {
            let text = read_range(path, *from, *to)
                .map_err(|e| BenchError::step(format!("reading {}", path.display()), &e))?;
            counts.add_lines(cluster, &text);
        }
        Ok(counts)
    }
}

fn read_range(path: &std::path::Path, from: u64, to: u64) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity(to.saturating_sub(from) as usize);
    f.take(to.saturating_sub(from)).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// One audit line, as far as it is read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    stage: String,
    verb: String,
    #[serde(default)]
    user: User,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
}

#[derive(Debug, Default, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Debug, Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: Option<String>,
}

/// What a request is counted under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestKey {
    /// The cluster whose API server answered.
    pub cluster: String,
    /// Who made it (see the module doc).
    pub client: String,
    /// The verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...).
    pub verb: String,
    /// The resource, with `/subresource`.
    pub resource: String,
}

impl RequestKey {
    /// Whether it changes something.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// Requests counted by [`RequestKey`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts(pub BTreeMap<RequestKey, u64>);

impl Counts {
    /// Counts every request of `text` (audit JSON lines) answered by `cluster`: once each, when
    /// its response completed (a watch: when it started). A line that does not parse (the
    /// last, cut by the mark) is skipped.
    pub fn add_lines(&mut self, cluster: &str, text: &str) {
        for line in text.lines() {
            let Ok(l) = serde_json::from_str::<Line>(line) else {
                continue;
            };
            let counted = if l.verb == "watch" {
                l.stage == "ResponseStarted"
            } else {
                l.stage == "ResponseComplete"
            };
            if !counted {
                continue;
            }
            let resource = match &l.object_ref {
                Some(o) => match &o.subresource {
                    Some(s) if !s.is_empty() => format!("{}/{s}", o.resource),
                    _ => o.resource.clone(),
                },
                None => "(none)".into(),
            };
            let key = RequestKey {
                cluster: cluster.to_owned(),
                client: client(&l.user.username, &l.user_agent),
                verb: l.verb,
                resource,
            };
            *self.0.entry(key).or_default() += 1;
        }
    }

    /// Per (cluster, client): reads and writes, each per pod, and the writes and the reads by
    /// verb and resource per pod (largest first).
    pub fn per_client(&self, pods: u32) -> Vec<ClientRequests> {
        let pods = f64::from(pods.max(1));
        let mut by: BTreeMap<(String, String), ClientRequests> = BTreeMap::new();
        for (k, n) in &self.0 {
            let e = by
                .entry((k.cluster.clone(), k.client.clone()))
                .or_insert_with(|| ClientRequests {
                    cluster: k.cluster.clone(),
                    client: k.client.clone(),
                    ..ClientRequests::default()
                });
            let per = *n as f64 / pods;
            if k.is_write() {
                e.writes += per;
                e.writes_by
                    .push((format!("{} {}", k.verb, k.resource), per));
            } else if k.verb == "watch" {
                e.watches += per;
            } else {
                e.reads += per;
                e.reads_by.push((format!("{} {}", k.verb, k.resource), per));
            }
        }
        let mut out: Vec<ClientRequests> = by.into_values().collect();
        for c in &mut out {
            c.writes_by.sort_by(|a, b| b.1.total_cmp(&a.1));
            c.reads_by.sort_by(|a, b| b.1.total_cmp(&a.1));
        }
        out.sort_by(|a, b| {
            (b.reads + b.writes)
                .total_cmp(&(a.reads + a.writes))
                .then(a.cluster.cmp(&b.cluster))
        });
        out
    }
}

/// One client's requests on one API server, per pod.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRequests {
    /// The cluster.
    pub cluster: String,
    /// The client.
    pub client: String,
    /// get and list, per pod.
    pub reads: f64,
    /// Watches opened, per pod.
    pub watches: f64,
    /// create, update, patch, delete, per pod.
    pub writes: f64,
    /// The writes by `verb resource`, per pod, largest first.
    pub writes_by: Vec<(String, f64)>,
    /// The reads by `verb resource`, per pod, largest first.
    #[serde(default)]
    pub reads_by: Vec<(String, f64)>,
}

/// Who made a request (see the module doc).
pub fn client(username: &str, user_agent: &str) -> String {
    let program = user_agent.split('/').next().unwrap_or_default();
    // Ours name themselves (a virtual kubelet may run with the controller-manager's identity).
    if program.starts_with("liqo") {
        return program.to_owned();
    }
    if let Some(sa) = username.strip_prefix("system:serviceaccount:") {
        return sa.rsplit(':').next().unwrap_or(sa).to_owned();
    }
    if program == "kube-controller-manager" {
        let controller = user_agent.rsplit('/').next().unwrap_or_default();
        return format!("kcm/{controller}");
    }
    if !program.is_empty() && !program.starts_with("kube-rs") && !program.starts_with("kubectl") {
        return program.to_owned();
    }
    if username.is_empty() {
        "(anonymous)".into()
    } else {
        username.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = r#"{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"system:serviceaccount:liqo:liqo-controller-manager"},"userAgent":"kube-rs/5.0.0","objectRef":{"resource":"pods","namespace":"a","name":"p"}}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","user":{"username":"system:serviceaccount:liqo:liqo-controller-manager"},"userAgent":"kube-rs/5.0.0","objectRef":{"resource":"pods","subresource":"status"}}
{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"system:serviceaccount:liqo:liqo-controller-manager"},"userAgent":"kube-rs/5.0.0","objectRef":{"resource":"pods"}}
{"kind":"Event","stage":"ResponseStarted","verb":"watch","user":{"username":"admin"},"userAgent":"kube-scheduler/v1.36.3 (linux/amd64) kubernetes/abc/scheduler","objectRef":{"resource":"pods"}}
{"kind":"Event","stage":"ResponseComplete","verb":"watch","user":{"username":"admin"},"userAgent":"kube-scheduler/v1.36.3","objectRef":{"resource":"pods"}}
{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"admin"},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/replicaset-controller","objectRef":{"resource":"pods"}}
{"kind":"Event","stage":"ResponseComp"#;

    #[test]
    fn requests_are_counted_once_by_client_verb_and_resource() {
        let mut c = Counts::default();
        c.add_lines("milan", LINES);
        let total: u64 = c.0.values().sum();
        assert_eq!(total, 5, "{c:?}");
        let rows = c.per_client(2);
        let cm = rows
            .iter()
            .find(|r| r.client == "liqo-controller-manager")
            .unwrap();
        assert_eq!((cm.reads, cm.writes), (0.5, 1.0));
        assert_eq!(cm.writes_by.len(), 2);
        assert_eq!(cm.reads_by, [("get pods".to_owned(), 0.5)]);
        let s = rows.iter().find(|r| r.client == "kube-scheduler").unwrap();
        assert_eq!(s.watches, 0.5);
        assert!(rows.iter().any(|r| r.client == "kcm/replicaset-controller"));
    }

    #[test]
    fn a_service_account_a_controller_and_a_program_name_the_client() {
        assert_eq!(
            client("system:serviceaccount:liqo:liqo-virtual-kubelet", "x"),
            "liqo-virtual-kubelet"
        );
        assert_eq!(client("admin", "kwok/v0.7 (linux)"), "kwok");
        assert_eq!(client("liqo-rome", "kube-rs/5.0.0"), "liqo-rome");
        assert_eq!(
            client(
                "system:serviceaccount:liqo:liqo-controller-manager",
                "liqo-virtual-kubelet/0.1.0"
            ),
            "liqo-virtual-kubelet"
        );
        assert_eq!(client("", ""), "(anonymous)");
    }
}
