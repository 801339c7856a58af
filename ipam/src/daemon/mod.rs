//! `liqo-ipam serve`, on the daemon runtime (`liqo-daemon`): the settings (flags over the
//! watched config file), the state, the gRPC server, `/status` and `/metrics`, and a clean stop
//! on SIGTERM or SIGINT ([`serve`]). A changed config file's pools and reserved subnets are
//! applied while running; a change to any other field is refused naming it, and the running
//! state is kept ([`running`]'s reload rules).
//!
//! The binary only parses the command line into [`Settings`](crate::settings::Settings) and
//! the config file's path, and calls [`serve`].

mod error;
mod running;
mod serve;

pub use error::DaemonError;
pub use serve::serve;
