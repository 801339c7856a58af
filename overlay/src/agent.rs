//! Applying the plan: converge by diff, and remove everything on shutdown. Idempotent, so a
//! restart after `kill -9` adopts what exists without duplicates. [`Agent`] is what the reload
//! loop drives: a change that fails is rolled back to the running configuration (a failed
//! rollback is part of the error), and applying the running configuration again (the resync)
//! restores what was changed behind the agent's back.

use std::collections::BTreeSet;

use dataplane::{
    IfName, Netlink,
    addr::AddressSpec,
    link::{LinkInfo, LinkKind, LinkSpec},
    netlink,
};
use liqo_daemon::{ApplyError, RollbackFailed};
use tokio::sync::watch;

use crate::{
    config::{Config, ConfigError, File, defaults},
    plan,
};

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A kernel request failed.
    #[error(transparent)]
    Netlink(#[from] netlink::Error),
    /// A link that is not a VXLAN device has the device's name: it is someone else's.
    #[error("a {kind} link is named {device}: not replacing a link the overlay does not own")]
    NotOurs {
        /// The device name.
        device: IfName,
        /// The other link's kind.
        kind: String,
    },
}

/// The link named `name`, if there is one; an error if it is not a VXLAN device (not ours to
/// take over).
async fn vxlan_or_none(nl: &Netlink, name: &IfName) -> Result<Option<LinkInfo>, AgentError> {
    let existing = nl.link(name).await?;
    if let Some(l) = existing.as_ref().filter(|l| l.kind != "vxlan") {
        return Err(AgentError::NotOurs {
            device: name.clone(),
            kind: if l.kind.is_empty() {
                "plain".into()
            } else {
                l.kind.clone()
            },
        });
    }
    Ok(existing)
}

/// Converges this node to `cfg`: the VXLAN device (recreated only if its identity changed),
/// address, forwarding entries and neighbours, the overlay table and its rules.
pub async fn apply(nl: &Netlink, cfg: &Config) -> Result<(), AgentError> {
    let want = plan::device(cfg);
    let existing = vxlan_or_none(nl, &cfg.device).await?;
    let recreate = match &existing {
        None => true,
        Some(_) => !same_identity(nl, &want).await?,
    };
    if recreate {
        nl.delete_link(&cfg.device).await?;
        nl.add_link(&want).await?;
    }
    // Setting even the same address makes the kernel flush the device's neighbours (ours are
    // permanent, and would be missing until re-added below): only when it differs.
    let mac = cfg.me().mac();
    if recreate || existing.is_none_or(|l| l.mac != mac) {
        nl.set_mac(&cfg.device, mac).await?;
    }
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

/// Whether the existing device has the VNI, port, source address and underlay wanted (the
/// kernel cannot change them in place).
async fn same_identity(nl: &Netlink, want: &LinkSpec) -> Result<bool, AgentError> {
    let LinkKind::Vxlan(v) = &want.kind else {
        return Ok(false);
    };
    let link = match &v.dev {
        Some(d) => match nl.link(d).await? {
            Some(l) => Some(l.index),
            // The underlay is gone: recreating reports it.
            None => return Ok(false),
        },
        None => None,
    };
    let identity = dataplane::link::VxlanIdentity {
        vni: v.vni,
        port: v.port,
        local: v.local,
        link,
    };
    Ok(nl.vxlan_identity(&want.name).await? == Some(identity))
}

/// Removes the rules, the table and the device (its address, forwarding entries and neighbours
/// go with it).
pub async fn teardown(nl: &Netlink, cfg: &Config) -> Result<(), AgentError> {
    nl.reconcile_rules(defaults::TABLE, &[]).await?;
    nl.reconcile_table(defaults::TABLE, &[]).await?;
    delete_device(nl, &cfg.device).await?;
    Ok(())
}

/// Deletes the VXLAN device `name`; a link of another kind with that name is not ours and stays.
pub async fn delete_device(nl: &Netlink, name: &IfName) -> Result<(), AgentError> {
    if nl.link(name).await?.is_some_and(|l| l.kind == "vxlan") {
        nl.delete_link(name).await?;
    }
    Ok(())
}

/// A running agent: the configuration in force on this node.
pub struct Agent {
    nl: Netlink,
    running: watch::Sender<Config>,
    /// Devices of failed changes that could not be removed then (removed on shutdown).
    leftovers: BTreeSet<IfName>,
}

impl Agent {
    /// Applies `cfg` on this node; if that fails, removes what it created and returns the error.
    pub async fn start(nl: Netlink, cfg: Config) -> Result<Agent, AgentError> {
        if let Err(e) = apply(&nl, &cfg).await {
            if let Err(t) = teardown(&nl, &cfg).await {
                tracing::error!(error = %t, "removing a partly applied overlay");
            }
            return Err(e);
        }
        tracing::info!(node = %cfg.me, gateway = %cfg.gateway, remote = cfg.remote_cidrs.len(), "overlay up");
        Ok(Agent {
            nl,
            running: watch::Sender::new(cfg),
            leftovers: BTreeSet::new(),
        })
    }

    /// The configuration in force, as it changes (for the status).
    pub fn view(&self) -> watch::Receiver<Config> {
        self.running.subscribe()
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.running.borrow().clone()
    }

    /// Converges to `next` (the old device goes first if the device's name changes).
    async fn switch(&self, cfg: &Config, next: &Config) -> Result<(), AgentError> {
        if next.device != cfg.device {
            // A name taken by a link that is not ours fails before anything is torn down: a
            // retried change then never takes the running device away, even for a moment.
            vxlan_or_none(&self.nl, &next.device).await?;
            teardown(&self.nl, cfg).await?;
        }
        apply(&self.nl, next).await
    }

    /// Back to `cfg` after `next` failed; whatever cannot be restored now is converged by the
    /// next apply (every apply converges from any state), and the error says what.
    async fn roll_back(&mut self, cfg: &Config, next: &Config) -> Result<(), AgentError> {
        let mut removed = Ok(());
        if next.device != cfg.device
            && let Err(e) = delete_device(&self.nl, &next.device).await
        {
            // Removed on shutdown if no later apply does.
            self.leftovers.insert(next.device.clone());
            removed = Err(e);
        }
        apply(&self.nl, cfg).await.and(removed)
    }

    /// Removes everything the agent created.
    pub async fn shutdown(self) -> Result<(), AgentError> {
        let cfg = self.config();
        for d in self.leftovers.iter().filter(|d| **d != cfg.device) {
            delete_device(&self.nl, d).await?;
        }
        teardown(&self.nl, &cfg).await?;
        tracing::info!("overlay removed");
        Ok(())
    }
}

/// The reload loop drives the agent: a file is validated, then converged to; a kernel error
/// rolls back to the running configuration and is retried.
impl liqo_daemon::Daemon for Agent {
    type Config = Config;

    fn parse(&self, text: &str) -> Result<Config, ConfigError> {
        File::parse(text)?.validate()
    }

    async fn apply(&mut self, next: Config) -> Result<(), ApplyError> {
        let cfg = self.config();
        if let Err(e) = self.switch(&cfg, &next).await {
            let undo = self.roll_back(&cfg, &next).await;
            return Err(ApplyError::Failed(RollbackFailed::join(e, undo)));
        }
        if next != cfg {
            tracing::info!(gateway = %next.gateway, nodes = next.nodes.len(), remote = next.remote_cidrs.len(), "overlay configuration applied");
        }
        self.leftovers.remove(&next.device);
        self.running.send_replace(next);
        Ok(())
    }
}
