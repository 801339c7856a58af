//! `liqo-lab relay` (hidden; started by `up --k8s`): TCP from inside a node's namespace to the
//! root namespace, until killed.

use std::process::ExitCode;

use e2e::lab::k8s::relay::{self, Forward};

pub(crate) fn run(
    netns: &dataplane::NetnsName,
    forward: &[Forward],
    egress: Option<&std::path::Path>,
) -> ExitCode {
    match relay::serve(netns, forward, egress) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", liqo_types::chain(&e));
            ExitCode::FAILURE
        }
    }
}
