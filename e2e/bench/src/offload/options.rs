//! What `liqo-bench offload` runs: its options, their limits and defaults, and the
//! namespaces of both sides.

use e2e::lab::Prefix;

use crate::{BenchError, run};

/// Pods a harness kwok node takes.
pub const PODS_PER_NODE: u32 = 110;
/// Replicas by default.
pub const DEFAULT_PODS: u32 = 1000;
/// milan's kwok nodes by default (12 × 110 pods cover 1,000 with room).
pub const DEFAULT_PROVIDER_NODES: usize = 12;
/// milan's kwok nodes for `pods`: enough to hold them at 90 % of [`PODS_PER_NODE`], at least
/// [`DEFAULT_PROVIDER_NODES`].
pub fn provider_nodes_for(pods: u32) -> usize {
    let per_node = PODS_PER_NODE * 9 / 10;
    (pods.div_ceil(per_node) as usize).max(DEFAULT_PROVIDER_NODES)
}

/// Seconds each wait may take for `pods`: 600, and a second per 8 pods above 4,800 (the
/// ReplicaSet controller creates about 20 pods a second).
pub fn timeout_for(pods: u32) -> u64 {
    600.max(u64::from(pods) / 8)
}

/// The offloaded namespace on rome.
pub const OFFLOADED: &str = "liqo-bench-offload";
/// The vanilla Deployment's namespace on milan.
pub const VANILLA: &str = "liqo-bench-vanilla";
/// The ladder's middle level.
const LADDER_MID: u32 = 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct OffloadOptions {
    /// The bench's clusters are `<prefix>ob`.
    pub prefix: Prefix,
    /// Replicas of the Deployment.
    pub pods: u32,
    /// milan's kwok nodes.
    pub provider_nodes: usize,
    /// rome's kwok nodes.
    pub consumer_nodes: usize,
    /// Timed runs per side (the median is reported).
    pub repeats: u32,
    /// Seconds each wait (all Running, a cleanup, a setup step) may take.
    pub timeout_secs: u64,
    /// Only the vanilla side: no Liqo is installed (the harness's own floor).
    pub vanilla_only: bool,
    /// The virtual kubelet's pod reflection workers (`None`: the default).
    pub vk_workers: Option<usize>,
    /// Kill the virtual kubelet at the end of the last Liqo run and measure its restart.
    pub restart_vk: bool,
}

impl OffloadOptions {
    /// Checks the numbers.
    pub fn validate(self) -> Result<OffloadOptions, BenchError> {
        let bad = |s: String| Err(BenchError::Options(s));
        if !(1..=10_000).contains(&self.pods) {
            return bad(format!("--pods {} is outside 1..=10000", self.pods));
        }
        if !(1..=200).contains(&self.provider_nodes) || !(1..=50).contains(&self.consumer_nodes) {
            return bad(format!(
                "--provider-nodes {} must be within 1..=200 and --consumer-nodes {} within 1..=50",
                self.provider_nodes, self.consumer_nodes
            ));
        }
        let room = self.provider_nodes as u32 * PODS_PER_NODE;
        if self.pods > room {
            return bad(format!(
                "--pods {} does not fit on --provider-nodes {} ({} x {PODS_PER_NODE} = {room} \
                 pods); add nodes",
                self.pods, self.provider_nodes, self.provider_nodes
            ));
        }
        if !(1..=20).contains(&self.repeats) {
            return bad(format!("--repeats {} is outside 1..=20", self.repeats));
        }
        if !(10..=7200).contains(&self.timeout_secs) {
            return bad(format!(
                "--timeout {} is outside 10..=7200 seconds",
                self.timeout_secs
            ));
        }
        self.cluster_prefix()?;
        Ok(self)
    }

    /// The prefix of the bench's clusters.
    pub fn cluster_prefix(&self) -> Result<Prefix, BenchError> {
        run::cluster_prefix(&self.prefix, "ob")
    }

    /// The pod counts the ladder samples at.
    pub fn ladder(&self) -> Vec<u32> {
        let mut l = vec![0, LADDER_MID.min(self.pods), self.pods];
        l.dedup();
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pods: u32, nodes: usize) -> OffloadOptions {
        OffloadOptions {
            prefix: "lq".parse().unwrap(),
            pods,
            provider_nodes: nodes,
            consumer_nodes: 1,
            repeats: 1,
            timeout_secs: 600,
            vanilla_only: false,
            vk_workers: None,
            restart_vk: true,
        }
    }

    #[test]
    fn the_default_nodes_and_timeout_grow_with_the_pods() {
        assert_eq!(provider_nodes_for(1000), 12);
        assert_eq!(provider_nodes_for(10_000), 102);
        assert!(opts(10_000, provider_nodes_for(10_000)).validate().is_ok());
        assert_eq!(timeout_for(1000), 600);
        assert_eq!(timeout_for(10_000), 1250);
    }

    #[test]
    fn the_pods_must_fit_on_the_provider_and_the_prefix_leaves_room() {
        assert!(opts(1000, 12).validate().is_ok());
        let e = opts(1000, 9).validate().unwrap_err().to_string();
        assert!(
            e.contains("--pods 1000 does not fit on --provider-nodes 9 (9 x 110 = 990"),
            "{e}"
        );
        assert!(opts(0, 12).validate().is_err());
        let mut r = opts(10, 1);
        r.repeats = 0;
        assert!(r.validate().is_err());
        assert_eq!(opts(10, 1).cluster_prefix().unwrap().to_string(), "lqob");
        let mut long = opts(10, 1);
        long.prefix = "abcdefghij".parse().unwrap();
        let e = long.validate().unwrap_err().to_string();
        assert!(e.contains("--prefix abcdefghij is too long"), "{e}");
    }

    #[test]
    fn the_ladder_is_0_100_and_all() {
        assert_eq!(opts(1000, 12).ladder(), [0, 100, 1000]);
        assert_eq!(opts(100, 12).ladder(), [0, 100]);
        assert_eq!(opts(20, 1).ladder(), [0, 20]);
    }
}
