//! Where the data-path threads run. A lone packet's latency on a virtual machine is mostly
//! wake-ups across vCPUs: waking a thread whose vCPU is halted costs an inter-processor
//! interrupt, a VM exit for the waker and tens of microseconds before the woken thread runs
//! (about 90 µs per wake-up on the 2-vCPU machines we test on, against under 10 µs on the
//! waker's own CPU). The scheduler puts a woken thread back on its previous CPU when that CPU is
//! idle, so the halves of one gateway (and the gateways of one host) spread over the CPUs and
//! every packet of a request/answer exchange pays that price.
//!
//! So while the gateway is lightly loaded each lane's two threads live on the lane's *home*
//! CPU: the one whose packets the lane carries (`dataplane::steer` picks the TUN queue and the
//! UDP socket by CPU), the first the process may use whose number modulo the lanes is the
//! lane's. A packet is then read on the CPU that sent or received it, and a request and its
//! answer cross every gateway of a host without leaving the application's CPU (see
//! `wg::lanes` for when CPUs share a lane). Once the two threads of the busiest lane ran *or
//! waited to run* for more than [`BUSY_PERMILLE`] of a placement tick
//! ([`PLACEMENT_TICK`](super::tuning::PLACEMENT_TICK)), or waited alone for more than
//! [`WAITING_PERMILLE`] (both from
//! `/proc/self/task/<tid>/schedstat`: what they needed, not only what they got on a shared
//! CPU), they may use every CPU again (one flow's halves run in parallel under load); they go
//! home after [`QUIET_TICKS`] ticks below [`QUIET_PERMILLE`], or one below [`IDLE_PERMILLE`]
//! (the load is gone, not only lower: a bulk transfer ended). The homes are recomputed every
//! tick from the process's CPUs (a cgroup cpuset may change); spreading asks for every CPU and
//! lets the kernel keep the allowed ones. A process that may use one CPU only, or a lane no
//! allowed CPU maps to, is never pinned. If the run times cannot be read, the threads spread.
//!
//! The decision ([`decide`]) is pure; the placement thread (`wg-place`, which takes no lock
//! the data threads hold while they work) feeds it each tick, and each data thread applies a
//! new placement to itself before its next step. At home the placement thread also puts the
//! data threads in the idle scheduling class unless packets were held up for them lately
//! (`wg::idleclass`), and back in the normal one in the tick they spread.

use super::{
    idleclass::{IdleClass, LATE, Progress, never_ran},
    lanes::{allowed_cpus, homes},
};
use std::{
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering},
    },
    time::Instant,
};

use nix::{
    sched::{CpuSet, sched_setaffinity},
    unistd::Pid,
};

/// Run plus wait time of the data threads, in thousandths of a tick, above which they spread.
pub(super) const BUSY_PERMILLE: u64 = 500;
/// Wait time (runnable, not running) above which they spread.
pub(super) const WAITING_PERMILLE: u64 = 100;
/// Run plus wait time below which a tick counts as quiet.
pub(super) const QUIET_PERMILLE: u64 = 200;
/// Quiet ticks in a row before the threads go home.
pub(super) const QUIET_TICKS: u32 = 2;
/// Run plus wait time below which one tick is enough to go home: the load is gone, not only
/// lower (a bulk transfer ended; what is left is a few packets).
pub(super) const IDLE_PERMILLE: u64 = 50;

/// Where the data threads may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    /// Each lane's threads on the lane's home CPU.
    Home,
    /// Anywhere the process may run.
    Spread,
}

/// What the data threads of the busiest lane did during a tick, in thousandths of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Load {
    /// Running or waiting to run.
    pub(super) demand: u64,
    /// Waiting to run.
    pub(super) waiting: u64,
}

/// The placement after a tick with `load`, and the quiet ticks counted so far.
pub(super) fn decide(now: Placement, quiet: u32, load: Load) -> (Placement, u32) {
    let busy = load.demand > BUSY_PERMILLE || load.waiting > WAITING_PERMILLE;
    match now {
        Placement::Home if busy => (Placement::Spread, 0),
        Placement::Home => (Placement::Home, 0),
        Placement::Spread if load.demand >= QUIET_PERMILLE => (Placement::Spread, 0),
        Placement::Spread if load.demand < IDLE_PERMILLE || quiet + 1 >= QUIET_TICKS => {
            (Placement::Home, 0)
        }
        Placement::Spread => (Placement::Spread, quiet + 1),
    }
}

