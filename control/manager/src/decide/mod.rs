//! The controllers' decisions: pure functions of what a controller observed, returning what
//! to do, tested without an apiserver.

pub mod api_server;
pub mod fc;
pub mod offer;
pub mod replicate;
pub mod request;
