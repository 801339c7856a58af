//! `liqoctl` (also installed as `kubectl-liqo`, the kubectl plugin): parses the command line,
//! sets up logging and runs [`liqoctl::run`]; a failure prints its cause chain and exits 1.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use liqoctl::cli::{Cli, program_name};
use tracing_subscriber::EnvFilter;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let argv0 = std::env::args_os().next();
    let program = program_name(argv0.as_deref());
    let matches = Cli::command().name(program).bin_name(program).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let level = match cli.verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: logs piped to a file or a CI log stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level)),
        )
        .init();
    match liqoctl::run(cli, program).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", liqo_types::chain(&e));
            ExitCode::FAILURE
        }
    }
}
