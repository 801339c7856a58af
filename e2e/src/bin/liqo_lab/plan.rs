//! `liqo-lab plan`: validates a topology and prints its resolved plan, building nothing.

use std::process::ExitCode;

use anyhow::Result;

use crate::source::Source;

pub(crate) fn run(src: &Source) -> Result<ExitCode> {
    print!("{}", src.load()?.to_yaml());
    Ok(ExitCode::SUCCESS)
}
