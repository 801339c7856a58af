//! What `liqo-bench reflection` measured, and its table.

use serde::{Deserialize, Serialize};

use super::workload::Counts;
use crate::report_core::Header;

/// The report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReflectionReport {
    /// The machine, the command and the tools.
    pub header: Header,
    /// Objects per kind (Services, EndpointSlices, ConfigMaps, Secrets).
    pub objects_per_kind: u32,
    /// Seconds until rome held every object (from the first request).
    pub home_secs: f64,
    /// Seconds until milan held every copy (from the same start).
    pub remote_secs: f64,
    /// `remote_secs / home_secs`.
    pub ratio: f64,
    /// The provider's API writes to the four kinds per object reflected.
    pub provider_writes_per_object: f64,
    /// The virtual kubelet's resident memory before the objects, MiB.
    pub vk_rss_mib_before: f64,
    /// And once every copy was made, MiB.
    pub vk_rss_mib_after: f64,
    /// Seconds from the deletions (and the kill -9 a quarter through them) until milan's
    /// copies were exactly rome's objects again.
    pub kill_converged_secs: f64,
    /// Whether a new virtual kubelet process ran by then.
    pub kill_restarted: bool,
    /// The copies milan held at the end (equal to rome's objects).
    pub after_kill: Counts,
    /// rome's IPAM at the end: the virtual kubelet's external mappings for milan against the
    /// addresses rome's slices list.
    pub ipam_after_kill: super::ipam::Holds,
}

/// The report as a table.
pub fn render(r: &ReflectionReport) -> String {
    let n = r.objects_per_kind;
    format!(
        "resource reflection, {n} Services + EndpointSlices + ConfigMaps + Secrets\n\
         \x20 rome holds them all          {:>8.1} s\n\
         \x20 milan holds every copy       {:>8.1} s   ratio {:.2}\n\
         \x20 provider writes per object   {:>8.2}\n\
         \x20 virtual kubelet RSS          {:>8.1} MiB before, {:.1} MiB after\n\
         \x20 kill -9 during deletions     converged in {:.1} s (restarted: {}), copies {:?}\n\
         \x20 IPAM after the kill          {} external mappings held, leaked {:?}, missing {:?}\n",
        r.home_secs,
        r.remote_secs,
        r.ratio,
        r.provider_writes_per_object,
        r.vk_rss_mib_before,
        r.vk_rss_mib_after,
        r.kill_converged_secs,
        r.kill_restarted,
        r.after_kill,
        r.ipam_after_kill.held,
        r.ipam_after_kill.leaked,
        r.ipam_after_kill.missing,
    )
}
