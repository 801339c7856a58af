//! What the lab's command-line tools share: `liqo-lab` here and `liqo-bench` (its own crate, on
//! top of this one).

use anyhow::bail;

/// Dies quietly on a closed stdout (`liqo-lab status | head`), as command-line tools do, instead
/// of panicking: Rust ignores SIGPIPE by default. Call it first thing in `main`.
#[expect(
    unsafe_code,
    reason = "signal(2) to restore the default SIGPIPE disposition"
)]
pub fn default_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL installs no handler.
    // Ignored on failure: SIGPIPE then stays ignored, and a closed stdout is an error as before.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// Logs to stderr, filtered by `RUST_LOG` (by default warnings, without kube's client).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// Fails unless this process runs as root, saying that `program` needs it.
pub fn require_root(program: &str) -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{program} needs root (it creates network namespaces); run it with sudo or as root");
    }
    Ok(())
}
