//! The reconciles under way (controller, object, since when), so that a shutdown past its
//! grace names what it dropped.

use std::{sync::Arc, time::Instant};

/// The reconciles under way: controller, object and since when.
#[derive(Clone, Default)]
pub struct InFlight {
    inner: Arc<std::sync::Mutex<InFlightMap>>,
}

#[derive(Default)]
struct InFlightMap {
    next: u64,
    running: std::collections::BTreeMap<u64, (&'static str, String, Instant)>,
}

/// A reconcile under way; it is over when dropped (finished or cancelled).
pub struct Running {
    set: InFlight,
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.set.lock().running.remove(&self.id);
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, InFlightMap> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a reconcile of `object` by `controller` until the guard is dropped.
    pub fn start(&self, controller: &'static str, object: String) -> Running {
        let mut map = self.lock();
        let id = map.next;
        map.next += 1;
        map.running.insert(id, (controller, object, Instant::now()));
        Running {
            set: self.clone(),
            id,
        }
    }

    /// The reconciles under way, oldest first: `controller object (for N.Ns)`.
    pub fn describe(&self) -> Vec<String> {
        self.lock()
            .running
            .values()
            .map(|(c, o, since)| format!("{c} {o} (for {:.1}s)", since.elapsed().as_secs_f64()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_reconciles_are_named_until_their_guard_goes() {
        let f = InFlight::default();
        let a = f.start("foreigncluster", "milan".into());
        let b = f.start("replicator", "naples".into());
        let d = f.describe();
        assert_eq!(d.len(), 2);
        assert!(d[0].starts_with("foreigncluster milan (for "), "{d:?}");
        assert!(d[1].starts_with("replicator naples"), "{d:?}");
        drop(a);
        assert_eq!(f.describe().len(), 1);
        drop(b);
        assert!(f.describe().is_empty());
    }
}
