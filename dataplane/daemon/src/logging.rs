//! Logging: `tracing` to stderr, filtered by `RUST_LOG` (default `info`), coloured only on a
//! terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the process-wide subscriber: stderr, `RUST_LOG` or `info`, ANSI colours only when
/// stderr is a terminal (not in log files). A bad `RUST_LOG` falls back to `info` and says so.
pub fn init() {
    let (filter, bad) = match EnvFilter::try_from_default_env() {
        Ok(f) => (f, None),
        Err(e) => (
            EnvFilter::new("info"),
            std::env::var("RUST_LOG").ok().map(|v| (v, e)),
        ),
    };
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    if installed.is_err() {
        // Another subscriber is installed already (a test harness calling `init` twice); it
        // keeps logging, which is what the caller wants.
        tracing::debug!("a tracing subscriber is installed already");
    }
    if let Some((value, e)) = bad.filter(|(v, _)| !v.is_empty()) {
        tracing::warn!(RUST_LOG = %value, error = %e, "ignoring a bad RUST_LOG; logging at info");
    }
}
