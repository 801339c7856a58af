//! Waiting for Liqo's processes to be at rest before their memory is sampled again after the
//! timed runs (as the idle figure was sampled at rest): the deletions' work done, then time
//! for their allocator's forced collects.

use std::time::Instant;

use super::{
    report::{ProcCpu, QUIET_CPU_SECS, QUIET_SPAN, REST, SETTLE_MAX},
    setup::{Procs, cpu_delta},
};
use crate::BenchError;

/// Whether CPU seconds `before` and `after` (a [`QUIET_SPAN`] apart) are quiet: the same
/// processes found (the virtual kubelet may be missing while it restarts) and together under
/// [`QUIET_CPU_SECS`].
pub(crate) fn quiet(before: &[ProcCpu], after: &[ProcCpu]) -> bool {
    let names = |c: &[ProcCpu]| c.iter().map(|c| c.process.clone()).collect::<Vec<_>>();
    names(before) == names(after)
        && cpu_delta(before, after)
            .iter()
            .map(|c| c.cpu_secs)
            .sum::<f64>()
            < QUIET_CPU_SECS
}

/// How the processes were waited for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settled {
    /// Seconds waited in all.
    pub(crate) secs: f64,
    /// Quiet was reached (else [`SETTLE_MAX`] passed first).
    pub(crate) quiet: bool,
}

/// Waits until `procs` are [`quiet`] (at most `SETTLE_MAX`), then `REST` more.
pub(crate) async fn settle(procs: &Procs) -> Result<Settled, BenchError> {
    let t0 = Instant::now();
    let mut before = procs.cpu()?;
    let quiet = loop {
        tokio::time::sleep(QUIET_SPAN).await;
        let after = procs.cpu()?;
        if quiet(&before, &after) {
            break true;
        }
        if t0.elapsed() >= SETTLE_MAX {
            break false;
        }
        before = after;
    };
    tokio::time::sleep(REST).await;
    Ok(Settled {
        secs: t0.elapsed().as_secs_f64(),
        quiet,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_is_little_cpu_together_from_the_same_processes() {
        let c = |p: &str, s: f64| ProcCpu {
            process: p.into(),
            cpu_secs: s,
        };
        assert!(quiet(
            &[c("a", 1.0), c("b", 2.0)],
            &[c("a", 1.05), c("b", 2.05)]
        ));
        assert!(!quiet(
            &[c("a", 1.0), c("b", 2.0)],
            &[c("a", 1.1), c("b", 2.1)]
        ));
        assert!(
            !quiet(&[c("a", 1.0)], &[c("a", 1.0), c("v", 0.0)]),
            "one came"
        );
    }
}
