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
//! - when this process may leave the class again (`CAP_SYS_NICE`, or an `RLIMIT_NICE` of 20;
//!   [`probe`] tries it once).
//!
//! Whether the CPU is shared with busy threads is judged by what matters, how long packets wait
//! for our threads ([`Progress`]), not by the CPU's idle time: an application that spins between
//! requests (`ping -i 0.005` does) keeps its CPU busy and makes our thread wait to go back to
//! sleep after each answer, yet runs it as soon as it has work. Starved (by a busy neighbour),
//! while the threads needed little CPU themselves (their own load spreads them instead):
//! - a datagram read more than [`LATE`] after it arrived;
//! - a TUN reader that waited longer than that per run, in a tick with traffic (`wg::affinity`);
//! - a data thread awake without finishing a step for [`STALL`];
//! - a data thread runnable through a whole placement tick without running ([`never_ran`]);
//! - within [`PROBATION`] of entering the class, threads that waited for a tenth of a tick
//!   while traffic flowed (a neighbour busy all along shows at once).
//!
//! Any of these puts the threads back in the normal class for a back-off, from [`BACKOFF_MIN`]
//! doubling to [`BACKOFF_MAX`] while it recurs (reset after [`BACKOFF_MAX`] in the idle class
//! without starving): next to a CPU hog a lane stalls for a tick or two, ever more rarely. The
//! signs but [`never_ran`] need the starved thread to have run again (its `schedstat`, its
//! read); that one is read by the placement thread alone, for a thread given no slice at all.
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

/// Whether a data thread stayed runnable through a whole tick without running: runnable
/// (`R`) at its start and its end (`runnable`: before, now) while its run time (`ran`, ns:
/// before, now) did not grow. A thread must run to go to sleep, so it waited for a CPU all
/// along: the sign of a thread that gets no slice at all, which the others (a late read, a
/// step not finished) cannot give because they need the thread to run.
pub(super) fn never_ran(runnable: (&[bool], &[bool]), ran: (&[u64], &[u64])) -> bool {
    runnable
        .0
        .iter()
        .zip(runnable.1)
        .zip(ran.0.iter().zip(ran.1))
        // A run time of 0 is a kernel that does not count (schedstats off): no sign.
        .any(|((&was, &is), (&before, &now))| was && is && before > 0 && now == before)
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
/// `CAP_SYS_NICE` or an `RLIMIT_NICE` of 20), tried on a scratch thread.
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
            let why = format!("{e} (leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE 20)");
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
        let new_backoff = backoff.until != self.backoff.until;
        self.backoff = backoff;
        let want = want && self.refused.is_none();
        if (want, tids.len()) != self.applied {
            self.apply(want, tids);
        }
        if let Some(why) = why
            && new_backoff
        {
            // At most once per back-off, which doubles while it recurs.
            tracing::info!(
                backoff_ms = backoff
                    .until
                    .map_or(0, |u| u.duration_since(now).as_millis()),
                "{why} in the idle scheduling class (a busy neighbour on the CPU); the data \
                 threads run in the normal class for a while"
            );
        }
    }

    /// Puts every thread of `tids` in the idle class (`true`) or the normal one. A thread that
    /// exited is skipped; a refusal (privileges dropped since the probe) ends the idle class
    /// for good, and the threads go back to normal. Whatever failed is tried again next tick.
    fn apply(&mut self, idle: bool, tids: &[i32]) {
        let mut done = true;
        for &tid in tids {
            match set_class(tid, idle) {
                Ok(()) => {}
                // Gone: it deregisters as it ends.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    done = false;
                    if self.refused.is_none() {
                        tracing::warn!(
                            error = %e,
                            tid,
                            "putting a data thread in the {} scheduling class; the idle class \
                             is not used from now on",
                            if idle { "idle" } else { "normal" }
                        );
                        self.refused = Some(format!("thread {tid}: {e}"));
                    }
                }
            }
        }
        if done {
            self.applied = (idle, tids.len());
        } else if idle {
            // Back to normal now; what fails there is retried at each tick.
            self.applied = (true, tids.len());
            self.apply(false, tids);
        } else {
            // Some thread may still be idle: mark nothing applied, so the next tick retries.
            self.applied = (true, 0);
        }
    }
}

#[cfg(test)]
mod tests;
