//! The IPAM's state in one ConfigMap of the API server (`liqo-ipam serve --store configmap`),
//! so that a rescheduled pod keeps every allocation. The ConfigMap holds the JSON the file store
//! writes under [`DATA_KEY`], the label `app.kubernetes.io/managed-by: liqo-ipam` and the state's
//! format version in [`VERSION_ANNOTATION`].
//!
//! **Compare-and-swap.** The store needs only `get` of its ConfigMap, `create` and `update`: a
//! load reads the object and remembers its resourceVersion; a save replaces it with that
//! resourceVersion as the precondition (or creates it when none was seen) and remembers the new
//! one. A 409 (another writer replaced or created it) is [`StoreError::Conflict`], naming the
//! ConfigMap: nothing is written, and the service undoes the change. A write whose outcome is
//! unknown (no answer in time, a 5xx) is settled by reading the object back: our data there is
//! a success, the version we expected there is a failure, anything else a conflict. A 404 on a
//! replace (someone deleted it) creates it again, which a writer that made a new one meanwhile
//! turns into a conflict.
//!
//! **Sync over async.** [`Store`] is synchronous: the service saves under its writer lock, and
//! acknowledges a call only once the save returned. kube's client is async, so each store runs
//! it on a thread of its own with a single-threaded tokio runtime: a load or save sends the
//! request over a channel and waits for the answer on a plain (std) channel. That works from any
//! caller (a sync test, `spawn_blocking`, a current-thread runtime: no `block_on` inside a
//! runtime, no `block_in_place`), keeps the client's connections on a runtime that never waits
//! for the service, and bounds each request ([`REQUEST_TIMEOUT`]). The service runs every change
//! (and the start) off its runtime's workers with `spawn_blocking`, so a slow API server delays
//! the changes, never the reads or the other tasks. The thread ends when the store is dropped.

mod object;

use std::{future::Future, pin::Pin, sync::mpsc as std_mpsc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, api::PostParams};
use tokio::sync::mpsc;

pub use object::{
    DATA_KEY, MANAGED_BY, MANAGED_BY_LABEL, MAX_DATA, Target, VERSION_ANNOTATION, check_name,
    check_namespace, check_subdomain,
};
use object::{Failure, Seen, classify};

use super::{Store, StoreError};
use crate::state::State;

mod error;
pub use error::{ConfigMapError, InvalidContent};

