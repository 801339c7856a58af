//! The back-off, the progress signs and the class switch.

use super::*;

#[test]
fn a_thread_awake_without_a_step_for_the_stall_time_is_stalled_not_one_asleep() {
    let p = Progress::new(2);
    let t0 = Instant::now();
    assert!(!p.stalled(t0 + 10 * STALL), "asleep");
    p.stepped(1, t0);
    assert!(!p.stalled(t0 + STALL / 2));
    assert!(p.stalled(t0 + STALL * 2));
    p.stepped(1, t0 + STALL * 2);
    assert!(!p.stalled(t0 + STALL * 2 + STALL / 2), "progress again");
    p.sleeps(1);
    assert!(!p.stalled(t0 + STALL * 10));
    // Out of range: ignored.
    p.stepped(5, t0);
    p.worked(5);
    assert!(!p.stalled(t0 + STALL * 10));
    assert!(!p.take_worked());
    p.worked(0);
    assert!(p.take_worked());
    assert!(!p.take_worked(), "taken");
}

#[test]
fn a_datagram_read_late_counts_once_and_one_read_at_once_not_at_all() {
    let p = Progress::new(1);
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    p.arrived(now());
    assert_eq!(p.starved(Instant::now()), None, "read at once");
    p.arrived(now() - 10 * LATE);
    assert!(p.starved(Instant::now()).is_some(), "read late");
    assert_eq!(p.starved(Instant::now()), None, "said once");
    // From the future (a clock stepped back): not late.
    p.arrived(now() + 10 * LATE);
    assert_eq!(p.starved(Instant::now()), None);
}

#[test]
fn starving_in_the_idle_class_backs_off_longer_each_time_and_forgives_after_a_while() {
    let t0 = Instant::now();
    let b = Backoff::default();
    // Home and never starved: idle; spread: normal.
    assert!(decide(true, false, false, false, b, t0).0);
    assert!(!decide(false, true, false, false, b, t0).0);
    // Starved while idle: normal for BACKOFF_MIN, then idle again.
    let (idle, b) = decide(true, true, true, false, b, t0);
    assert!(!idle);
    assert_eq!(b.until, Some(t0 + BACKOFF_MIN));
    assert!(!decide(true, false, false, false, b, t0 + BACKOFF_MIN / 2).0);
    let t1 = t0 + BACKOFF_MIN;
    let (idle, b) = decide(true, false, false, false, b, t1);
    assert!(idle);
    // Starving again doubles the back-off; waiting while normal is not starving.
    let (_, b) = decide(true, true, true, false, b, t1);
    assert_eq!(b.until, Some(t1 + 2 * BACKOFF_MIN));
    let (_, b2) = decide(true, false, true, false, b, t1 + 10 * BACKOFF_MIN);
    assert_eq!(
        b2.until, b.until,
        "starving in the normal class backs nothing off"
    );
    // It never exceeds BACKOFF_MAX.
    let mut b = b;
    for _ in 0..20 {
        b = decide(true, true, true, false, b, t1).1;
    }
    assert_eq!(b.next, BACKOFF_MAX);
    // A whole BACKOFF_MAX in the idle class without starving starts over.
    let t2 = t1 + 2 * BACKOFF_MAX;
    let (idle, b) = decide(true, true, false, false, b, t2);
    assert!(idle);
    let (_, b) = decide(true, true, false, false, b, t2 + BACKOFF_MAX);
    assert_eq!(b.next, BACKOFF_MIN);
}

#[test]
fn waiting_for_the_cpu_counts_only_just_after_entering_the_idle_class() {
    let t0 = Instant::now();
    // First tick in the class: on probation, waiting backs off.
    let (idle, b) = decide(true, true, false, true, Backoff::default(), t0);
    assert!(!idle);
    assert_eq!(b.until, Some(t0 + BACKOFF_MIN));
    // Long in the class: waiting alone does not (a spinning application), packets held do.
    let t1 = t0 + BACKOFF_MIN;
    let (_, b) = decide(true, true, false, false, b, t1);
    let (idle, b) = decide(true, true, false, true, b, t1 + 2 * PROBATION);
    assert!(idle);
    assert!(!decide(true, true, true, false, b, t1 + 2 * PROBATION).0);
    // Not in the class: nothing backs off.
    let (idle, b2) = decide(true, false, true, true, b, t1 + 3 * PROBATION);
    assert!(idle);
    assert_eq!(b2.until, b.until);
}

fn policy() -> String {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Field 41 of stat is the policy; the comm field may hold spaces, so count from ')'.
    let rest = &s[s.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(41 - 3).unwrap().to_owned()
}

#[test]
fn a_thread_goes_to_the_idle_class_and_back_when_the_probe_allows_it() {
    std::thread::spawn(move || {
        let tid = nix::unistd::gettid().as_raw();
        match probe() {
            Ok(()) => {
                set_class(tid, true).unwrap();
                assert_eq!(policy(), "5", "SCHED_IDLE");
                set_class(tid, false).unwrap();
                assert_eq!(policy(), "0", "SCHED_OTHER");
            }
            // Without CAP_SYS_NICE leaving fails: the probe must have seen that.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_thread_runnable_a_whole_tick_without_running_never_ran() {
    // Runnable at both ticks, run time unchanged: no slice at all.
    assert!(never_ran(
        (&[false, true], &[false, true]),
        (&[5, 7], &[9, 7])
    ));
    // It ran (to sleep and wake again, or still running): not starved.
    assert!(!never_ran(
        (&[true, true], &[true, true]),
        (&[5, 7], &[6, 8])
    ));
    // Runnable at one end only: it woke up or went to sleep within the tick.
    assert!(!never_ran(
        (&[true, false], &[false, true]),
        (&[5, 7], &[5, 7])
    ));
    // The first tick (nothing before) says nothing; nor a kernel that counts no run time.
    assert!(!never_ran((&[], &[true]), (&[], &[5])));
    assert!(!never_ran((&[true], &[true]), (&[0], &[0])));
}
