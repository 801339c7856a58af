//! A kernel request as a plain value: the message, its netlink flags and a human description.
//!
//! Builders in [`crate::link`], [`crate::addr`], [`crate::route`], [`crate::rule`] and
//! [`crate::neigh`] return [`Request`]s without touching the kernel, so they are unit-tested
//! without root; [`crate::netlink::Netlink::execute`] sends one at a time, and the reconciles of
//! [`crate::netlink::Netlink`] send many per `sendmsg` (framed by `crate::batch`).

use rtnetlink::{
    packet_core::{
        NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
    },
    packet_route::RouteNetlinkMessage,
};

/// What a request does to an existing object with the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Create; fail with `EEXIST` if it exists (`ip ... add`).
    Create,
    /// Create or replace (`ip ... replace`).
    Replace,
    /// Add another entry under the same key (`bridge fdb append`).
    Append,
    /// Change or delete an existing object.
    Modify,
    /// List objects.
    Dump,
}

impl Mode {
    /// The netlink header flags for this mode.
    pub fn flags(self) -> u16 {
        match self {
            Mode::Create => NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            Mode::Replace => NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
            Mode::Append => NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND,
            Mode::Modify => NLM_F_REQUEST | NLM_F_ACK,
            Mode::Dump => NLM_F_REQUEST | NLM_F_DUMP,
        }
    }
}

/// One rtnetlink request, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The message.
    pub message: RouteNetlinkMessage,
    /// How it treats existing objects.
    pub mode: Mode,
    /// What it does, for logs and errors (`add route 10.1.0.0/16 via 10.0.0.2 table 100`).
    pub what: String,
}

impl Request {
    /// A request from its parts.
    pub fn new(message: RouteNetlinkMessage, mode: Mode, what: impl Into<String>) -> Request {
        Request {
            message,
            mode,
            what: what.into(),
        }
    }
}
