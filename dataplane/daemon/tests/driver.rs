//! The reload loop end to end with a daemon that touches nothing: a real watched file, the
//! published status, retries on the tick, and what stops the loop.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use liqo_daemon::{
    ApplyError, Daemon, FieldError, Reload, ReloadStatus, RollbackFailed, digest,
    driver::StatusView,
    signal::Signal,
    source::ConfigFile,
    tasks::{BoxError, RunError, Tasks},
};
use liqo_types::field::bad;
use tokio::sync::oneshot;

/// Texts are `port=<n> value=<v>`; `value=bad` is invalid; the port cannot change while
/// running; applies fail while `broken` is set, leaving `half-<v>` in the "kernel" (a failed
/// rollback).
struct Fake {
    port: u16,
    value: String,
    kernel: Arc<Mutex<String>>,
    broken: Arc<AtomicBool>,
    sick: Arc<AtomicBool>,
    applies: Arc<AtomicU64>,
}

struct Cfg {
    port: u16,
    value: String,
}

impl Daemon for Fake {
    type Config = Cfg;

    fn parse(&self, text: &str) -> Result<Cfg, FieldError> {
        let mut cfg = Cfg {
            port: 0,
            value: String::new(),
        };
        for word in text.split_whitespace() {
            match word.split_once('=') {
                Some(("port", p)) => cfg.port = liqo_types::field::parse("port", p)?,
                Some(("value", "bad")) => return Err(bad("value", "is bad")),
                Some(("value", v)) => cfg.value = v.to_owned(),
                _ => return Err(bad("<file>", format!("what is {word:?}?"))),
            }
        }
        Ok(cfg)
    }

    async fn apply(&mut self, cfg: Cfg) -> Result<(), ApplyError> {
        self.applies.fetch_add(1, Ordering::Relaxed);
        if cfg.port != self.port {
            return Err(ApplyError::Refused(bad(
                "port",
                format!(
                    "cannot change from {} to {} while running",
                    self.port, cfg.port
                ),
            )));
        }
        if self.broken.load(Ordering::Relaxed) {
            *self.kernel.lock().unwrap() = format!("half-{}", cfg.value);
            let io = std::io::Error::other("Network is unreachable");
            let undo = std::io::Error::other("no route to host");
            return Err(ApplyError::Failed(RollbackFailed::join(
                Wrapped(io),
                Err::<(), _>(undo),
            )));
        }
        *self.kernel.lock().unwrap() = cfg.value.clone();
        self.value = cfg.value;
        Ok(())
    }

