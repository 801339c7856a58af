//! The mutation run: its generator, the good documents and schemas, and the harness.

#![allow(unreachable_pub, reason = "a module of one test binary")]

pub mod harness;
pub mod mutate;
pub mod schemas;