/// One word the data threads load once per step: the placement (bit 0), whether pinning is
/// on (bit 1) and a generation above them, so that any change is seen whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct State(u32);

impl State {
    const SPREAD: u32 = 1;
    const ENABLED: u32 = 2;
    const GENERATION: u32 = 4;

    fn placement(self) -> Placement {
        if self.0 & Self::SPREAD == 0 {
            Placement::Home
        } else {
            Placement::Spread
        }
    }

    fn enabled(self) -> bool {
        self.0 & Self::ENABLED != 0
    }

    /// Where the threads go: home only when pinning is on and the placement says so.
    fn target(self) -> Placement {
        if self.enabled() {
            self.placement()
        } else {
            Placement::Spread
        }
    }

    fn with(self, placement: Placement, enabled: bool) -> State {
        let mut bits = self.0.wrapping_add(Self::GENERATION) & !(Self::SPREAD | Self::ENABLED);
        if placement == Placement::Spread {
            bits |= Self::SPREAD;
        }
        if enabled {
            bits |= Self::ENABLED;
        }
        State(bits)
    }
}

/// The placement of the data threads, shared by them and the placement thread.
#[derive(Debug)]
pub(super) struct Affinity {
    /// See [`State`].
    state: AtomicU32,
    /// Each lane's home CPU; `usize::MAX` for none (see [`homes`]).
    homes: Vec<AtomicUsize>,
    /// The placement thread's view: the data threads' lanes and IDs, each lane's times at the last
    /// tick, when it was, and the quiet ticks in a row.
    last: Mutex<Last>,
    /// Whether a refused placement or unreadable run times were logged already.
    warned: AtomicBool,
    /// When each data thread last made progress (thread `2 * lane + half`).
    pub(super) progress: Progress,
    /// Whether the idle class may be used at home (`Device::set_idle_class`).
    pub(super) idle_class_on: AtomicBool,
    /// Times the load (or a busy neighbour) sent the threads from home to every CPU.
    spreads: AtomicU64,
}

impl Affinity {
    /// Home placement for `lanes` lanes, pinning off until [`Affinity::set_enabled`].
    pub(super) fn new(lanes: usize) -> Affinity {
        let a = Affinity {
            state: AtomicU32::new(0),
            homes: (0..lanes.max(1))
                .map(|_| AtomicUsize::new(usize::MAX))
                .collect(),
            last: Mutex::new(Last {
                tids: Vec::new(),
                prev: Vec::new(),
                runnable: Vec::new(),
                times: vec![(0, 0); lanes.max(1)],
                at: Instant::now(),
                quiet: 0,
                class: IdleClass::new(),
            }),
            warned: AtomicBool::new(false),
            progress: Progress::new(2 * lanes.max(1)),
            idle_class_on: AtomicBool::new(true),
            spreads: AtomicU64::new(0),
        };
        a.find_homes();
        a
    }

    /// Each lane's home from the process's CPUs now; whether one changed.
    fn find_homes(&self) -> bool {
        let found = homes(&allowed_cpus(), self.homes.len());
        let mut changed = false;
        for (slot, home) in self.homes.iter().zip(found) {
            let home = home.unwrap_or(usize::MAX);
            changed |= slot.swap(home, Ordering::Relaxed) != home;
        }
        changed
    }

    /// The current state, which a data thread compares with the one it applied.
    pub(super) fn state(&self) -> State {
        State(self.state.load(Ordering::Acquire))
    }

    /// Whether the data threads are (to be) on their home CPUs now.
    pub(super) fn pinned(&self) -> bool {
        self.state().target() == Placement::Home
    }

    /// Times the threads left home for every CPU since the start (pinning off counts none).
    pub(super) fn spreads(&self) -> u64 {
        self.spreads.load(Ordering::Relaxed)
    }

