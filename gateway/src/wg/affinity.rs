//! Where the two data-path threads run. A lone packet's latency on a virtual machine is mostly
//! wake-ups across vCPUs: waking a thread whose vCPU is halted costs an inter-processor
//! interrupt, a VM exit for the waker and tens of microseconds before the woken thread runs.
//! The scheduler puts a woken thread back on its previous CPU when that CPU is idle, so the two
//! halves of one gateway (and the gateways of one host) spread over the CPUs and every packet
//! of a request/answer exchange pays that price.
//!
//! So while the gateway is lightly loaded both data threads share one *home* CPU (the lowest
//! the process may use, the same for every gateway of a host): a wake-up between them is a
//! flag on a running CPU. Once the two threads ran for more than [`BUSY_PERMILLE`] of a timer
//! tick (their run time, from `/proc/self/task/<tid>/schedstat`), they may use every allowed
//! CPU again (the two halves run in parallel under load); they go home after [`QUIET_TICKS`]
//! ticks below [`QUIET_PERMILLE`].
//!
//! The decision ([`decide`]) is pure; the timer thread feeds it each tick, and each data thread
//! applies a new placement to itself before its next step.

use std::{
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Instant,
};

use nix::{
    sched::{CpuSet, sched_getaffinity, sched_setaffinity},
    unistd::Pid,
};

/// Run time of the data threads, in thousandths of a tick, above which they spread.
pub(super) const BUSY_PERMILLE: u64 = 500;
/// Run time below which a tick counts as quiet.
pub(super) const QUIET_PERMILLE: u64 = 200;
/// Quiet ticks in a row before the threads go home.
pub(super) const QUIET_TICKS: u32 = 5;

/// Where the data threads may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    /// Both on the home CPU.
    Home,
    /// Anywhere the process may run.
    Spread,
}

/// The placement after a tick in which the data threads ran `load` thousandths of it, and the
/// quiet ticks counted so far.
pub(super) fn decide(now: Placement, quiet: u32, load: u64) -> (Placement, u32) {
    match now {
        Placement::Home if load > BUSY_PERMILLE => (Placement::Spread, 0),
        Placement::Home => (Placement::Home, 0),
        Placement::Spread if load >= QUIET_PERMILLE => (Placement::Spread, 0),
        Placement::Spread if quiet + 1 >= QUIET_TICKS => (Placement::Home, 0),
        Placement::Spread => (Placement::Spread, quiet + 1),
    }
}

/// The placement of the data threads, shared by them and the timer thread.
#[derive(Debug)]
pub(super) struct Affinity {
    /// The CPUs the process may use when the device was made.
    allowed: CpuSet,
    /// The lowest of them; `None` when there is only one (nothing to choose).
    home: Option<usize>,
    /// Whether the threads go home when idle ([`Device::set_pin_when_idle`]).
    ///
    /// [`Device::set_pin_when_idle`]: super::Device::set_pin_when_idle
    enabled: AtomicBool,
    /// Bumped on every change of placement; even = [`Placement::Home`].
    epoch: AtomicU32,
    /// The timer thread's view: the data threads' IDs and run time at the last tick, when it
    /// was, and the quiet ticks in a row.
    last: Mutex<Last>,
    /// Set when the kernel refused a placement (logged once; the threads stay where they are).
    failed: AtomicBool,
}

