//! Which lane a packet takes. While the data threads live on their lanes' CPUs (lightly loaded,
//! `wg::affinity`), a packet takes the lane of the CPU that sent it (TUN) or received it (UDP):
//! it is read by a thread already on that CPU. Under load the threads move between CPUs, and a
//! flow whose packets were spread by CPU would be reordered (a sender thread that moves sends
//! from another CPU): the kernel then picks the lane by flow again. The placement thread
//! (`wg::placement`) switches between the two.

use dataplane::steer::{self, TunSteering};

use super::lanes::Lane;

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

    /// Whether packets follow their CPU now.
    pub(super) fn by_cpu(&self) -> bool {
        self.by_cpu
    }

    /// Spreads packets over `lanes` (at least two) by CPU (`true`) or by flow; a no-op when
    /// already so, or without a program.
    pub(super) fn set(&mut self, lanes: &[Lane], by_cpu: bool) {
        if self.by_cpu == by_cpu {
            return;
        }
        let (tun, udp) = (&lanes[0].tun, &lanes[0].udp);
        if by_cpu {
            let Some(prog) = &self.prog else {
                return;
            };
            let r = prog
                .attach(tun)
                .and_then(|()| steer::steer_udp_by_cpu(udp, lanes.len()));
            match r {
                Ok(()) => self.by_cpu = true,
                Err(e) => {
                    // Still correct: only which thread reads a packet changes.
                    self.warn(
                        "steering packets by CPU; lanes are picked by flow from now on",
                        &e,
                    );
                    self.prog = None;
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
                    self.warn("steering packets by flow again", &e);
                }
            }
            self.by_cpu = false;
        }
    }
}
