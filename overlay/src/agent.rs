//! Applying the plan: converge by diff, and remove everything on shutdown. Idempotent, so a
//! restart after `kill -9` adopts what exists without duplicates.

use dataplane::{
    Netlink,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    netlink,
};

use crate::{
    config::{Config, defaults},
    plan,
};

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A kernel request failed.
    #[error(transparent)]
    Netlink(#[from] netlink::Error),
}

/// Converges this node to `cfg`: the VXLAN device (recreated only if its identity changed),
/// address, forwarding entries and neighbours, the overlay table and its rules.
pub async fn apply(nl: &Netlink, cfg: &Config) -> Result<(), AgentError> {
    let want = plan::device(cfg);
    let recreate = match nl.link(&cfg.device).await? {
        None => true,
        Some(l) => l.kind != "vxlan" || !same_identity(nl, cfg, &want).await?,
    };
    if recreate {
        nl.delete_link(&cfg.device).await?;
        nl.add_link(&want).await?;
    }
    nl.set_mac(&cfg.device, cfg.me().mac()).await?;
    nl.set_mtu(&cfg.device, cfg.mtu).await?;
    nl.set_up(&cfg.device, true).await?;
    let addr = AddressSpec {
        link: cfg.device.clone(),
        addr: plan::address(cfg),
    };
    let current: Vec<AddressSpec> = nl
        .addresses()
        .await?
        .into_iter()
        .filter(|a| a.link == cfg.device)
        .collect();
    // Only our IPv4 address is managed (the kernel's IPv6 link-local stays).
    for stale in current
        .iter()
        .filter(|a| a.addr.addr().is_ipv4() && **a != addr)
    {
        nl.execute(dataplane::addr::delete(stale, nl.index(&cfg.device).await?))
            .await?;
    }
    if !current.contains(&addr) {
        nl.add_address(&addr).await?;
    }
    let fdb = plan::fdb(cfg);
    let have = nl.fdb(&cfg.device).await?;
    for stale in have.iter().filter(|f| !fdb.contains(f)) {
        nl.delete_fdb(stale).await?;
    }
    for f in fdb.iter().filter(|f| !have.contains(f)) {
        nl.append_fdb(f).await?;
    }
    let neighbours = plan::neighbours(cfg);
    let have = nl.neighbours(&cfg.device).await?;
    for stale in have.iter().filter(|n| !neighbours.contains(n)) {
        nl.delete_neighbour(stale).await?;
    }
    for n in neighbours.iter().filter(|n| !have.contains(n)) {
        nl.set_neighbour(n).await?;
    }
    nl.reconcile_table(defaults::TABLE, &plan::routes(cfg, defaults::TABLE))
        .await?;
    nl.reconcile_rules(defaults::TABLE, &plan::rules(cfg, defaults::TABLE))
        .await?;
    Ok(())
}

/// Whether the existing device has the VNI and port wanted (the kernel cannot change them).
async fn same_identity(nl: &Netlink, cfg: &Config, want: &LinkSpec) -> Result<bool, AgentError> {
    let LinkKind::Vxlan(v) = &want.kind else {
        return Ok(false);
    };
    Ok(nl.vxlan_identity(&cfg.device).await? == Some((v.vni, v.port)))
}

/// Removes the rules, the table and the device (its address, forwarding entries and neighbours
/// go with it).
pub async fn teardown(nl: &Netlink, cfg: &Config) -> Result<(), AgentError> {
    nl.reconcile_rules(defaults::TABLE, &[]).await?;
    nl.reconcile_table(defaults::TABLE, &[]).await?;
    nl.delete_link(&cfg.device).await?;
    Ok(())
}
