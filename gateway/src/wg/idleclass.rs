//! The data threads' scheduling class while they live on their home CPUs. When a lane's thread
//! writes an answer to the TUN device and so wakes the application it is for, the scheduler puts
//! the application on an *idle* CPU rather than on the one our thread still runs on (or the one
//! where the other gateway of the host, in a lab, still has a thread runnable): on a virtual
//! machine that is a wake-up of a halted vCPU, tens of microseconds, on every answer, and the
//! application's next request then leaves from that CPU, where the same happens. A CPU whose
//! runnable threads are all `SCHED_IDLE` counts as idle to the scheduler: with the data threads
//! in that class, the application stays on its CPU and preempts our thread at once.
//!
//! `SCHED_IDLE` threads get next to no CPU next to busy ones, so the class is only used
//! - at home (lightly loaded: the threads need little CPU), and
//! - when this process may leave the class again (`CAP_SYS_NICE`; [`probe`] tries it once).
//!
//! Whether the CPU is shared with busy threads is judged by what matters, how long packets wait
//! for our threads ([`Progress`]), not by the CPU's idle time or how long the threads waited to
//! run: an application that spins between requests (`ping -i 0.005` does) keeps its CPU busy
//! and makes our thread wait to go back to sleep after each answer, yet runs it as soon as it
//! has work. A datagram read more than [`LATE`] after it arrived, a TUN reader that waited
//! longer than that for its CPU on average after its wake-ups (`wg::affinity`), or a data thread
//! awake without finishing a step for [`STALL`] (starved by a busy neighbour), puts the threads back in the
//! normal class and keeps them there for a back-off, from [`BACKOFF_MIN`] doubling to [`BACKOFF_MAX`] while it
//! recurs (reset after [`BACKOFF_MAX`] in the idle class without starving): next to a CPU hog
//! a lane stalls for at most a tick or two, ever more rarely.
//!
//! The placement thread (normal class, never holding a lock the data threads take) sets the
//! class of every data thread itself, so a starved thread does not need to run to be rescued.

use std::{
    io,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

/// How long an awake data thread may go without finishing a step before it counts as starved.
pub(super) const STALL: Duration = Duration::from_millis(20);
/// How long a datagram may wait in its socket before the thread that reads it counts as
/// starved. A lone packet waits microseconds for a thread that gets its CPU; one that arrives
/// while an application that yields spins on the CPU (`ping -i 0.005` between its requests)
/// waits for the spin to end, a few milliseconds: that is not worth giving the class up for.
pub(super) const LATE: Duration = Duration::from_millis(10);

/// First back-off after the threads starved in the idle class.
pub(super) const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest back-off, and how long the idle class must hold for the back-off to start over.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How long after entering the idle class waiting for the CPU alone counts as starving: a
/// neighbour that was busy all along shows at once.
pub(super) const PROBATION: Duration = Duration::from_millis(200);

/// When the idle class may be used again after starving, and the next back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Backoff {
    /// No idle class before this.
    pub(super) until: Option<Instant>,
    /// The back-off after the next starvation.
    pub(super) next: Duration,
    /// Since when the threads have been in the idle class without starving.
    pub(super) since: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            until: None,
            next: BACKOFF_MIN,
            since: None,
        }
    }
}

/// The class for the next tick (`true`: idle) and the back-off after it, given whether the
/// threads are home, whether they were in the idle class during the tick that ended `now`,
/// whether packets waited for them in it ([`Progress::starved`]) and whether they waited long
/// for their CPUs while needing little (`waited`, which counts only within [`PROBATION`] of
/// entering the class: later, an application spinning between its requests looks the same).
pub(super) fn decide(
    home: bool,
    was_idle: bool,
    starved: bool,
    waited: bool,
    b: Backoff,
    now: Instant,
) -> (bool, Backoff) {
    let mut b = b;
    let on_probation = b.since.is_none_or(|s| now.duration_since(s) < PROBATION);
    if was_idle && (starved || (waited && on_probation)) {
        b.until = Some(now + b.next);
        b.next = (b.next * 2).min(BACKOFF_MAX);
        b.since = None;
        return (false, b);
    }
    if was_idle {
        let since = *b.since.get_or_insert(now);
        if now.duration_since(since) >= BACKOFF_MAX {
            b.next = BACKOFF_MIN;
        }
    } else {
        b.since = None;
    }
    let allowed = b.until.is_none_or(|u| now >= u);
    (home && allowed, b)
}

/// When each data thread last finished a step while awake (lock-free: the data threads write
/// it, the placement thread reads it).
#[derive(Debug)]
pub(super) struct Progress {
    epoch: Instant,
    /// Per data thread, one cache line each (they are written on every step).
    slots: Vec<Slot>,
    /// Whether a datagram was read later than [`LATE`] since the last look.
    late: AtomicBool,
}

impl Progress {
    /// For `threads` data threads, all asleep.
    pub(super) fn new(threads: usize) -> Progress {
        Progress {
            epoch: Instant::now(),
            slots: (0..threads).map(|_| Slot::default()).collect(),
            late: AtomicBool::new(false),
        }
    }

