//! `liqo-lab exec`: runs a command inside a node or pod; its exit code is the command's.

use std::process::ExitCode;

use anyhow::{Context, Result};
use e2e::lab::{Lab, Prefix, Target};

pub(crate) fn run(prefix: &Prefix, target: &Target, command: &[String]) -> Result<ExitCode> {
    let lab = Lab::load(prefix)?;
    let ns = lab.netns(target)?;
    // Our own tools (`liqo-gateway status`, ...) are found where the lab's daemons are,
    // whether or not they are on the PATH (not found there: the PATH decides).
    let program = if command[0].starts_with("liqo-") && !command[0].contains('/') {
        e2e::lab::bin(&command[0])
            .map_or_else(|_| command[0].clone().into(), std::ffi::OsString::from)
    } else {
        command[0].clone().into()
    };
    let status = ns
        .command(&program)
        .args(&command[1..])
        .status()
        .with_context(|| format!("running {:?} in {target}", command[0]))?;
    Ok(ExitCode::from(status.code().map_or(1, |c| c as u8)))
}
