//! Background tasks a daemon cannot live without (its status server, a gRPC server): a task
//! that ends, fails or panics stops the daemon with that error instead of vanishing. Dropping
//! [`Tasks`] aborts the tasks still running.

use std::{collections::HashMap, future::Future};

use tokio::task::JoinSet;

use crate::signal::Signal;

/// An error of any kind, as a task returns it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a daemon stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A task returned an error.
    #[error("{name} failed")]
    TaskFailed {
        /// The task.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// A task returned although it should run until the daemon stops.
    #[error("{name} stopped unexpectedly")]
    TaskEnded {
        /// The task.
        name: String,
    },
    /// A task panicked.
    #[error("{name} panicked")]
    TaskPanicked {
        /// The task.
        name: String,
    },
    /// The daemon reported itself broken (for example a data-path thread died).
    #[error("the daemon is unhealthy")]
    Unhealthy(#[source] BoxError),
}

/// The supervised tasks of a daemon.
#[derive(Default)]
pub struct Tasks {
    set: JoinSet<Result<(), BoxError>>,
    names: HashMap<tokio::task::Id, String>,
}

impl Tasks {
    /// No tasks yet.
    pub fn new() -> Tasks {
        Tasks::default()
    }

    /// Runs `task` (named for errors: "the status server") until the daemon stops. Must run
    /// inside a tokio runtime.
    pub fn spawn<F, E>(&mut self, name: impl Into<String>, task: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let handle = self
            .set
            .spawn(async move { task.await.map_err(Into::into) });
        self.names.insert(handle.id(), name.into());
    }

    /// Whether there is no task.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Waits until a task stops and says how (never returns while there is no task).
    pub async fn stopped(&mut self) -> RunError {
        let Some(joined) = self.set.join_next_with_id().await else {
            return std::future::pending().await;
        };
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        let name = self
            .names
            .remove(&id)
            .unwrap_or_else(|| "a background task".to_owned());
        match joined {
            Ok((_, Ok(()))) => RunError::TaskEnded { name },
            Ok((_, Err(source))) => RunError::TaskFailed { name, source },
            Err(_) => RunError::TaskPanicked { name },
        }
    }

    /// Runs until `shutdown` resolves (`Ok` with the signal) or a task stops (its error); for
    /// daemons without a config file to reload.
    pub async fn run(mut self, shutdown: impl Future<Output = Signal>) -> Result<Signal, RunError> {
        tokio::select! {
            sig = shutdown => Ok(sig),
            e = self.stopped() => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_task_that_stops_stops_the_daemon() {
        let mut t = Tasks::new();
        t.spawn("forever", std::future::pending::<Result<(), BoxError>>());
        t.spawn("the server", async {
            Err::<(), _>(std::io::Error::other("address in use"))
        });
        let e = t.stopped().await;
        assert!(
            matches!(&e, RunError::TaskFailed { name, .. } if name == "the server"),
            "{e:?}"
        );
        assert_eq!(
            std::error::Error::source(&e).unwrap().to_string(),
            "address in use"
        );

        let mut t = Tasks::new();
        t.spawn("quitter", async { Ok::<(), BoxError>(()) });
        assert!(matches!(t.stopped().await, RunError::TaskEnded { name } if name == "quitter"));

        let mut t = Tasks::new();
        t.spawn("crasher", async {
            if true {
                panic!("boom");
            }
            Ok::<(), BoxError>(())
        });
        assert!(matches!(t.stopped().await, RunError::TaskPanicked { name } if name == "crasher"));
    }

    #[tokio::test]
    async fn without_tasks_only_the_signal_stops_it() {
        let t = Tasks::new();
        assert!(t.is_empty());
        let sig = t
            .run(async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Signal::Terminate
            })
            .await;
        assert_eq!(sig.unwrap(), Signal::Terminate);
    }
}