    /// Turns going home when idle on or off; the data threads re-place themselves before their
    /// next step.
    pub(super) fn set_enabled(&self, on: bool) {
        self.update(|s| (s.enabled() != on).then(|| s.with(s.placement(), on)));
    }

    /// Applies `f` (`None`: nothing to change) and counts a move from home to every CPU while
    /// pinning is on (turning pinning off is not one).
    fn update(&self, f: impl Fn(State) -> Option<State>) {
        let Ok(prev) = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                f(State(w)).map(|s| s.0)
            })
        else {
            return; // `f` said there was nothing to change: not an error
        };
        let prev = State(prev);
        // `f` is pure: what it made of `prev` is what was stored.
        let spread = |s: State| s.enabled() && s.placement() == Placement::Spread;
        let home = |s: State| s.enabled() && s.placement() == Placement::Home;
        if home(prev) && f(prev).is_some_and(spread) {
            self.spreads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A data thread of lane `lane` says who it is (its times count from now on), and whether
    /// it reads the TUN device (woken by the applications it serves).
    pub(super) fn register(&self, lane: usize, reads_tun: bool) {
        let tid = nix::unistd::gettid().as_raw();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.tids.push((lane, tid, reads_tun));
        last.prev.push(sched_times(tid).unwrap_or_default());
        last.runnable.push(false);
    }

    /// The calling data thread ends: its ID is no longer measured or re-classed (it could be
    /// reused by another thread).
    pub(super) fn deregister(&self) {
        let tid = nix::unistd::gettid().as_raw();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = last.tids.iter().position(|t| t.1 == tid) {
            last.tids.remove(i);
            last.prev.remove(i);
            if i < last.runnable.len() {
                last.runnable.remove(i);
            }
        }
    }

    /// The placement thread's tick: finds the homes again (threads re-place themselves when one
    /// moved), measures how long each lane's threads ran and waited since the last one, and
    /// moves them if [`decide`] says so for the busiest lane.
    pub(super) fn tick(&self) {
        if self.find_homes() {
            self.update(|s| Some(s.with(s.placement(), s.enabled())));
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let per_thread: Option<Vec<(u64, u64, u64)>> =
            last.tids.iter().map(|&(_, t, _)| sched_times(t)).collect();
        let now_at = Instant::now();
        let tick_ns = u64::try_from(now_at.duration_since(last.at).as_nanos()).unwrap_or(u64::MAX);
        last.at = now_at;
        let state = self.state();
        let Some(per_thread) = per_thread else {
            self.warn_once("the data threads' run times cannot be read; they use every CPU");
            self.update(|s| {
                (s.placement() == Placement::Home).then(|| s.with(Placement::Spread, s.enabled()))
            });
            let tids: Vec<i32> = last.tids.iter().map(|t| t.1).collect();
            last.class.tick(false, None, false, &tids, now_at);
            return;
        };
        // A TUN reader that waited long for its CPU each time it was woken: the application's
        // packet waited with it (the UDP side has the datagrams' arrival times instead).
        let slow_wakes = last.tids.iter().zip(per_thread.iter().zip(&last.prev)).any(
            |(&(_, _, reads_tun), (now, before))| {
                let runs = now.2.saturating_sub(before.2);
                reads_tun
                    && runs > 0
                    && now.1.saturating_sub(before.1) / runs
                        > u64::try_from(LATE.as_nanos()).unwrap_or(u64::MAX)
            },
        );
        let times: Vec<(usize, (u64, u64))> = last
            .tids
            .iter()
            .zip(&per_thread)
            .map(|(&(lane, _, _), &(run, wait, _))| (lane, (run, wait)))
            .collect();
        // Runnable at this tick and the last one, and not run in between: no slice at all.
        // Read only in the idle class, the one place it counts.
        let idle = last.class.idle();
        let runnable: Vec<bool> = last
            .tids
            .iter()
            .map(|&(_, t, _)| idle && runnable(t))
            .collect();
        let ran = |v: &[(u64, u64, u64)]| v.iter().map(|t| t.0).collect::<Vec<u64>>();
        let no_slice = never_ran(
            (&last.runnable, &runnable),
            (&ran(&last.prev), &ran(&per_thread)),
        );
        last.runnable = runnable;
        last.prev = per_thread;
        let mut sums = vec![(0u64, 0u64); last.times.len()];
        for (lane, (r, w)) in times {
            if let Some(s) = sums.get_mut(lane) {
                *s = (s.0 + r, s.1 + w);
            }
        }
        let per_mille = |ns: u64| ns.saturating_mul(1000) / tick_ns.max(1);
        let mut load = Load {
            demand: 0,
            waiting: 0,
        };
        for (now, before) in sums.iter().zip(&last.times) {
            let (ran, waited) = (
                now.0.saturating_sub(before.0),
                now.1.saturating_sub(before.1),
            );
            load.demand = load.demand.max(per_mille(ran + waited));
            load.waiting = load.waiting.max(per_mille(waited));
        }
        last.times = sums;
        let next = if state.enabled() {
            let (next, quiet) = decide(state.placement(), last.quiet, load);
            last.quiet = quiet;
            if next != state.placement() {
                self.update(|s| (s.placement() != next).then(|| s.with(next, s.enabled())));
            }
            next
        } else {
            Placement::Spread
        };
        // Packets held up while our threads needed little: a busy neighbour. Held up while they
        // ran a lot is our own load starting, which spreads them (normal class) without a
        // back-off. Waits with no packet handled in the tick (timeouts, a busy neighbour while
        // nothing flows) hold nothing up.
        let active = self.progress.take_worked();
        let held_up = self
            .progress
            .starved(now_at)
            .or((active && slow_wakes).then_some("a TUN reader waited long for its CPU"))
            .or(no_slice.then_some("a thread stayed runnable a whole tick without running"));
        let needed_little = load.demand.saturating_sub(load.waiting) < QUIET_PERMILLE;
        let starved = held_up.filter(|_| needed_little);
        let waited = active && needed_little && load.waiting > WAITING_PERMILLE;
        let tids: Vec<i32> = last.tids.iter().map(|t| t.1).collect();
        let home = next == Placement::Home && self.idle_class_on.load(Ordering::Relaxed);
        last.class.tick(home, starved, waited, &tids, now_at);
    }

    /// Whether the data threads run in the idle scheduling class now, and why it is never
    /// used if so (`wg::idleclass`).
    pub(super) fn idle_class(&self) -> (bool, Option<String>) {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        (last.class.idle(), last.class.refused().map(str::to_owned))
    }

    /// Places the calling data thread, one of lane `lane`'s, as `state` says.
    pub(super) fn apply(&self, state: State, lane: usize) {
        let home = self
            .homes
            .get(lane)
            .map_or(usize::MAX, |h| h.load(Ordering::Relaxed));
        let mut set = CpuSet::new();
        let all = state.target() == Placement::Spread || home == usize::MAX;
        for cpu in 0..CpuSet::count() {
            if (all || cpu == home) && set.set(cpu).is_err() {
                break;
            }
        }
        // Every CPU: the kernel keeps those of the cpuset. It refuses only a set with none.
        if let Err(e) = sched_setaffinity(Pid::from_raw(0), &set) {
            self.warn_once(&format!(
                "placing a data thread on CPU {home}: {e}; retried at the next change"
            ));
        }
    }

    fn warn_once(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{what}");
        }
    }
}

/// The placement thread's state.
#[derive(Debug)]
struct Last {
    /// Each data thread's lane, thread ID and whether it reads the TUN device.
    tids: Vec<(usize, i32, bool)>,
    /// Each data thread's run and wait nanoseconds and runs at the last tick.
    prev: Vec<(u64, u64, u64)>,
    /// Which data threads were runnable at the last tick.
    runnable: Vec<bool>,
    /// Run and wait nanoseconds of each lane's data threads.
    times: Vec<(u64, u64)>,
    at: Instant,
    quiet: u32,
    /// The data threads' scheduling class.
    class: IdleClass,
}

/// How long thread `tid` of this process has run and waited to run, in nanoseconds, and how
/// many times it ran (its `schedstat`); `None` if the kernel does not say.
fn sched_times(tid: i32) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

/// Whether thread `tid` of this process is runnable now (`R` in its `stat`; `false` if the
/// kernel does not say).
fn runnable(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|t| Some(t.rsplit_once(')')?.1.trim_start().starts_with('R')))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
