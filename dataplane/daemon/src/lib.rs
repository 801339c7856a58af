//! The daemons' shared runtime, used by `liqo-gateway run`, `liqo-overlay run` and
//! `liqo-ipam serve` alike; the Kubernetes components (controller-manager, operators) use its
//! logging and its metrics-only server ([`server::spawn_metrics`]).
//!
//! It owns, once for every daemon:
//! - the config source ([`source::ConfigFile`]): a watched file (inotify on its directory, so an
//!   atomic rename or a Kubernetes ConfigMap's `..data` swap is seen within milliseconds, plus a
//!   tick of about a second that also retries failed applies, and a resync of about ten seconds
//!   that converges the running config again);
//! - the reload loop with refuse-and-keep semantics: a pure decision core ([`core::Core`]) and a
//!   thin async driver ([`driver::Reload::run`]) that calls a daemon's [`driver::Daemon`]
//!   implementation (parse a text, apply a config); a failed apply (its rollback's failure
//!   included, [`driver::RollbackFailed`]) stays in the status until an apply succeeds;
//! - the `reload` block every daemon's `/status` carries ([`status::ReloadStatus`]: what runs,
//!   what was refused, what failed to apply, whether the file is unreadable), with its metrics;
//! - the status and metrics server ([`server::StatusServer`], GET only) and its client
//!   ([`localhttp::get`]: the loopback GET of the `status` subcommands, the operators and the
//!   lab), and the supervision of background tasks such as that server or a gRPC server
//!   ([`tasks::Tasks`]): a task that stops stops the daemon with its error;
//! - logging setup ([`logging::init`]) and the shutdown signals ([`signal::shutdown`]);
//! - the runtime of the Kubernetes components, whose allocator is jemalloc (built in, the
//!   default), mimalloc or glibc's as `LIQO_MALLOC` chooses ([`memory::choice`];
//!   [`memory::runtime`]: each worker thread gives its free pages back as it goes idle;
//!   [`memory::jemalloc`]: jemalloc's `mallctl`), and their heap counted
//!   ([`memory::heap`]: the bytes held by size class, in their log and metrics);
//! - the `status` subcommand's output ([`show::status`], `-o table|json`);
//! - how the process ends ([`exit::block_on`]: runtime, exit code, the error printed once;
//!   [`exit::conclude`]: a failed run and a failed teardown both reported).
//!
//! It never touches the kernel and never knows a daemon's config format: parsing, validation and
//! applying belong to the daemon.
//!
//! A daemon's `run` is: [`signal::shutdown`], [`source::ConfigFile::watch`] and
//! [`source::ConfigFile::read`] for the first text, its own start-up, [`driver::Reload::started`],
//! [`server::StatusServer::bind`] with its closures spawned into [`tasks::Tasks`], then
//! [`driver::Reload::run`] until a signal or a failure, and its own teardown.

pub mod core;
pub mod driver;
pub mod exit;
pub mod localhttp;
pub mod logging;
pub mod memory;
pub mod server;
pub mod show;
pub mod signal;
pub mod source;
pub mod status;
pub mod tasks;

pub use driver::{ApplyError, Daemon, Reload, RollbackFailed};
pub use liqo_types::field::FieldError;
pub use status::{ReloadStatus, digest};
