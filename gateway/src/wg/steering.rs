//! Which lane a packet takes. While the data threads live on their lanes' CPUs (lightly loaded,
//! `wg::affinity`), a packet takes the lane of the CPU that sent it (TUN) or received it (UDP):
//! it is read by a thread already on that CPU. Under load the threads move between CPUs, and a
//! flow whose packets were spread by CPU would be reordered (a sender thread that moves sends
//! from another CPU): the kernel then picks the lane by flow again.

use std::thread;

use dataplane::steer::{self, TunSteering};

use super::{affinity::PLACEMENT_TICK, device::Device, lanes::DataPathStatus};

/// How packets are spread over the lanes now.
#[derive(Debug)]
pub(super) struct Steering {
    /// The TUN program; `None` without one (or after the kernel refused to attach it): lanes by
    /// flow for good.
    prog: Option<TunSteering>,
    /// Whether packets follow their CPU now.
    by_cpu: bool,
    /// Whether a failure was logged already (said once).
    warned: bool,
}

impl Steering {
    pub(super) fn new(prog: Option<TunSteering>) -> Steering {
        Steering {
            prog,
            by_cpu: false,
            warned: false,
        }
    }

    fn warn(&mut self, what: &str, e: &steer::Error) {
        if !self.warned {
            tracing::warn!(error = %liqo_types::chain(e), "{what}");
            self.warned = true;
        }
    }
}

impl Device {
    /// Spreads packets over the lanes by CPU (`true`) or by flow; a no-op when already so, with
    /// one lane, or without a program.
    pub(super) fn steer(&self, by_cpu: bool) {
        if self.lanes.len() < 2 {
            return;
        }
        let mut st = self.steering.lock().unwrap_or_else(|p| p.into_inner());
        if st.by_cpu == by_cpu {
            return;
        }
        let (tun, udp) = (&self.lanes[0].tun, &self.lanes[0].udp);
        if by_cpu {
            let Some(prog) = &st.prog else {
                return;
            };
            let r = prog
                .attach(tun)
                .and_then(|()| steer::steer_udp_by_cpu(udp, self.lanes.len()));
            match r {
                Ok(()) => st.by_cpu = true,
                Err(e) => {
                    // Still correct: only which thread reads a packet changes.
                    st.warn(
                        "steering packets by CPU; lanes are picked by flow from now on",
                        &e,
                    );
                    st.prog = None;
                    // Half attached would be by CPU on one side only.
                    for r in [steer::unsteer_tun(tun), steer::unsteer_udp(udp)] {
                        if let Err(e) = r {
                            tracing::warn!(error = %liqo_types::chain(&e), "undoing the steering by CPU");
                        }
                    }
                }
            }
        } else {
            // Both tried whatever the other did; a failure leaves that side by CPU (still
            // correct, and said once).
            for r in [steer::unsteer_tun(tun), steer::unsteer_udp(udp)] {
                if let Err(e) = r {
                    st.warn("steering packets by flow again", &e);
                }
            }
            st.by_cpu = false;
        }
    }

    /// Where the data path runs now.
    pub fn data_path_status(&self) -> DataPathStatus {
        let (idle_class, idle_class_refused) = self.affinity.idle_class();
        DataPathStatus {
            lanes: self.lanes.len(),
            pinned: self.affinity.pinned(),
            spreads: self.affinity.spreads(),
            steered_by_cpu: self
                .steering
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .by_cpu,
            idle_class,
            idle_class_refused,
        }
    }

    /// The placement thread: every [`PLACEMENT_TICK`], where the data threads run and in which
    /// class (`wg::affinity`), and how packets pick their lane. It takes no peer's lock, so a data
    /// thread starved while holding one cannot keep it from putting that thread back in the
    /// normal class.
    pub(super) fn placement_loop(&self) {
        while !self.stopped() {
            // Spread (under load) the ticks are twice as frequent: the threads go home sooner
            // once the load is gone, and the cost of looking is nothing next to the load.
            thread::sleep(if self.affinity.pinned() {
                PLACEMENT_TICK
            } else {
                PLACEMENT_TICK / 2
            });
            self.affinity.tick();
            self.steer(self.affinity.pinned());
        }
    }
}
