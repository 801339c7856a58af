//! Every transition of the decision core.

use std::io;

use super::*;

use Trigger::{Changed, Resync, Tick};

const MS: Duration = Duration::from_millis(1);

fn core() -> Core {
    Core::started("/etc/d.yaml", "a".into())
}

fn ok(t: &str) -> Result<String, io::Error> {
    Ok(t.to_owned())
}

/// The file unreadable, for `why`.
fn unreadable(why: &str) -> Result<String, io::Error> {
    Err(io::Error::other(why.to_owned()))
}

fn try_(t: &str) -> Decision {
    Decision::Try(t.to_owned())
}

/// The failure shown: its text's digest, error and attempts.
fn failure(c: &Core) -> Option<(String, String, u64)> {
    let f = c.status().apply_error.clone()?;
    Some((f.digest, f.error, f.attempts))
}

fn fail(text: &str, error: &str, attempts: u64) -> Option<(String, String, u64)> {
    Some((digest(text), error.to_owned(), attempts))
}

fn count(c: &Core) -> u64 {
    c.status().applied.as_ref().unwrap().count
}

#[test]
fn start_counts_as_the_first_apply() {
    let c = core();
    let s = c.status();
    assert_eq!(s.source, "/etc/d.yaml");
    assert_eq!(
        s.applied,
        Some(Applied {
            digest: digest("a"),
            count: 1,
            micros: 0,
        })
    );
    assert_eq!(
        (&s.refused, &s.apply_error, &s.read_error),
        (&None, &None, &None)
    );
    assert_eq!(c.running(), "a");
    assert!(!c.dirty());
}

#[test]
fn the_running_text_is_not_applied_again_except_on_the_resync() {
    let mut c = core();
    assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
    assert_eq!(c.observe(ok("a"), Tick), Decision::Keep);
    assert_eq!(c.observe(ok("a"), Resync), try_("a"), "converged again");
    c.applied("a".into(), MS);
    assert_eq!(count(&c), 1, "a resync is not a new apply");
    assert_eq!(c.status().problem(), None);
    assert_eq!(c.observe(ok("a"), Tick), Decision::Keep);
}

#[test]
fn a_new_text_is_tried_and_once_applied_runs() {
    let mut c = core();
    assert_eq!(c.observe(ok("b"), Changed), try_("b"));
    c.applied("b".into(), Duration::from_micros(2500));
    assert_eq!(c.running(), "b");
    let a = c.status().applied.clone().unwrap();
    assert_eq!((a.digest, a.count, a.micros), (digest("b"), 2, 2500));
    // Converging it again keeps the time of the apply that made it run.
    c.applied("b".into(), MS);
    assert_eq!(c.status().applied.as_ref().unwrap().micros, 2500);
    assert_eq!(c.observe(ok("b"), Tick), Decision::Keep);
    // Back to an older text: a change like any other.
    assert_eq!(c.observe(ok("a"), Changed), try_("a"));
    // A new text seen first on a tick or a resync is tried the same.
    assert_eq!(c.observe(ok("c"), Tick), try_("c"));
    assert_eq!(c.observe(ok("c"), Resync), try_("c"));
}

#[test]
fn a_refused_text_is_kept_out_until_the_file_changes() {
    let mut c = core();
    assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
    c.refused("bad".into(), "peers[0].id", "is empty");
    let r = c.status().refused.clone().unwrap();
    assert_eq!(
        (r.digest.as_str(), r.field.as_str(), r.problem.as_str()),
        (digest("bad").as_str(), "peers[0].id", "is empty")
    );
    assert_eq!(c.running(), "a", "the running state is kept");
    assert!(!c.dirty(), "a refusal changes nothing");
    assert_eq!(c.observe(ok("bad"), Tick), Decision::Keep, "not retried");
    assert_eq!(c.observe(ok("bad"), Changed), Decision::Keep);
    assert!(c.status().refused.is_some(), "still refused");
    // Another text: tried; a second refusal replaces the first.
    assert_eq!(c.observe(ok("worse"), Changed), try_("worse"));
    c.refused("worse".into(), "mtu", "too small");
    assert_eq!(c.status().refused.as_ref().unwrap().field, "mtu");
    // Refused again after the file changed back to a refused text: tried again.
    assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
}