    fn since_epoch(&self, t: Instant) -> u64 {
        u64::try_from(t.duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// Data thread `i` finished a step (or woke up) at `now`.
    pub(super) fn stepped(&self, i: usize, now: Instant) {
        if let Some(s) = self.slots.get(i) {
            s.at.store(self.since_epoch(now), Ordering::Relaxed);
        }
    }

    /// Data thread `i` handled packets (or a batch).
    pub(super) fn worked(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            s.worked.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether any data thread handled packets since the last call.
    pub(super) fn take_worked(&self) -> bool {
        let mut any = false;
        for s in &self.slots {
            // Every slot is taken, not only up to the first that worked.
            any |= s.worked.swap(0, Ordering::Relaxed) > 0;
        }
        any
    }

    /// Data thread `i` goes to sleep.
    pub(super) fn sleeps(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            s.at.store(0, Ordering::Relaxed);
        }
    }

    /// A datagram that arrived at `at` (the kernel's timestamp, since the Unix epoch) was read
    /// now.
    pub(super) fn arrived(&self, at: Duration) {
        let waited = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|now| now.checked_sub(at));
        // A clock stepped back reads as no wait; one stepped forward costs one back-off.
        if waited.is_some_and(|w| w > LATE) {
            self.late.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the data threads starved since the last look: a datagram read late, or an awake
    /// thread that finished no step for [`STALL`] up to `now`.
    pub(super) fn starved(&self, now: Instant) -> Option<&'static str> {
        let late = self.late.swap(false, Ordering::Relaxed);
        if late {
            Some("a datagram waited for its thread")
        } else if self.stalled(now) {
            Some("a thread made no progress")
        } else {
            None
        }
    }

    /// Whether an awake data thread finished no step for [`STALL`] up to `now`.
    fn stalled(&self, now: Instant) -> bool {
        let now = self.since_epoch(now);
        let stall = u64::try_from(STALL.as_nanos()).unwrap_or(u64::MAX);
        self.slots.iter().any(|s| {
            let at = s.at.load(Ordering::Relaxed);
            at != 0 && now.saturating_sub(at) > stall
        })
    }
}

/// One data thread's progress.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    /// Nanoseconds since the epoch plus one at its last step, 0 while asleep.
    at: AtomicU64,
    /// Steps that handled packets since the placement thread last looked.
    worked: AtomicU64,
}

/// Puts thread `tid` of this process (0: the calling thread) in the idle class (`true`) or the
/// normal one.
#[expect(
    unsafe_code,
    reason = "sched_setscheduler(2) takes a struct sched_param"
)]
pub(super) fn set_class(tid: i32, idle: bool) -> io::Result<()> {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the call.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process may put a thread in the idle class *and take it out again* (which needs
/// `CAP_SYS_NICE`), tried on a scratch thread.
pub(super) fn probe() -> io::Result<()> {
    thread::Builder::new()
        .name("wg-probe".into())
        .spawn(|| {
            set_class(0, true)?;
            set_class(0, false)
        })?
        .join()
        .map_err(|_| io::Error::other("the probe thread panicked"))?
}

/// The placement thread's view of the class: whether it may be used, the back-off, and what
/// was applied to which threads.
#[derive(Debug)]
pub(super) struct IdleClass {
    /// Why the idle class is never used (`None`: it may be).
    refused: Option<String>,
    backoff: Backoff,
    /// The class last set, and for how many threads (a new thread starts normal).
    applied: (bool, usize),
}

impl IdleClass {
    /// The idle class if [`probe`] says this process may leave it again.
    pub(super) fn new() -> IdleClass {
        let refused = probe().err().map(|e| {
            let why = format!("{e} (leaving SCHED_IDLE needs CAP_SYS_NICE)");
            tracing::info!(
                "the data threads stay in the normal scheduling class at home: {why}; a woken \
                 application may then wait for another CPU"
            );
            why
        });
        IdleClass {
            refused,
            backoff: Backoff::default(),
            applied: (false, 0),
        }
    }

    /// Whether the data threads are in the idle class now.
    pub(super) fn idle(&self) -> bool {
        self.applied.0
    }

    /// Why the idle class is never used, if so.
    pub(super) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// One tick: whether the threads `tids` are (to be) at home, and why they starved in the
    /// tick that ended `now`, if they did ([`Progress::starved`]).
    pub(super) fn tick(
        &mut self,
        home: bool,
        starved: Option<&str>,
        waited: bool,
        tids: &[i32],
        now: Instant,
    ) {
        let (want, backoff) = decide(
            home,
            self.applied.0,
            starved.is_some(),
            waited,
            self.backoff,
            now,
        );
        let why = starved.or(waited.then_some("the threads waited for their CPUs"));
        if let Some(why) = why
            && backoff.until != self.backoff.until
        {
            // At most once per back-off, which doubles while it recurs.
            tracing::info!(
                backoff_ms = (backoff.next / 2).as_millis(),
                "{why} in the idle scheduling class (a busy neighbour on the CPU); the data \
                 threads run in the normal class for a while"
            );
        }
        self.backoff = backoff;
        let want = want && self.refused.is_none();
        if (want, tids.len()) == self.applied {
            return;
        }
        for &tid in tids {
            if let Err(e) = set_class(tid, want) {
                // After a good probe only a thread that exited (or privileges dropped since)
                // fails: the idle class is not tried again.
                tracing::warn!(
                    error = %e,
                    tid,
                    "putting a data thread in the {} scheduling class",
                    if want { "idle" } else { "normal" }
                );
                self.refused = Some(e.to_string());
            }
        }
        self.applied = (want, tids.len());
        if want && self.refused.is_some() {
            for &tid in tids {
                // Back to normal as far as possible; a failure was logged above.
                set_class(tid, false).ok();
            }
            self.applied = (false, tids.len());
        }
    }
}

#[cfg(test)]
mod tests {
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
}