    fn health(&self) -> Result<(), BoxError> {
        if self.sick.load(Ordering::Relaxed) {
            return Err("a data-path thread stopped".into());
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("adding a route")]
struct Wrapped(#[source] std::io::Error);

struct Harness {
    dir: tempfile::TempDir,
    view: StatusView,
    broken: Arc<AtomicBool>,
    sick: Arc<AtomicBool>,
    applies: Arc<AtomicU64>,
    kernel: Arc<Mutex<String>>,
    stop: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<(Result<Signal, RunError>, String)>,
}

const FIRST: &str = "port=1 value=a\n";

impl Harness {
    fn start(tasks: Tasks) -> Harness {
        Harness::with_resync(tasks, None)
    }

    fn with_resync(tasks: Tasks, resync: Option<Duration>) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.conf");
        std::fs::write(&path, FIRST).unwrap();
        let source = ConfigFile::with_tick(&path, Duration::from_millis(50)).with_resync(resync);
        let kernel = Arc::new(Mutex::new("a".to_owned()));
        let text = source.read().unwrap();
        let (broken, sick, applies) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let mut daemon = Fake {
            port: 1,
            value: "a".into(),
            broken: Arc::clone(&broken),
            sick: Arc::clone(&sick),
            applies: Arc::clone(&applies),
            kernel: Arc::clone(&kernel),
        };
        let reload = Reload::started(&source, text);
        let view = reload.view();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            let r = reload
                .run(&mut daemon, source, tasks, async {
                    // A dropped sender stops the loop too.
                    let _closed = stopped.await;
                    Signal::Terminate
                })
                .await;
            (r, daemon.value)
        });
        Harness {
            dir,
            view,
            broken,
            sick,
            applies,
            kernel,
            stop: Some(stop),
            run,
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("d.conf")
    }

    /// Replaces the file atomically; returns the text's digest.
    fn write(&self, text: &str) -> String {
        let tmp = self.dir.path().join("d.conf.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.path()).unwrap();
        digest(text)
    }

    async fn wait(&mut self, what: &str, f: impl FnMut(&ReloadStatus) -> bool) -> ReloadStatus {
        let got = tokio::time::timeout(Duration::from_secs(5), self.view.wait_for(f))
            .await
            .map(|s| s.unwrap().clone());
        got.unwrap_or_else(|_| panic!("{what}: {:?}", *self.view.borrow()))
    }

    async fn stop(mut self) -> (Result<Signal, RunError>, String) {
        drop(self.stop.take());
        self.run.await.unwrap()
    }
}

#[tokio::test]
async fn refuse_and_keep_fail_and_retry_unreadable_and_back() {
    let mut h = Harness::start(Tasks::new());
    let s = h.view.borrow().clone();
    assert_eq!(s.applied.as_ref().unwrap().digest, digest(FIRST));
    assert!(s.source.ends_with("d.conf"), "{s:?}");

    let d = h.write("port=1 value=b\n");
    let s = h
        .wait("applied", |s| s.applied.as_ref().unwrap().digest == d)
        .await;
    assert_eq!(s.applied.unwrap().count, 2);

    // Invalid: refused with its field; the running text stays.
    let bad = h.write("port=1 value=bad\n");
    let s = h.wait("refused", |s| s.refused.is_some()).await;
    let r = s.refused.unwrap();
    assert_eq!((r.digest, r.field.as_str()), (bad, "value"));
    assert_eq!(s.applied.unwrap().digest, d, "the running state is kept");
    let applies = h.applies.load(Ordering::Relaxed);

    // Refused by the daemon (a field it cannot change while running): the same.
    let port = h.write("port=2 value=b\n");
    let s = h
        .wait("refused by apply", |s| {
            s.refused.as_ref().is_some_and(|r| r.digest == port)
        })
        .await;
    assert_eq!(s.refused.unwrap().field, "port");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        h.applies.load(Ordering::Relaxed),
        applies + 1,
        "a refused text is not retried on the tick"
    );

    // Back to the running text: cleared.
    h.write("port=1 value=b\n");
    h.wait("refusal cleared", |s| s.refused.is_none()).await;

    // A failing apply: shown, retried on the tick, cleared once it applies.
    h.broken.store(true, Ordering::Relaxed);
    let c = h.write("port=1 value=c\n");
    let s = h
        .wait("retried", |s| {
            s.apply_error.as_ref().is_some_and(|f| f.attempts >= 3)
        })
        .await;
    let f = s.apply_error.unwrap();
    assert_eq!(f.digest, c);
    assert_eq!(
        f.error,
        "adding a route: Network is unreachable; rolling back failed too: no route to host"
    );
    h.broken.store(false, Ordering::Relaxed);
    let s = h
        .wait("applied after retries", |s| {
            s.applied.as_ref().unwrap().digest == c
        })
        .await;
    assert_eq!(s.apply_error, None);
    assert_eq!(s.problem(), None);

    // Unreadable: removed, then a directory in its place, then back.
    std::fs::remove_file(h.path()).unwrap();
    let s = h.wait("missing", |s| s.read_error.is_some()).await;
    assert!(s.read_error.unwrap().contains("No such file"));
    std::fs::create_dir(h.path()).unwrap();
    h.wait("a directory", |s| {
        s.read_error
            .as_ref()
            .is_some_and(|e| e.contains("directory"))
    })
    .await;
    std::fs::remove_dir(h.path()).unwrap();
    h.write("port=1 value=c\n");
    let s = h.wait("readable", |s| s.read_error.is_none()).await;
    assert_eq!(
        s.applied.unwrap().count,
        3,
        "the same text is not applied again"
    );

    let (r, value) = h.stop().await;
    assert_eq!(r.unwrap(), Signal::Terminate);
    assert_eq!(value, "c");
}

#[tokio::test]
async fn a_failed_task_or_an_unhealthy_daemon_stops_the_loop() {
    let mut tasks = Tasks::new();
    let (fail, failed) = oneshot::channel::<()>();
    tasks.spawn("the status server", async move {
        // Fails when told, or when the test is over.
        let _told = failed.await;
        Err::<(), _>(std::io::Error::other("accept: too many open files"))
    });
    let h = Harness::start(tasks);
    fail.send(()).unwrap();
    let (r, _) = tokio::time::timeout(Duration::from_secs(5), h.run)
        .await
        .unwrap()
        .unwrap();
    let e = r.unwrap_err();
    assert!(
        matches!(&e, RunError::TaskFailed { name, .. } if name == "the status server"),
        "{e:?}"
    );

    let h = Harness::start(Tasks::new());
    h.sick.store(true, Ordering::Relaxed);
    let (r, _) = tokio::time::timeout(Duration::from_secs(5), h.run)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(r, Err(RunError::Unhealthy(_))), "{r:?}");
}