/// The ConfigMap's name when none is given.
pub const DEFAULT_NAME: &str = "liqo-ipam-state";
/// Its namespace when none is given.
pub const DEFAULT_NAMESPACE: &str = "liqo";
/// How long one request to the API server may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A request for the store's thread, run with the ConfigMaps API of its namespace.
type Job = Box<dyn FnOnce(Api<ConfigMap>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// How one request ended.
enum Outcome<T> {
    Done(T),
    Failed(kube::Error),
    TimedOut,
}

/// The IPAM's state in a ConfigMap, written with compare-and-swap (see the module doc).
pub struct ConfigMapStore {
    target: Target,
    jobs: mpsc::UnboundedSender<Job>,
    /// The object as last read or written; `None`: absent (the next save creates it).
    seen: Option<Seen>,
    /// Digests of the data this store loaded or wrote lately, and of writes whose outcome was
    /// unknown (such a write may land after it was given up): a 409 over data of ours is no
    /// other writer.
    ours: Ours,
}

/// The digests of the last few data this store loaded or sent.
#[derive(Debug, Default)]
struct Ours(std::collections::VecDeque<u64>);

impl Ours {
    const KEPT: usize = 8;

    fn digest(json: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        json.hash(&mut h);
        h.finish()
    }

    fn note(&mut self, json: &str) {
        if self.0.len() == Self::KEPT {
            self.0.pop_front();
        }
        self.0.push_back(Self::digest(json));
    }

    fn holds(&self, json: &str) -> bool {
        self.0.contains(&Self::digest(json))
    }
}

impl std::fmt::Debug for ConfigMapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigMapStore")
            .field("target", &self.target)
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl ConfigMapStore {
    /// A store on `target` with the client of `Client::try_default` (the in-cluster config, or
    /// `KUBECONFIG`). Nothing is read yet.
    pub fn connect(target: Target) -> Result<ConfigMapStore, ConfigMapError> {
        ConfigMapStore::spawn(target, None)
    }

    /// A store on `target` with the client of `config`.
    pub fn with_config(
        target: Target,
        config: kube::Config,
    ) -> Result<ConfigMapStore, ConfigMapError> {
        ConfigMapStore::spawn(target, Some(config))
    }

    fn spawn(
        target: Target,
        config: Option<kube::Config>,
    ) -> Result<ConfigMapStore, ConfigMapError> {
        let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready) = std_mpsc::sync_channel(1);
        let namespace = target.namespace.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ConfigMapError::Thread)?;
        // Detached: it ends once the store (the only sender) is dropped and the last job ran.
        let _detached = std::thread::Builder::new()
            .name("ipam-configmap".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let client = match config {
                        Some(c) => Client::try_from(c),
                        None => Client::try_default().await,
                    };
                    let api = match client {
                        Ok(c) => Api::<ConfigMap>::namespaced(c, &namespace),
                        Err(e) => {
                            // The constructor waits for this answer; it cannot be gone.
                            let _ = ready_tx.send(Err(ConfigMapError::Client(e)));
                            return;
                        }
                    };
                    // As above: the constructor is waiting.
                    let _ = ready_tx.send(Ok(()));
                    while let Some(job) = rx.recv().await {
                        job(api.clone()).await;
                    }
                });
            })
            .map_err(ConfigMapError::Thread)?;
        ready.recv().map_err(|_| ConfigMapError::Stopped)??;
        Ok(ConfigMapStore {
            target,
            jobs,
            seen: None,
            ours: Ours::default(),
        })
    }

    /// The ConfigMap.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The resourceVersion last read or written, if any.
    pub fn resource_version(&self) -> Option<&str> {
        self.seen.as_ref().map(|s| s.resource_version.as_str())
    }

    /// Runs `f` on the store's thread, within [`REQUEST_TIMEOUT`], and waits for its outcome.
    fn call<T, F, Fut>(&self, f: F) -> Result<Outcome<T>, ConfigMapError>
    where
        T: Send + 'static,
        F: FnOnce(Api<ConfigMap>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, kube::Error>> + Send + 'static,
    {
        let (tx, rx) = std_mpsc::sync_channel(1);
        let job: Job = Box::new(move |api| {
            Box::pin(async move {
                let outcome = match tokio::time::timeout(REQUEST_TIMEOUT, f(api)).await {
                    Ok(Ok(v)) => Outcome::Done(v),
                    Ok(Err(e)) => Outcome::Failed(e),
                    Err(_) => Outcome::TimedOut,
                };
                // The caller waits for this answer below; it cannot be gone.
                let _ = tx.send(outcome);
            })
        });
        self.jobs.send(job).map_err(|_| ConfigMapError::Stopped)?;
        rx.recv().map_err(|_| ConfigMapError::Stopped)
    }

    fn failed(&self, op: &'static str, source: kube::Error) -> ConfigMapError {
        ConfigMapError::Api {
            op,
            configmap: self.target.to_string(),
            source,
        }
    }

    fn timed_out(&self, op: &'static str) -> ConfigMapError {
        ConfigMapError::Timeout {
            op,
            configmap: self.target.to_string(),
            secs: REQUEST_TIMEOUT.as_secs(),
        }
    }

    fn conflict(&self, expected: Option<&str>) -> StoreError {
        StoreError::Conflict {
            configmap: self.target.to_string(),
            expected: expected.unwrap_or("none").to_owned(),
        }
    }

    /// The object as the API server has it now.
    fn get(&self) -> Result<Option<ConfigMap>, ConfigMapError> {
        let name = self.target.name.clone();
        match self.call(move |api| async move { api.get_opt(&name).await })? {
            Outcome::Done(cm) => Ok(cm),
            Outcome::Failed(e) => Err(self.failed("reading", e)),
            Outcome::TimedOut => Err(self.timed_out("reading")),
        }
    }

    /// Decides a write whose outcome is unknown by reading the object back: `json` there is a
    /// success (remembered), the version `expected` there is `cause`, anything else a conflict.
    fn settle(
        &mut self,
        json: &str,
        expected: Option<String>,
        cause: ConfigMapError,
    ) -> Result<(), StoreError> {
        let now = match self.get() {
            Ok(now) => now,
            Err(e) => {
                tracing::warn!(configmap = %self.target, error = %liqo_types::chain(&e), "reading the ConfigMap back after a write of unknown outcome");
                return Err(cause.into());
            }
        };
        match now {
            Some(cm) if object::data(&cm) == Some(json) => {
                self.seen = Some(Seen::of(&self.target, &cm)?);
                Ok(())
            }
            Some(cm) if cm.metadata.resource_version == expected => Err(cause.into()),
            None if expected.is_none() => Err(cause.into()),
            _ => Err(self.conflict(expected.as_deref())),
        }
    }
}

