//! `liqo-lab down`: removes everything the lab created (control planes and relays too).

use std::process::ExitCode;

use anyhow::Result;
use e2e::lab::{self, Prefix};

use crate::shared::require_root;

pub(crate) fn run(prefix: &Prefix) -> Result<ExitCode> {
    require_root()?;
    let r = lab::k8s::down(prefix)?;
    println!(
        "lab {prefix} is down: removed {} namespaces, killed {} processes{}",
        r.lab.namespaces,
        r.lab.processes,
        if r.k8s > 0 || r.relays > 0 {
            format!(
                ", stopped {} control-plane processes and {} relays",
                r.k8s, r.relays
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
