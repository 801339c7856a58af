//! The placement thread: where the data threads run and in which scheduling class
//! (`wg::affinity`, `wg::idleclass`), and how packets pick their lane (`wg::steering`), decided
//! every [`PLACEMENT_TICK`]; and where the data path runs now, as the status shows it.

use std::thread;

use super::{state::Device, tuning::PLACEMENT_TICK};
use liqo_gateway_api::status::DataPathStatus;

impl Device {
    /// Spreads packets over the lanes by CPU (`true`) or by flow; a no-op when already so, with
    /// one lane, or without a program.
    pub(super) fn steer(&self, by_cpu: bool) {
        if self.lanes.len() < 2 {
            return;
        }
        self.steering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set(&self.lanes, by_cpu);
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
                .by_cpu(),
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
