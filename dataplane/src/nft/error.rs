//! What goes wrong: a ruleset that cannot be built ([`BuildError`], nothing sent to the kernel)
//! and applying or reading nftables state ([`Error`]).

use super::ruleset::{Family, Ident};
use crate::netlink::said;

/// A ruleset that cannot be built, naming the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Two sets, maps or chains share a name.
    #[error("table {table}: duplicate name {name}")]
    Duplicate {
        /// The table.
        table: Ident,
        /// The repeated name.
        name: Ident,
    },
    /// A rule refers to a set, map or chain that is not in the ruleset.
    #[error("table {table} chain {chain}: rule {rule} refers to unknown {what} {name}")]
    Unknown {
        /// The table.
        table: Ident,
        /// The chain of the rule.
        chain: Ident,
        /// Index of the rule in its chain.
        rule: usize,
        /// "set", "map" or "chain".
        what: &'static str,
        /// The missing name.
        name: Ident,
    },
    /// An element does not fit its set or map.
    #[error("table {table} {what} {name}: element {elem}: {problem}")]
    BadElement {
        /// The table.
        table: Ident,
        /// "set" or "map".
        what: &'static str,
        /// The set or map.
        name: Ident,
        /// The element.
        elem: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// An address does not match the table family.
    #[error("table {table} ({family}): {what} {addr} is of the other IP version")]
    WrongFamily {
        /// The table.
        table: Ident,
        /// Its family.
        family: Family,
        /// What holds the address.
        what: String,
        /// The address.
        addr: String,
    },
    /// A mark prefix map whose prefix length does not fit its addresses.
    #[error("table {table} map {name}: prefix length {len} is too long for its addresses")]
    BadPrefixLength {
        /// The table.
        table: Ident,
        /// The map.
        name: Ident,
        /// The length.
        len: u8,
    },
    /// A rule comment with a character nft cannot quote.
    #[error(
        "table {table} chain {chain}: comment {comment:?} may not contain '\"', '\\\\' or control characters"
    )]
    BadComment {
        /// The table.
        table: Ident,
        /// The chain.
        chain: Ident,
        /// The comment.
        comment: String,
    },
}

/// What went wrong applying or reading nftables state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ruleset is inconsistent; nothing was sent to the kernel.
    #[error("invalid ruleset")]
    Build(#[from] BuildError),
    /// `nft` refused the batch; the kernel state is unchanged.
    #[error("{op} table {family} {table}: nft said: {stderr}")]
    Refused {
        /// What was being done.
        op: &'static str,
        /// The table's family.
        family: Family,
        /// The table.
        table: String,
        /// nft's own message.
        stderr: String,
    },
    /// `nft` could not be run.
    #[error("running nft (is the nftables package installed?)")]
    Spawn(#[source] std::io::Error),
    /// `nft` printed something that is not the JSON we expect.
    #[error("unexpected output of nft: {0}")]
    Output(String),
    /// The kernel refused an element change ([`super::Session`]): the transaction was undone
    /// whole, the table is as it was.
    #[error("table {family} {table}: {what}{}", said(message))]
    Element {
        /// The table's family.
        family: Family,
        /// The table.
        table: String,
        /// What was refused (`adding element 10.1.0.0/24 . 10.200.0.0/16 : 10.50.0.0/16 to
        /// map snat_pod`).
        what: String,
        /// The kernel's explanation, when it gave one.
        message: Option<String>,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// Talking nfnetlink failed ([`super::Session`]).
    #[error("table {family} {table}: {what}")]
    Netlink {
        /// The table's family.
        family: Family,
        /// The table.
        table: String,
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The nfnetlink socket could not be opened ([`super::Session::open`]).
    #[error("opening an nfnetlink socket")]
    Socket(#[source] std::io::Error),
    /// The namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] crate::netns::Error),
}