#[test]
fn the_resync_converges_the_running_text_while_a_refused_one_sits_in_the_file() {
    let mut c = core();
    c.observe(ok("bad"), Changed);
    c.refused("bad".into(), "f", "p");
    assert_eq!(c.observe(ok("bad"), Resync), try_("a"), "the running text");
    c.applied("a".into(), MS);
    assert_eq!(c.status().refused.as_ref().unwrap().field, "f", "kept");
    assert_eq!(count(&c), 1);
    // It fails: shown beside the refusal, retried on the ticks, cleared once it applies.
    assert_eq!(c.observe(ok("bad"), Resync), try_("a"));
    c.failed("a".into(), "route".into());
    assert_eq!(failure(&c), fail("a", "route", 1));
    let p = c.status().problem().unwrap();
    assert!(p.contains("f: p") && p.contains("route"), "{p}");
    assert_eq!(c.observe(ok("bad"), Changed), Decision::Keep);
    assert_eq!(c.observe(ok("bad"), Tick), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(failure(&c), None);
    assert!(c.status().refused.is_some());
    assert_eq!(c.observe(ok("bad"), Tick), Decision::Keep);
}

#[test]
fn back_to_the_running_text_clears_a_refusal() {
    let mut c = core();
    c.observe(ok("bad"), Changed);
    c.refused("bad".into(), "f", "p");
    assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
    assert_eq!(c.status().refused, None);
    assert_eq!(c.status().problem(), None);
    assert_eq!(count(&c), 1, "nothing re-applied");
    // And the once-refused text is tried again if it comes back.
    assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
}

#[test]
fn a_failed_apply_is_retried_on_ticks_and_counted() {
    let mut c = core();
    assert_eq!(c.observe(ok("b"), Changed), try_("b"));
    c.failed("b".into(), "RTNETLINK: network unreachable".into());
    assert_eq!(failure(&c), fail("b", "RTNETLINK: network unreachable", 1));
    assert_eq!(c.running(), "a");
    assert!(c.dirty());
    assert_eq!(
        c.observe(ok("b"), Changed),
        Decision::Keep,
        "not on every event"
    );
    assert_eq!(c.observe(ok("b"), Tick), try_("b"), "retried on the tick");
    c.failed("b".into(), "again".into());
    assert_eq!(failure(&c), fail("b", "again", 2));
    assert_eq!(c.observe(ok("b"), Resync), try_("b"), "and on the resync");
    c.failed("b".into(), "again".into());
    assert_eq!(failure(&c), fail("b", "again", 3));
    assert_eq!(c.observe(ok("b"), Tick), try_("b"));
    c.applied("b".into(), MS);
    assert_eq!(c.status().apply_error, None, "success clears the failure");
    assert!(!c.dirty());
    assert_eq!(count(&c), 2);
    assert_eq!(c.observe(ok("b"), Tick), Decision::Keep);
}

#[test]
fn a_failure_of_another_text_starts_counting_again() {
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x".into());
    c.observe(ok("b"), Tick);
    c.failed("b".into(), "x".into());
    assert_eq!(c.observe(ok("c"), Changed), try_("c"));
    c.failed("c".into(), "y".into());
    assert_eq!(failure(&c), fail("c", "y", 1));
}

#[test]
fn another_text_applied_after_a_failure_cleans_up() {
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x".into());
    assert_eq!(c.observe(ok("c"), Changed), try_("c"));
    c.applied("c".into(), MS);
    assert!(!c.dirty());
    assert_eq!((c.running(), count(&c)), ("c", 2));
    assert_eq!(c.status().problem(), None);
    assert_eq!(c.observe(ok("c"), Tick), Decision::Keep);
}

/// The reviewer's scenario: b fails and so does its rollback; the file goes back to the
/// running text. The kernel may hold a mix of both, so the running text is applied again, and
/// the status shows the failure until it applies.
#[test]
fn back_to_the_running_text_after_a_failure_applies_it_again() {
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x; rolling back failed too: y".into());
    assert_eq!(c.observe(ok("a"), Changed), try_("a"), "not just cleared");
    assert_eq!(
        failure(&c),
        fail("b", "x; rolling back failed too: y", 1),
        "shown until something applies"
    );
    c.failed("a".into(), "y".into());
    assert_eq!(failure(&c), fail("a", "y", 1), "now the running text's");
    assert_eq!(c.status().refused, None);
    assert_eq!(c.running(), "a");
    assert_eq!(
        c.observe(ok("a"), Changed),
        Decision::Keep,
        "not on every event"
    );
    assert_eq!(c.observe(ok("a"), Tick), try_("a"), "retried on the tick");
    c.failed("a".into(), "y".into());
    assert_eq!(failure(&c), fail("a", "y", 2));
    assert_eq!(c.observe(ok("a"), Resync), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(c.status().problem(), None, "clean once it applied");
    assert!(!c.dirty());
    assert_eq!(count(&c), 1, "the same text: not counted");
    assert_eq!(c.observe(ok("a"), Tick), Decision::Keep, "nothing left");
    // Seen first on a tick: the same.
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x".into());
    assert_eq!(c.observe(ok("a"), Tick), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(c.status().problem(), None);
}

#[test]
fn a_refusal_after_a_failure_keeps_it_and_repairs_the_running_text() {
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x".into());
    assert_eq!(c.observe(ok("bad"), Changed), try_("bad"));
    c.refused("bad".into(), "f", "p");
    assert!(c.status().refused.is_some());
    assert_eq!(
        failure(&c),
        fail("b", "x", 1),
        "b's failure may still show in the kernel"
    );
    assert_eq!(c.observe(ok("bad"), Changed), try_("a"), "repaired");
    c.failed("a".into(), "y".into());
    assert_eq!(failure(&c), fail("a", "y", 1));
    assert!(
        c.status().refused.is_some(),
        "the file's text is still refused"
    );
    assert_eq!(c.observe(ok("bad"), Changed), Decision::Keep);
    assert_eq!(c.observe(ok("bad"), Tick), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(c.status().apply_error, None);
    assert!(c.status().refused.is_some());
    assert_eq!(c.observe(ok("bad"), Tick), Decision::Keep);
    // A failed text replaces the refusal.
    assert_eq!(c.observe(ok("b"), Changed), try_("b"));
    c.failed("b".into(), "x".into());
    assert_eq!(c.status().refused, None);
    assert_eq!(failure(&c), fail("b", "x", 1));
    assert_eq!(c.observe(ok("b"), Tick), try_("b"));
    // A refused text after a failure, then applied: everything clears.
    c.observe(ok("bad2"), Changed);
    c.refused("bad2".into(), "g", "q");
    assert_eq!(c.observe(ok("c"), Changed), try_("c"));
    c.applied("c".into(), MS);
    assert_eq!(c.status().problem(), None);
}

#[test]
fn an_apply_refused_by_the_daemon_counts_as_refused() {
    let mut c = core();
    c.observe(ok("port"), Changed);
    c.refused(
        "port".into(),
        "listenPort",
        "cannot change from 1 to 2 while running",
    );
    assert_eq!(c.observe(ok("port"), Tick), Decision::Keep);
    assert_eq!(c.status().refused.as_ref().unwrap().field, "listenPort");
}

#[test]
fn the_running_text_refused_when_converged_again_is_a_failure() {
    let mut c = core();
    assert_eq!(c.observe(ok("a"), Resync), try_("a"));
    c.refused("a".into(), "f", "p");
    assert_eq!(c.status().refused, None, "the file is not to blame");
    assert_eq!(failure(&c), fail("a", "refused: f: p", 1));
    assert_eq!(c.observe(ok("a"), Tick), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(c.status().problem(), None);
}

#[test]
fn an_unreadable_file_is_reported_until_it_is_readable() {
    let mut c = core();
    assert_eq!(c.observe(unreadable("no such file"), Tick), Decision::Keep);
    assert_eq!(c.status().read_error.as_deref(), Some("no such file"));
    assert!(c.status().problem().unwrap().contains("no such file"));
    assert_eq!(c.running(), "a", "the running state is kept");
    assert_eq!(
        c.observe(unreadable("is a directory"), Changed),
        Decision::Keep
    );
    assert_eq!(c.status().read_error.as_deref(), Some("is a directory"));
    // The running text is still converged on the resync.
    assert_eq!(c.observe(unreadable("is a directory"), Resync), try_("a"));
    c.applied("a".into(), MS);
    assert_eq!(c.status().read_error.as_deref(), Some("is a directory"));
    assert_eq!(c.observe(ok("a"), Changed), Decision::Keep);
    assert_eq!(c.status().read_error, None);
    assert_eq!(c.status().problem(), None);
    // Readable again with a new text: cleared, and the text is tried.
    c.observe(unreadable("gone"), Tick);
    assert_eq!(c.observe(ok("b"), Changed), try_("b"));
    assert_eq!(c.status().read_error, None);
}

#[test]
fn an_unreadable_file_keeps_the_refusal() {
    let mut c = core();
    c.observe(ok("bad"), Changed);
    c.refused("bad".into(), "f", "p");
    assert_eq!(c.observe(unreadable("gone"), Tick), Decision::Keep);
    let s = c.status();
    assert!(s.refused.is_some() && s.read_error.is_some());
    let p = s.problem().unwrap();
    assert!(p.contains("gone") && p.contains("f: p"), "{p}");
}

#[test]
fn an_unreadable_file_after_a_failure_repairs_the_running_text() {
    let mut c = core();
    c.observe(ok("b"), Changed);
    c.failed("b".into(), "x".into());
    assert_eq!(c.observe(unreadable("gone"), Changed), try_("a"));
    c.failed("a".into(), "y".into());
    assert_eq!(failure(&c), fail("a", "y", 1));
    assert_eq!(c.observe(unreadable("gone"), Changed), Decision::Keep);
    assert_eq!(c.observe(unreadable("gone"), Tick), try_("a"));
    c.applied("a".into(), MS);
    let s = c.status();
    assert_eq!(s.apply_error, None);
    assert_eq!(s.read_error.as_deref(), Some("gone"), "still unreadable");
    assert_eq!(c.observe(unreadable("gone"), Tick), Decision::Keep);
    assert_eq!(c.observe(ok("b"), Tick), try_("b"), "tried once readable");
}
