//! Which lane a packet takes. While the data threads live on their lanes' CPUs (lightly loaded,
//! `wg::affinity`), a packet takes the lane of the CPU that sent it (TUN) or received it (UDP):
//! it is read by a thread already on that CPU. Under load the threads move between CPUs, and a
//! flow whose packets were spread by CPU would be reordered (a sender thread that moves sends
//! from another CPU): the kernel then picks the lane by flow again.

use dataplane::steer::{self, TunSteering};

use super::device::Device;

/// How packets are spread over the lanes now.
#[derive(Debug, Default)]
pub(super) struct Steering {
    /// The TUN program, loaded on first use; `None` until then, or if the kernel refused it.
    prog: Option<TunSteering>,
    /// Whether the kernel refused a program already (said once).
    refused: bool,
    /// Whether packets follow their CPU now.
    by_cpu: bool,
}

impl Device {
    /// Spreads packets over the lanes by CPU (`true`) or by flow; a no-op when already so, or
    /// with one lane.
    pub(super) fn steer(&self, by_cpu: bool) {
        if self.lanes.len() < 2 {
            return;
        }
        let mut st = self.steering.lock().unwrap_or_else(|p| p.into_inner());
        if st.by_cpu == by_cpu || (by_cpu && st.refused) {
            return;
        }
        let tun = &self.lanes[0].tun;
        let udp = &self.lanes[0].udp;
        let r = if by_cpu {
            let prog = match st.prog.take() {
                Some(p) => Ok(p),
                None => TunSteering::load(),
            };
            prog.and_then(|p| {
                let r = p
                    .attach(tun)
                    .and_then(|()| steer::steer_udp_by_cpu(udp, self.lanes.len()));
                st.prog = Some(p);
                r
            })
        } else {
            steer::unsteer_tun(tun).and_then(|()| steer::unsteer_udp(udp))
        };
        match r {
            Ok(()) => st.by_cpu = by_cpu,
            Err(e) => {
                // Still correct either way: only which thread reads a packet changes.
                tracing::warn!(error = %liqo_types::chain(&e), by_cpu, "steering packets over the lanes; the kernel spreads them by flow");
                st.refused = true;
                if by_cpu {
                    // Half attached is still by flow for the other half: undo it.
                    if let Err(e) = steer::unsteer_tun(tun).and_then(|()| steer::unsteer_udp(udp)) {
                        tracing::warn!(error = %liqo_types::chain(&e), "undoing the steering by CPU");
                    }
                }
            }
        }
    }
}
