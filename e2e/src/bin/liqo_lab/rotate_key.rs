//! `liqo-lab rotate-key`: a gateway's WireGuard key rotated under probes (control planes only).

use std::{process::ExitCode, time::Duration};

use anyhow::{Result, bail};
use e2e::lab::{self, Prefix};

use crate::shared::require_root;

pub(crate) async fn run(
    prefix: &Prefix,
    cluster: &str,
    from: &str,
    delete_secret: bool,
    settle_secs: u64,
) -> Result<ExitCode> {
    require_root()?;
    if !lab::k8s::is_k8s(prefix) {
        bail!("lab {prefix} has no control planes: rotate-key needs `up --k8s`");
    }
    let k = lab::k8s::K8sLab::load(prefix)?;
    let trigger = if delete_secret {
        lab::k8s::rotate::Trigger::DeleteSecret
    } else {
        lab::k8s::rotate::Trigger::Liqoctl
    };
    let r = k
        .rotate_key(
            cluster,
            from,
            trigger,
            Duration::from_secs(settle_secs),
            Duration::from_secs(60),
        )
        .await?;
    if let Some(out) = &r.liqoctl {
        print!("{out}");
    }
    print!("{}", r.render());
    Ok(ExitCode::SUCCESS)
}
