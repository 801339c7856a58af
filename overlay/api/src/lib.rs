//! The overlay agent's wire types, for the agent and for whoever writes its config or reads its
//! status (the route operator, the lab, the tests): the config file and what it means
//! ([`config`]: its parts, defaults and validation into the configuration an agent runs) and the
//! `/status` document ([`status`]). The `overlay` crate re-exports each where it always was.
//!
//! It never touches the kernel and has no `dataplane` (the kernel's rules for interface names
//! are `liqo_types::names`'). It never decides what an agent's config should say.

pub mod config;
pub mod status;
