//! What goes wrong starting, watching or stopping a process.

use std::path::PathBuf;

/// What went wrong with a process.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its log could not be opened.
    #[error("opening the log {}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// It could not be started.
    #[error("starting {name} ({})", program.display())]
    Spawn {
        /// Its name.
        name: String,
        /// The program.
        program: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for our child (or signalling it) failed.
    #[error("waiting for {name} (pid {pid})")]
    Wait {
        /// Its name.
        name: String,
        /// Its pid.
        pid: u32,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
