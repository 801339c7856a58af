//! `liqo-mover`: the command line of the volume copy (see the library's doc for the protocol).
//! Exit status: 0 copied (and, for the sender, verified), 3 the manifests differ, 4 the
//! receiver's timeout passed, 1 any other failure (2: a wrong command line).

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use liqo_mover::{
    EXIT_MISMATCH, EXIT_TIMEOUT, TERMINATION_LOG, Token,
    receive::{self, ReceiveOptions},
    send::{self, SendOptions},
    wire::Ack,
};

/// liqo-mover: copies a volume directory to another over TCP and proves the copy. The shared
/// secret is the environment variable LIQO_MOVER_TOKEN (at least 32 characters) on both sides.
#[derive(Debug, Parser)]
#[command(name = "liqo-mover", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Listen, receive one tree into an empty directory, re-read it and answer its manifest.
    Receive(ReceiveArgs),
    /// Send a directory to a receiver and compare the receiver's manifest with the sent one.
    Send(SendArgs),
}

#[derive(Debug, Args)]
struct ReceiveArgs {
    /// The directory to fill: empty but for lost+found.
    #[arg(long)]
    dir: PathBuf,
    /// Where to listen, ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// How long, from the start, the sender has to complete the transfer.
    #[arg(long, default_value_t = 3600)]
    timeout_seconds: u64,
    /// Keep the receiver's own owner instead of the sender's (owners then left out of the
    /// manifest on both sides).
    #[arg(long)]
    no_owner: bool,
    /// Where the manifest line is also written, when that file exists.
    #[arg(long, default_value = TERMINATION_LOG)]
    termination_log: PathBuf,
}

#[derive(Debug, Args)]
struct SendArgs {
    /// The directory to copy.
    #[arg(long)]
    dir: PathBuf,
    /// The receiver, HOST:PORT (HOST may be a DNS name; resolved again at every try).
    #[arg(long, value_name = "HOST:PORT", value_parser = send::parse_target)]
    to: String,
    /// How long to keep trying to connect, once a second.
    #[arg(long, default_value_t = 180)]
    connect_timeout_seconds: u64,
    /// Where the result lines are also written, when that file exists.
    #[arg(long, default_value = TERMINATION_LOG)]
    termination_log: PathBuf,
}

fn main() -> ExitCode {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    let cli = Cli::parse();
    let (log, result) = match &cli.command {
        Command::Receive(a) => (&a.termination_log, run_receive(a)),
        Command::Send(a) => (&a.termination_log, run_send(a)),
    };
    match result {
        Ok(code) => code,
        Err((e, code)) => {
            tracing::error!("{e:#}");
            liqo_mover::write_termination_log(log, &format!("error: {e:#}\n"));
            ExitCode::from(code)
        }
    }
}

/// The lines printed on stdout and written into the termination log.
fn report(log: &std::path::Path, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    print!("{text}");
    liqo_mover::write_termination_log(log, &text);
}

type Failure = (anyhow::Error, u8);

fn failed(e: impl Into<anyhow::Error>) -> Failure {
    (e.into(), 1)
}

fn run_receive(a: &ReceiveArgs) -> Result<ExitCode, Failure> {
    let token = Token::from_env().map_err(failed)?;
    let opts = ReceiveOptions {
        dir: a.dir.clone(),
        listen: a.listen,
        timeout: Duration::from_secs(a.timeout_seconds),
        no_owner: a.no_owner,
    };
    let out = receive::receive(&opts, &token).map_err(|e| {
        let code = if e.is_timeout() { EXIT_TIMEOUT } else { 1 };
        (anyhow::Error::new(e).context("liqo-mover receive"), code)
    })?;
    report(&a.termination_log, &[out.summary.line()]);
    match out.ack {
        Some(Ack::Verified) => {
            tracing::info!(refusals = out.refusals, "the sender verified the copy");
            Ok(ExitCode::SUCCESS)
        }
        None => {
            tracing::warn!("the sender gave no verdict; its own exit status has it");
            Ok(ExitCode::SUCCESS)
        }
        Some(Ack::Mismatch) => {
            tracing::error!("the sender's manifest differs from this copy's");
            Ok(ExitCode::from(EXIT_MISMATCH))
        }
    }
}

fn run_send(a: &SendArgs) -> Result<ExitCode, Failure> {
    let token = Token::from_env().map_err(failed)?;
    let opts = SendOptions {
        dir: a.dir.clone(),
        to: a.to.clone(),
        connect_timeout: Duration::from_secs(a.connect_timeout_seconds),
    };
    let out = send::send(&opts, &token)
        .context("liqo-mover send")
        .map_err(failed)?;
    if out.verified() {
        report(
            &a.termination_log,
            &[out.local.line(), "verified".to_owned()],
        );
        Ok(ExitCode::SUCCESS)
    } else {
        report(
            &a.termination_log,
            &[
                out.local.line(),
                format!("mismatch receiver {}", out.remote.line()),
            ],
        );
        tracing::error!("the receiver's manifest differs from the sent one");
        Ok(ExitCode::from(EXIT_MISMATCH))
    }
}
