//! The signals that stop a daemon: SIGTERM (its supervisor, Kubernetes) and SIGINT (a person).

use std::{fmt, future::Future, io};

use tokio::signal::unix::{SignalKind, signal};

/// The signal that asked the daemon to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM.
    Terminate,
    /// SIGINT.
    Interrupt,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
        })
    }
}

/// A future that resolves on the first SIGTERM or SIGINT. The handlers are installed when this
/// is called (inside a tokio runtime), so a signal arriving before the future is polled is not
/// lost, and from then on the signals no longer kill the process: call it early.
pub fn shutdown() -> io::Result<impl Future<Output = Signal> + Send + 'static> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => Signal::Terminate,
            _ = int.recv() => Signal::Interrupt,
        }
    })
}
