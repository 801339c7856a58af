//! nftables: a ruleset for one table we own, built into one atomic batch and applied with `nft -j`.
//!
//! [`Ruleset`] is the desired state of the whole table. [`build::batch`] turns it into a single
//! batch that creates the table if missing, flushes it by deleting it, and recreates it with
//! every set, map, chain and rule: the kernel applies the batch as one transaction, so readers
//! see the old table or the new one, never a half-applied mix, and a rejected batch changes
//! nothing. Prefix translations (netmap) are map lookups, so thousands of peers cost one rule.
//!
//! A [`Session`] remembers what it applied: when only set and map elements change (peers come
//! and go), it sends just those elements as one nf_tables transaction over nfnetlink
//! (`elements` and `transaction`: pure; `nlsock`: the socket), and replaces the whole
//! table otherwise.
//!
//! Bottom up: the ruleset's types (`ruleset`), what goes wrong (`error`), the checks of set and
//! map entries (`check`), the batch ([`build`]) and the elements (`elements`, `transaction`),
//! then running `nft` (`io`) and the [`Session`].

pub mod build;
mod check;
mod elements;
mod error;
mod io;
mod ruleset;
mod session;
mod transaction;

pub use error::Error;
pub use io::{apply, delete, list, tables};
pub use ruleset::{
    AddrType, BaseChain, Chain, ChainKind, CtState, Expr, Family, Field, Hook, Ident, InvalidIdent,
    Map, MarkAddrMap, MarkMap, MarkPrefixMap, Policy, Rule, Ruleset, Set,
};
pub use session::{Applied, Session};

#[cfg(test)]
mod tests;
