use std::{
    fs, thread,
    time::{Duration, Instant},
};

use super::*;

fn log(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("liqo-supervisor-{}-{name}.log", std::process::id()))
}

/// A shell that says `ready`, then runs until SIGKILL: it ignores SIGTERM (`on_term` empty) or
/// runs `on_term` on it.
fn stubborn(log: &Path, on_term: &str) -> Spec {
    Spec::new("sh", "/bin/sh", log)
        .args([
            "-c".to_owned(),
            format!("trap '{on_term}' TERM; echo ready; while :; do sleep 0.05; done"),
        ])
        .truncate_log()
}

/// Polls `f` every 10 ms for up to 5 s.
fn within_5s(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn a_detached_process_is_ours_until_stopped_and_its_log_is_tailed() {
    let l = log("detached");
    let p = Spec::new("sh", "/bin/sh", &l)
        .args(["-c", "echo one; echo; echo two; exec sleep 30"])
        .truncate_log()
        .detached()
        .unwrap();
    assert!(alive(p.pid));
    assert!(within_5s(|| tail(&l, 5).contains("two")));
    assert_eq!(tail(&l, 5), "one\n    two");
    // After the exec the program is `sleep`: a pid running another program is not ours.
    assert!(within_5s(|| is_ours(p.pid, "sleep")));
    assert!(!is_ours(p.pid, "sh"));
    let p = Proc {
        name: "sleep".into(),
        ..p
    };
    assert_eq!(stop(&p, Duration::from_secs(5)), Stopped::Exited);
    assert!(!alive(p.pid));
    assert_eq!(stop(&p, Duration::from_secs(1)), Stopped::NotRunning);
    fs::remove_file(&l).unwrap();
}

#[test]
fn sigkill_after_the_grace_period() {
    let l = log("stubborn");
    let p = stubborn(&l, "").detached().unwrap();
    assert!(within_5s(|| tail(&l, 1).contains("ready")));
    assert_eq!(stop(&p, Duration::from_millis(300)), Stopped::Killed);
    fs::remove_file(&l).unwrap();
}

#[test]
fn an_attached_child_reports_its_exit_and_an_unknown_program_fails() {
    let l = log("attached");
    let mut c = Spec::new("sh", "/bin/sh", &l)
        .args(["-c", "echo \"$GREETING\" \"${GONE:-gone}\"; exit 3"])
        .env("GREETING", "hello")
        .env("GONE", "here")
        .env_remove("GONE")
        .truncate_log()
        .attached()
        .unwrap();
    let status = c.wait_exit(Duration::from_secs(5)).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(3));
    assert_eq!(c.log_tail(), "hello gone");
    let e = c.stop(Duration::from_millis(100)).unwrap();
    assert_eq!((e.status.code(), e.killed), (Some(3), false));
    let e = Spec::new("nope", "/nonexistent/nope", &l)
        .attached()
        .unwrap_err();
    assert!(e.to_string().contains("starting nope"), "{e}");
    drop(c);
    fs::remove_file(&l).unwrap();
    let e = Spec::new("sh", "/bin/sh", "/nonexistent/dir/x.log")
        .detached()
        .unwrap_err();
    assert!(matches!(e, Error::Log { .. }), "{e}");
}

#[test]
fn an_attached_child_stops_on_sigterm_or_takes_sigkill() {
    let l = log("attached-stop");
    let mut c = Spec::new("sleep", "sleep", &l)
        .args(["30"])
        .attached()
        .unwrap();
    assert_eq!(c.wait_exit(Duration::from_millis(50)).unwrap(), None);
    let e = c.stop(Duration::from_secs(5)).unwrap();
    assert!(!e.killed);
    assert_eq!(e.status.code(), None, "ended by SIGTERM: {:?}", e.status);
    assert!(!alive(c.pid()));

    let mut c = stubborn(&l, "").attached().unwrap();
    assert!(within_5s(|| c.tail(1).contains("ready")));
    let e = c.stop(Duration::from_millis(300)).unwrap();
    assert!(e.killed && e.after >= Duration::from_millis(300), "{e:?}");
    // Stopping again reports the same end.
    assert_eq!(c.stop(Duration::from_secs(1)).unwrap().status, e.status);
    fs::remove_file(&l).unwrap();
}

#[test]
fn a_kill_on_drop_child_is_gone_after_the_drop_without_sigterm() {
    let l = log("kill-on-drop");
    let c = stubborn(&l, "echo got TERM")
        .kill_on_drop()
        .attached()
        .unwrap();
    assert!(within_5s(|| c.tail(1).contains("ready")));
    let pid = c.pid();
    drop(c);
    assert!(!alive(pid));
    assert!(!tail(&l, 5).contains("got TERM"), "{}", tail(&l, 5));
    fs::remove_file(&l).unwrap();
}

#[test]
fn a_tail_leaves_out_a_backtrace_and_keeps_the_error() {
    let log = "starting\nError: the webhook port 127.0.0.1:9443 is in use\n\nStack backtrace:\n   0: std::backtrace::Backtrace::create\n             at /rustc/x/library/std/src/backtrace.rs:331:13\n  21: main\n   note: Some details are omitted, run with `RUST_BACKTRACE=full`\n";
    assert_eq!(
        pid::tail_of(log, 2),
        "starting\n    Error: the webhook port 127.0.0.1:9443 is in use"
    );
    let panic = "thread 'main' panicked at src/run.rs:3:5:\nboom\nstack backtrace:\n   0: rust_begin_unwind\n";
    assert_eq!(pid::tail_of(panic, 1), "boom");
    // anyhow's numbered causes stay; only a backtrace's lines go.
    let chain = "Error: the webhooks\n\nCaused by:\n    0: Secret liqo/x\n    1: connection refused\n\nStack backtrace:\n   0: anyhow::error\n             at ./src/x.rs:1:2\n";
    assert_eq!(
        pid::tail_of(chain, 4),
        "Error: the webhooks\n    Caused by:\n        0: Secret liqo/x\n        1: connection refused"
    );
}