impl Affinity {
    /// Reads the CPUs the calling thread may use; disabled until [`Affinity::set_enabled`].
    pub(super) fn new() -> Affinity {
        let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the CPU affinity; the data threads stay where the scheduler puts them");
            CpuSet::new()
        });
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| allowed.is_set(c).unwrap_or(false))
            .collect();
        Affinity {
            allowed,
            home: if cpus.len() > 1 {
                cpus.first().copied()
            } else {
                None
            },
            enabled: AtomicBool::new(false),
            epoch: AtomicU32::new(0),
            last: Mutex::new(Last {
                tids: Vec::new(),
                ran_ns: 0,
                at: Instant::now(),
                quiet: 0,
            }),
            failed: AtomicBool::new(false),
        }
    }

    /// The current placement, as an epoch a data thread compares with the one it applied.
    pub(super) fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Turns going home when idle on or off; the data threads re-place themselves before their
    /// next step.
    pub(super) fn set_enabled(&self, on: bool) {
        if self.enabled.swap(on, Ordering::Relaxed) != on {
            // Same placement, new epoch: every thread applies it again.
            self.epoch.fetch_add(2, Ordering::Relaxed);
        }
    }

    /// A data thread says who it is (its run time counts from now on).
    pub(super) fn register(&self) {
        let tid = nix::unistd::gettid().as_raw();
        self.last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tids
            .push(tid);
    }

    /// The timer thread's tick: measures how long the data threads ran since the last one and
    /// moves them if [`decide`] says so.
    pub(super) fn tick(&self) {
        if self.home.is_none() || !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let ran_ns: u64 = last.tids.iter().filter_map(|&t| run_ns(t)).sum();
        let now_at = Instant::now();
        let tick_ns = u64::try_from(now_at.duration_since(last.at).as_nanos()).unwrap_or(u64::MAX);
        let load = ran_ns.saturating_sub(last.ran_ns).saturating_mul(1000) / tick_ns.max(1);
        last.ran_ns = ran_ns;
        last.at = now_at;
        let epoch = self.epoch();
        let now = placement(epoch);
        let (next, quiet) = decide(now, last.quiet, load);
        last.quiet = quiet;
        if next != now {
            self.epoch.store(epoch.wrapping_add(1), Ordering::Relaxed);
        }
    }

    /// Places the calling data thread as `epoch` says.
    pub(super) fn apply(&self, epoch: u32) {
        let Some(home) = self.home else { return };
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let on = self.enabled.load(Ordering::Relaxed);
        let set = match if on {
            placement(epoch)
        } else {
            Placement::Spread
        } {
            Placement::Spread => self.allowed,
            Placement::Home => {
                let mut one = CpuSet::new();
                if one.set(home).is_err() {
                    return;
                }
                one
            }
        };
        if let Err(e) = sched_setaffinity(Pid::from_raw(0), &set)
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(error = %e, cpu = home, "placing a data thread; they stay where they are");
        }
    }
}

/// The timer thread's state.
#[derive(Debug)]
struct Last {
    tids: Vec<i32>,
    ran_ns: u64,
    at: Instant,
    quiet: u32,
}

/// How long thread `tid` of this process has run, in nanoseconds (the first field of its
/// `schedstat`); `None` if the kernel does not say.
fn run_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn placement(epoch: u32) -> Placement {
    if epoch.is_multiple_of(2) {
        Placement::Home
    } else {
        Placement::Spread
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_at_once_under_load_and_goes_home_after_quiet_ticks() {
        let (mut p, mut q) = (Placement::Home, 0);
        for load in [0, 50, QUIET_PERMILLE, BUSY_PERMILLE] {
            (p, q) = decide(p, q, load);
            assert_eq!(p, Placement::Home, "{load}‰ keeps the threads home");
        }
        (p, q) = decide(p, q, BUSY_PERMILLE + 1);
        assert_eq!((p, q), (Placement::Spread, 0));
        for i in 1..QUIET_TICKS {
            (p, q) = decide(p, q, QUIET_PERMILLE - 1);
            assert_eq!((p, q), (Placement::Spread, i), "quiet tick {i}");
        }
        // A busy tick in between starts the count again.
        let (p2, q2) = decide(p, q, QUIET_PERMILLE);
        assert_eq!((p2, q2), (Placement::Spread, 0));
        (p, q) = decide(p, q, 0);
        assert_eq!((p, q), (Placement::Home, 0));
    }

    #[test]
    fn a_thread_run_time_is_read_and_grows() {
        use nix::time::{ClockId, clock_gettime};
        let cpu = || {
            let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
            t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128
        };
        let tid = nix::unistd::gettid().as_raw();
        let a = run_ns(tid).expect("schedstat of this thread");
        // 10 ms of this thread's own CPU time, however busy the machine is.
        let start = cpu();
        while cpu() - start < 10_000_000 {
            std::hint::spin_loop();
        }
        let b = run_ns(tid).expect("schedstat of this thread");
        assert!(b >= a + 10_000_000, "ran {a} then {b} ns");
        assert_eq!(run_ns(-1), None);
    }

    #[test]
    fn epochs_alternate_placements() {
        assert_eq!(placement(0), Placement::Home);
        assert_eq!(placement(1), Placement::Spread);
        assert_eq!(placement(u32::MAX), Placement::Spread);
        assert_eq!(placement(u32::MAX.wrapping_add(1)), Placement::Home);
    }
}