#[tokio::test]
async fn the_resync_restores_drift_and_a_failed_rollback_is_repaired() {
    let mut h = Harness::with_resync(Tasks::new(), Some(Duration::from_millis(100)));
    // Changed behind the daemon's back: the resync puts it back, nothing shown.
    *h.kernel.lock().unwrap() = "drift".into();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while *h.kernel.lock().unwrap() != "a" {
        assert!(tokio::time::Instant::now() < deadline, "not restored");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = h.view.borrow().clone();
    assert_eq!(s.problem(), None);
    assert_eq!(s.applied.unwrap().count, 1, "a resync is not counted");

    // A resync that fails is shown and retried; success clears it.
    h.broken.store(true, Ordering::Relaxed);
    let s = h
        .wait("resync failed", |s| {
            s.apply_error
                .as_ref()
                .is_some_and(|f| f.digest == digest(FIRST))
        })
        .await;
    assert_eq!(s.refused, None);
    h.broken.store(false, Ordering::Relaxed);
    h.wait("resync applied", |s| s.problem().is_none()).await;
    assert_eq!(*h.kernel.lock().unwrap(), "a");

    // b fails and so does its rollback: the kernel is half b. The file goes back to the running
    // text: it is applied again, and the status is clean only once that worked.
    h.broken.store(true, Ordering::Relaxed);
    let b = h.write("port=1 value=b\n");
    h.wait("b failed", |s| {
        s.apply_error.as_ref().is_some_and(|f| f.digest == b)
    })
    .await;
    h.write(FIRST);
    let s = h
        .wait("the running text failed", |s| {
            s.apply_error
                .as_ref()
                .is_some_and(|f| f.digest == digest(FIRST) && f.attempts >= 2)
        })
        .await;
    assert!(s.problem().is_some());
    assert_eq!(*h.kernel.lock().unwrap(), "half-a");
    h.broken.store(false, Ordering::Relaxed);
    let s = h.wait("repaired", |s| s.problem().is_none()).await;
    assert_eq!(*h.kernel.lock().unwrap(), "a", "converged when clean");
    assert_eq!(s.applied.unwrap().digest, digest(FIRST));
    let (r, value) = h.stop().await;
    assert_eq!(r.unwrap(), Signal::Terminate);
    assert_eq!(value, "a");
}
