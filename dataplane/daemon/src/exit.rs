//! How a daemon's process ends: [`block_on`] runs its command on a tokio runtime and turns the
//! result into the exit code (an error printed once, with its causes), and [`conclude`] reports
//! a run and the teardown after it together, so neither failure hides the other.

use std::{fmt, future::Future, process::ExitCode};

use crate::{signal::Signal, tasks::RunError};

/// The runtime a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// One thread (an agent whose work is a few netlink calls at a time).
    One,
    /// A pool of two worker threads (a data path or a gRPC server beside the reload loop).
    Two,
}

/// Sets up logging, runs `command` to completion and returns the process's exit code: success,
/// or `error: <the error with its causes>` on stderr and failure.
pub fn block_on<E: fmt::Display>(
    threads: Threads,
    command: impl Future<Output = Result<(), E>>,
) -> ExitCode {
    crate::logging::init();
    let runtime = match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Threads::Two => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    let result = match runtime {
        Ok(rt) => rt.block_on(command),
        Err(e) => {
            eprintln!("error: starting the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The end of a daemon's run: `outcome` is how the reload loop stopped, `removed` how the
/// teardown that followed went. A clean stop returns the teardown's result; a failed run
/// returns its own error, and a teardown failure after it is logged (not lost).
pub fn conclude<E>(outcome: Result<Signal, RunError>, removed: Result<(), E>) -> Result<(), E>
where
    E: From<RunError> + fmt::Display,
{
    match outcome {
        Ok(signal) => {
            tracing::info!(%signal, "stopped");
            removed
        }
        Err(e) => {
            if let Err(r) = removed {
                tracing::error!(error = %format!("{r:#}"), "removing what the daemon created also failed");
            }
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct E(String);

    impl From<RunError> for E {
        fn from(e: RunError) -> E {
            E(e.to_string())
        }
    }

    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    #[test]
    fn a_failed_run_wins_over_its_teardown_and_a_clean_stop_reports_the_teardown() {
        let failed = RunError::TaskEnded {
            name: "the status server".into(),
        };
        let text = failed.to_string();
        assert_eq!(
            conclude(Err(failed), Err(E("teardown".into()))),
            Err(E(text))
        );
        assert_eq!(
            conclude::<E>(Ok(Signal::Terminate), Err(E("teardown".into()))),
            Err(E("teardown".into()))
        );
        assert_eq!(conclude::<E>(Ok(Signal::Terminate), Ok(())), Ok(()));
    }

    #[test]
    fn exit_codes_follow_the_result() {
        assert_eq!(
            block_on(Threads::One, async { Ok::<(), E>(()) }),
            ExitCode::SUCCESS
        );
        assert_eq!(
            block_on(Threads::Two, async { Err::<(), E>(E("no".into())) }),
            ExitCode::FAILURE
        );
    }
}
