//! How the data-path threads work and wait. Each lane (a TUN queue and a UDP socket that carry
//! one CPU's packets) has two threads; each owns a half (TUN to UDP, UDP to TUN) and sleeps on
//! its own descriptor when idle. A lone packet's latency is mostly wake-ups: on a
//! virtual machine a halted vCPU takes tens of microseconds to run a woken thread, and a
//! request and its answer cross each gateway once each way, in different threads. So a thread
//! whose half ran dry looks at the other half once before it sleeps (free: one non-blocking
//! read), and catches the answer the kernel queued on the TUN device while it wrote the request
//! (a single thread for both halves when idle was tried: the same latency, 8% less throughput,
//! in this VM). And, for
//! [`Device::set_busy_poll`] after its last packet, a thread keeps checking *both* halves
//! before it sleeps: the answer that arrives meanwhile is handled by a thread that is already
//! running, and a request/answer pair costs one wake-up per gateway instead of two.
//!
//! Each half's state (buffers, coalescer, admission) sits behind its own mutex, held from read
//! to send: whichever thread runs a half, its packets keep their order.

use std::{
    os::fd::AsFd,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::{
    half::{Half, Step},
    lanes::Lane,
    state::Device,
    tuning::TICK,
};

impl Device {
    /// Runs `own` of lane `lane` until stopped or its descriptor fails.
    pub(super) fn run_half(&self, lane: usize, own: Half) {
        let lane = &self.lanes[lane];
        self.affinity.register(lane.index, own == Half::Tx);
        let me = 2 * lane.index + own.index();
        let progress = &self.affinity.progress;
        let mut placed = None;
        while !self.stopped() {
            // Seen by the placement thread: an awake thread that makes no progress is starved.
            progress.stepped(me, Instant::now());
            let state = self.affinity.state();
            if placed != Some(state) {
                self.affinity.apply(state, lane.index);
                placed = Some(state);
            }
            match self.step(lane, own, true) {
                Some(Step::Worked) => {
                    progress.worked(me);
                    continue;
                }
                Some(Step::Failed) => break,
                Some(Step::Empty) | None => {}
            }
            // The other half once before sleeping: the answer to a packet just written to the
            // TUN device (the kernel queues it during the write) is sent by this running thread.
            // The other thread is woken for it too, but may find it done.
            if self.step(lane, own.other(), false) == Some(Step::Worked) {
                progress.worked(me);
                continue;
            }
            let spin = self.busy_poll();
            if !spin.is_zero() && self.spin(lane, own, spin) {
                progress.worked(me);
                continue;
            }
            progress.sleeps(me);
            if !self.wait(lane, own) {
                break;
            }
        }
        // Stopped or failed: never counted as starved, nor re-classed.
        progress.sleeps(me);
        self.affinity.deregister();
    }

    /// While lightly loaded, both data threads share one CPU (see `wg::affinity`); off: the
    /// scheduler places them.
    pub fn set_pin_when_idle(&self, on: bool) {
        self.affinity.set_enabled(on);
    }

    /// While pinned, run the data threads in the idle scheduling class (see `wg::idleclass`);
    /// off: always the normal class (applied within a placement tick).
    pub fn set_idle_class(&self, on: bool) {
        self.affinity.idle_class_on.store(on, Ordering::Relaxed);
    }

    /// How long a thread checks both halves after its last packet before sleeping.
    pub fn busy_poll(&self) -> Duration {
        Duration::from_micros(self.busy_poll_us.load(Ordering::Relaxed))
    }

    /// Sets [`Device::busy_poll`] (zero: sleep as soon as the own half is empty).
    pub fn set_busy_poll(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.busy_poll_us.store(us, Ordering::Relaxed);
    }

    /// One attempt at `half` of `lane`; with `wait_turn` false, `None` if another thread runs
    /// it now.
    fn step(&self, lane: &Lane, half: Half, wait_turn: bool) -> Option<Step> {
        match half {
            Half::Tx => {
                let mut st = if wait_turn {
                    lane.tx.lock().unwrap_or_else(|p| p.into_inner())
                } else {
                    lane.tx.try_lock().ok()?
                };
                Some(self.tx_once(lane, &mut st))
            }
            Half::Rx => {
                let mut st = if wait_turn {
                    lane.rx.lock().unwrap_or_else(|p| p.into_inner())
                } else {
                    lane.rx.try_lock().ok()?
                };
                Some(self.rx_once(lane, &mut st))
            }
        }
    }

    /// Checks both halves of `lane` for `spin`; whether something was handled.
    fn spin(&self, lane: &Lane, own: Half, spin: Duration) -> bool {
        let until = Instant::now() + spin;
        loop {
            for half in [own, own.other()] {
                if self.step(lane, half, false) == Some(Step::Worked) {
                    return true;
                }
            }
            if Instant::now() >= until || self.stopped() {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// Sleeps until `half`'s descriptor is readable or a [`TICK`] passed; false if polling
    /// failed.
    fn wait(&self, lane: &Lane, half: Half) -> bool {
        let fd = match half {
            Half::Tx => lane.tun.as_fd(),
            Half::Rx => lane.udp.as_fd(),
        };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(TICK).unwrap_or(PollTimeout::NONE),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => true,
            Err(e) => {
                tracing::error!(error = %e, ?half, "polling");
                false
            }
        }
    }
}
