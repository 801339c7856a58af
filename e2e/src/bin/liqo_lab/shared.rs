//! What several subcommands share: the root check, the refusal of the lab's own peering where
//! `liqoctl` peers, and the in-band summary.

use anyhow::{Result, bail};
use e2e::lab::{self, Prefix};

/// Fails unless `liqo-lab` runs as root.
pub(crate) fn require_root() -> Result<()> {
    e2e::cli::require_root("liqo-lab")
}

/// The lab's own `peer`, `unpeer` and `move-gateway` write the daemons' files: with control
/// planes the operators do, from what `liqoctl` makes.
pub(crate) fn refuse_k8s(prefix: &Prefix, what: &str) -> Result<()> {
    if lab::k8s::is_in_band(prefix) {
        bail!(
            "lab {prefix} is in-band (up --k8s --in-band): `{what}` is liqoctl's there \
             (`liqo-lab --prefix {prefix} k8s env` prints the shell lines; then \
             `liqoctl peer in-band`, as `liqo-lab --prefix {prefix} status` prints it)"
        );
    }
    if lab::k8s::is_k8s(prefix) {
        bail!(
            "lab {prefix} runs with control planes (up --k8s): `{what}` is liqoctl's there \
             (`liqo-lab --prefix {prefix} k8s env` prints the shell lines; then \
             `liqoctl --context milan generate peer-command` and run its output against rome)"
        );
    }
    Ok(())
}

/// What an in-band lab exposes where, and the `liqoctl` line that peers its first two
/// clusters (nothing for a lab that is not in-band).
pub(crate) fn print_in_band(k: &lab::k8s::K8sLab) -> Result<()> {
    let Some(record) = lab::k8s::inband::load(&k.lab.prefix)? else {
        return Ok(());
    };
    print!("{}", lab::k8s::inband::render(&record));
    let names: Vec<&str> = record.iter().map(|r| r.cluster.as_str()).collect();
    if let [a, b, ..] = names[..]
        && let Some(line) = lab::k8s::inband::peer_command(k, a, b)
    {
        println!("peer them: {line}");
    }
    Ok(())
}