impl Store for ConfigMapStore {
    fn describe(&self) -> String {
        format!("configmap {}", self.target)
    }

    fn load(&mut self) -> Result<Option<State>, StoreError> {
        let Some(cm) = self.get()? else {
            self.seen = None;
            return Ok(None);
        };
        let state = object::decode(&self.target, &cm)?;
        self.seen = Some(Seen::of(&self.target, &cm)?);
        if let Some(d) = object::data(&cm) {
            self.ours.note(d);
        }
        Ok(Some(state))
    }

    fn save(&mut self, state: &State) -> Result<(), StoreError> {
        self.save_once(state, true)
    }
}

impl ConfigMapStore {
    /// One save; on a 409 over data of ours (an edit of the metadata only, or a write of ours
    /// that landed after it was given up), the object's new version is taken and the save
    /// tried again once (`retry`).
    fn save_once(&mut self, state: &State, retry: bool) -> Result<(), StoreError> {
        let json = object::encode_state(state)?;
        let cm = object::object(
            &self.target,
            json.clone(),
            state.version,
            self.seen.as_ref(),
        );
        let expected = self.resource_version().map(str::to_owned);
        let creating = expected.is_none();
        let op = if creating { "creating" } else { "replacing" };
        let name = self.target.name.clone();
        let outcome = self.call(move |api| async move {
            let pp = PostParams::default();
            if creating {
                api.create(&pp, &cm).await
            } else {
                api.replace(&name, &pp, &cm).await
            }
        })?;
        match outcome {
            Outcome::Done(cm) => {
                self.seen = Some(Seen::of(&self.target, &cm)?);
                self.ours.note(&json);
                Ok(())
            }
            Outcome::Failed(e) => match classify(&e, creating) {
                Failure::Conflict if retry => match self.get() {
                    Ok(Some(now)) if object::data(&now).is_some_and(|d| self.ours.holds(d)) => {
                        tracing::info!(configmap = %self.target, "the ConfigMap changed but holds our data: writing over its new version");
                        self.seen = Some(Seen::of(&self.target, &now)?);
                        self.save_once(state, false)
                    }
                    _ => Err(self.conflict(expected.as_deref())),
                },
                Failure::Conflict => Err(self.conflict(expected.as_deref())),
                Failure::Gone => {
                    tracing::warn!(configmap = %self.target, "the ConfigMap was deleted; creating it again");
                    self.seen = None;
                    self.save_once(state, retry)
                }
                Failure::Refused => Err(self.failed(op, e).into()),
                Failure::Unknown => {
                    let cause = self.failed(op, e);
                    self.ours.note(&json);
                    self.settle(&json, expected, cause)
                }
            },
            Outcome::TimedOut => {
                let cause = self.timed_out(op);
                self.ours.note(&json);
                self.settle(&json, expected, cause)
            }
        }
    }
}
