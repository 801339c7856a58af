//! The kernel steps of a converge and of a removal: routes and rules changed from what the last
//! converge left (or reconciled against the kernel), the host side removed, addresses ensured.

use dataplane::{IfName, Netlink, Netns, addr::AddressSpec, route::RouteSpec, rule::RuleSpec};
use ipnet::IpNet;
use liqo_daemon::RollbackFailed;

use super::GatewayError;
use crate::{config::Config, plan};

/// The routes and rules of a configuration, as [`plan`] makes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Planned {
    pub(super) gateway: Vec<RouteSpec>,
    pub(super) gateway_rules: Vec<RuleSpec>,
    pub(super) host: Vec<RouteSpec>,
    pub(super) host_rules: Vec<RuleSpec>,
}

impl Planned {
    pub(super) fn of(cfg: &Config) -> Planned {
        Planned {
            gateway: plan::gateway_routes(cfg),
            gateway_rules: plan::gateway_rules(),
            host: plan::host_routes(cfg),
            host_rules: plan::host_rules(cfg),
        }
    }
}

/// Makes `table` hold `want`: changed from `last` when that is what it holds, else reconciled
/// against what the kernel reports.
pub(super) async fn routes(
    nl: &Netlink,
    table: u32,
    last: Option<&[RouteSpec]>,
    want: &[RouteSpec],
) -> Result<(), GatewayError> {
    match last {
        Some(last) if last == want => {}
        Some(last) => _ = nl.change_table(table, last, want).await?,
        None => _ = nl.reconcile_table(table, want).await?,
    }
    Ok(())
}

/// Makes the rules at `priority` `want`, unless they are `last` (what the kernel holds).
pub(super) async fn rules(
    nl: &Netlink,
    priority: u32,
    last: Option<&[RuleSpec]>,
    want: &[RuleSpec],
) -> Result<(), GatewayError> {
    if last != Some(want) {
        nl.reconcile_rules(priority, want).await?;
    }
    Ok(())
}

/// Removes the host rules and routes (one batch each), the veth pair and the namespace of `cfg`
/// (with the tunnel and the NAT table); what is missing already is fine.
pub(super) async fn remove(host: &Netlink, cfg: &Config) -> Result<(), GatewayError> {
    host.reconcile_rules(plan::HOST_RULE_PRIORITY, &[]).await?;
    host.reconcile_rules(plan::OLD_HOST_RULE_PRIORITY, &[])
        .await?;
    host.reconcile_table(plan::HOST_TABLE, &[]).await?;
    host.delete_link(&cfg.host_link).await?;
    Netns::delete(&cfg.namespace)?;
    Ok(())
}

/// `e`, with the failure of undoing it if that failed too.
pub(super) fn undone(e: GatewayError, undo: Result<(), GatewayError>) -> GatewayError {
    match undo {
        Ok(()) => e,
        Err(u) => RollbackFailed {
            change: e.into(),
            rollback: u.into(),
        }
        .into(),
    }
}

pub(super) async fn ensure_address(
    nl: &Netlink,
    link: &IfName,
    addr: IpNet,
) -> Result<(), GatewayError> {
    let want = AddressSpec {
        link: link.clone(),
        addr,
    };
    if !nl.addresses().await?.contains(&want) {
        nl.add_address(&want).await?;
    }
    Ok(())
}
