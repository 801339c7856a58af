//! Tearing a lab with control planes down ([`down`]): its relays, its namespaces, its
//! clusters; also after a crash, without state.

use std::{path::Path, time::Duration};

use super::{error::K8sLabError, k8s_lab::is_k8s};
use crate::{
    k8s,
    lab::{self, DownReport, Prefix, error::STATE_DIR},
};

/// How long a relay gets between SIGTERM and SIGKILL.
const RELAY_GRACE: Duration = Duration::from_secs(2);

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Down {
    /// The lab's namespaces and their processes.
    pub lab: DownReport,
    /// The harness's processes (0 without control planes).
    pub k8s: usize,
    /// The relays and load balancers (`liqo-lab balance`).
    pub relays: usize,
}

/// Tears down lab `prefix` with its control planes, relays and every process (also after a
/// crash; a lab without control planes is torn down as [`lab::down`] does).
pub fn down(prefix: &Prefix) -> Result<Down, K8sLabError> {
    let k8s_mode = is_k8s(prefix);
    let dir = Path::new(STATE_DIR).join(format!("{prefix}.d"));
    // The relays and the load balancers (`liqo-lab balance`) first: a balancer would go on
    // moving the public address while the nodes go.
    let relays = relays_of(&dir);
    let stopped = k8s::stop_procs(&relays, RELAY_GRACE);
    if stopped > 0 {
        tracing::warn!(stopped, "relays needed SIGKILL");
    }
    // Real nodes first: their programs run in their cgroups, not in the lab's namespaces'
    // process lists. A failure there is returned after the rest is torn down.
    let real = super::realnode::stop(prefix);
    if let Ok(r) = &real
        && r.nodes > 0
    {
        tracing::info!(
            nodes = r.nodes,
            killed = r.killed,
            unmounted = r.unmounted,
            "real nodes stopped"
        );
    }
    let lab = lab::down(prefix)?;
    let k8s = if k8s_mode {
        k8s::down(prefix)?.stopped
    } else {
        0
    };
    real?;
    Ok(Down {
        lab,
        k8s,
        relays: relays.len(),
    })
}

/// Whether `args` (a command line, the program first) is a `liqo-lab relay` (or `balance`,
/// the load balancer of Liqo from its chart) whose `--tag`
/// is under `needle` (whatever global flags, such as `--prefix`, come before `relay`).
fn is_relay_of(args: &[String], needle: &str) -> bool {
    let tagged = args
        .windows(2)
        .any(|w| w[0] == "--tag" && w[1].starts_with(needle))
        || args.iter().any(|a| {
            a.strip_prefix("--tag=")
                .is_some_and(|t| t.starts_with(needle))
        });
    let program = args
        .first()
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "liqo-lab");
    program && tagged && args.iter().skip(1).any(|a| a == "relay" || a == "balance")
}

/// The relay processes of the lab whose directory is `dir` (by their command line).
fn relays_of(dir: &Path) -> Vec<dataplane::supervisor::Proc> {
    let needle = format!("{}/", dir.display());
    // An unreadable /proc lists no relay: `down` then finds none to stop, as before.
    dataplane::procs::find(|p| is_relay_of(&p.args, &needle))
        .unwrap_or_default()
        .into_iter()
        .map(|p| dataplane::supervisor::Proc {
            name: "liqo-lab".into(),
            pid: p.pid,
            log: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn relays_are_found_by_their_tag_whatever_flags_come_first() {
        let n = "/run/liqo-lab/ib1.d/";
        for yes in [
            "/x/liqo-lab relay --netns ib1-rome-n0 --tag /run/liqo-lab/ib1.d/rome/relay-n0",
            "/x/liqo-lab --prefix ib1 relay --netns a --forward 1=2 --tag /run/liqo-lab/ib1.d/t",
            "liqo-lab relay --tag=/run/liqo-lab/ib1.d/t --netns a",
            "/x/liqo-lab --prefix ib1 balance --cluster rome --tag /run/liqo-lab/ib1.d/rome/balance",
        ] {
            assert!(is_relay_of(&args(yes), n), "{yes}");
        }
        for no in [
            // Another lab's, one without a tag, another program, not a relay.
            "/x/liqo-lab relay --netns a --tag /run/liqo-lab/ib10.d/t",
            "/x/liqo-lab --prefix ib1 relay --netns a /run/liqo-lab/ib1.d/t",
            "/usr/bin/tail --tag /run/liqo-lab/ib1.d/t relay",
            "/x/liqo-lab --prefix ib1 down --tag /run/liqo-lab/ib1.d/t",
        ] {
            assert!(!is_relay_of(&args(no), n), "{no}");
        }
    }
}
