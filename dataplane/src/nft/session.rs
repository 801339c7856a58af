//! [`Session`]: our table in one namespace and what we last applied to it, so that a change of
//! elements only (a peer added or removed) is one nf_tables transaction of those elements over
//! nfnetlink, not a replacement of the whole table by `nft -f` (which first reads the whole
//! ruleset back: milliseconds per thousand elements, even for a one-element change).

use std::{collections::HashSet, io};

use super::{
    build,
    elements::{self, Elements, SetDiff},
    error::Error,
    io as nft_io,
    ruleset::{Family, Ruleset},
    transaction::{self as txn, Outcome},
};
use crate::{
    netns::Netns,
    nlsock::{NETLINK_NETFILTER, Socket},
};

/// How [`Session::apply`] applied a ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Nothing to do: the ruleset is the one applied last, and nothing changed nftables in the
    /// namespace since.
    Unchanged,
    /// One transaction of element changes.
    Elements {
        /// Entries removed from sets and maps.
        removed: usize,
        /// Entries added.
        added: usize,
    },
    /// The whole table replaced (`nft -f`).
    Replaced,
}

/// What was applied last (with its elements), and the nftables generation right after.
#[derive(Debug, Clone)]
struct Last {
    rs: Ruleset,
    elements: Elements,
    genid: u32,
}

/// One namespace's nftables, and the ruleset this session applied there last.
///
/// [`Session::apply`] replaces the table whole (as [`super::apply`]) unless the ruleset differs
/// from the last one it applied only in set and map elements; then it sends just those
/// elements, in one transaction that the kernel accepts only if the namespace's nftables
/// generation is still the one that followed our last apply. Any commit by anyone else since
/// (a rule added by hand, the table deleted, ...) changes the generation, and the apply
/// becomes a full replacement that repairs it.
///
/// That check is also what makes applying the same ruleset again cheap and still a repair
/// (the daemons' periodic resync): one request reads the generation; if it moved, the table
/// is replaced, otherwise nothing is sent. After a failed or partial apply the session forgets
/// what it applied, so the next apply replaces the table.
#[derive(Debug)]
pub struct Session {
    ns: Option<Netns>,
    sock: Socket,
    last: Option<Last>,
}

impl Session {
    /// A session in `ns` (or the caller's namespace); its netlink socket is opened there.
    pub fn open(ns: Option<&Netns>) -> Result<Session, Error> {
        let sock = Socket::open_in(ns, NETLINK_NETFILTER)
            .map_err(Error::Netns)?
            .map_err(Error::Socket)?;
        Ok(Session {
            ns: ns.cloned(),
            sock,
            last: None,
        })
    }

    /// Makes the table `rs` names hold exactly `rs`: an element transaction when only elements
    /// changed since this session's last apply, a full replacement otherwise. On error the
    /// table is as it was (each way is one transaction), and the next apply replaces it.
    pub fn apply(&mut self, rs: &Ruleset) -> Result<Applied, Error> {
        // Each way validates before it sends anything: the elements here (the rest is the
        // last ruleset's, validated when it was applied), the whole ruleset in a replacement.
        if let Some(last) = self.last.take() {
            if last.rs == *rs {
                // The same ruleset again (the resync): one request says whether it still holds
                // (if it cannot be read, the table is replaced: the apply still converges).
                if self.generation_or_log(rs) == Some(last.genid) {
                    self.last = Some(last);
                    return Ok(Applied::Unchanged);
                }
                tracing::info!(table = %rs.table, "nftables changed behind our back; replacing the table");
            } else if elements::only_elements_differ(&last.rs, rs) {
                let elements = elements::of(rs)?;
                let diffs = elements::diff(&last.elements, &elements);
                if diffs.is_empty() {
                    // The same entries in another order: nothing to send, if nothing changed.
                    if self.generation_or_log(rs) == Some(last.genid) {
                        self.last = Some(Last {
                            rs: rs.clone(),
                            ..last
                        });
                        return Ok(Applied::Unchanged);
                    }
                    tracing::info!(table = %rs.table, "nftables changed behind our back; replacing the table");
                } else {
                    match self.commit(rs, &diffs, last.genid) {
                        Ok(true) => {
                            let (removed, added) = diffs.iter().fold((0, 0), |(r, a), d| {
                                let (dr, da) = d.counts();
                                (r + dr, a + da)
                            });
                            self.last = Some(Last {
                                rs: rs.clone(),
                                elements,
                                genid: txn::next_generation(last.genid),
                            });
                            return Ok(Applied::Elements { removed, added });
                        }
                        Ok(false) => {
                            tracing::info!(table = %rs.table, "nftables changed behind our back; replacing the table")
                        }
                        // The kernel refused an element: the ruleset is wrong, not the path.
                        Err(e @ Error::Element { .. }) => return Err(e),
                        // The socket failed (a timeout, no buffer space): nothing was applied,
                        // and `nft -f` may still get through.
                        Err(e) => {
                            let cause = std::error::Error::source(&e)
                                .map(ToString::to_string)
                                .unwrap_or_default();
                            tracing::warn!(table = %rs.table, error = %e, %cause, "the element transaction failed; replacing the table");
                        }
                    }
                }
            }
        }
        self.replace(rs)?;
        Ok(Applied::Replaced)
    }

    /// Forgets what was applied: the next apply replaces the table.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// `nft -f`, with the generation read before and after: if exactly our commit happened in
    /// between, the next apply may diff against `rs`.
    ///
    /// The generation is only what makes the next apply cheaper: if it cannot be read, the
    /// table is still replaced, and so is it next time.
    fn replace(&mut self, rs: &Ruleset) -> Result<(), Error> {
        let text = build::batch(rs)?;
        let elements = elements::of(rs)?;
        let before = self.generation_or_log(rs);
        nft_io::run_batch(self.ns.as_ref(), rs, &text)?;
        match (before, self.generation_or_log(rs)) {
            (Some(before), Some(after)) if after == txn::next_generation(before) => {
                self.last = Some(Last {
                    rs: rs.clone(),
                    elements,
                    genid: after,
                });
            }
            _ => {
                tracing::debug!(table = %rs.table, "another nftables commit ran meanwhile; the next apply replaces the table again")
            }
        }
        Ok(())
    }

    fn generation_or_log(&mut self, rs: &Ruleset) -> Option<u32> {
        self.generation(rs)
            .inspect_err(|e| {
                let cause = std::error::Error::source(e)
                    .map(ToString::to_string)
                    .unwrap_or_default();
                tracing::warn!(error = %e, %cause, "cannot read the nftables generation; the table is replaced whole");
            })
            .ok()
    }

    /// Sends the element transaction; `false` if the generation moved (nothing was applied).
    fn commit(&mut self, rs: &Ruleset, diffs: &[SetDiff], genid: u32) -> Result<bool, Error> {
        let first = self.sock.reserve(txn::messages_needed(diffs));
        let t = txn::transaction(rs.family, &rs.table, diffs, genid, first);
        let seqs: HashSet<u32> = (0..txn::messages_needed(diffs))
            .map(|i| crate::batch::seq_of(first, i))
            .collect();
        let acked: HashSet<u32> = t.acked.iter().copied().collect();
        let answers = self
            .sock
            .exchange(&t.bytes, &seqs, &acked)
            .map_err(|source| netlink_error(rs, "sending the element changes", source))?;
        match txn::outcome(&t, &answers.acks) {
            Outcome::Done => Ok(true),
            Outcome::Restart => Ok(false),
            Outcome::Refused {
                what,
                message,
                errno,
            } => Err(Error::Element {
                family: rs.family,
                table: rs.table.to_string(),
                what,
                message,
                source: io::Error::from_raw_os_error(errno),
            }),
        }
    }

    /// The namespace's nftables generation (it moves with every commit).
    fn generation(&mut self, rs: &Ruleset) -> Result<u32, Error> {
        let seq = self.sock.reserve(1);
        let one = HashSet::from([seq]);
        let answers = self
            .sock
            .exchange(&txn::get_generation(seq), &one, &one)
            .map_err(|source| netlink_error(rs, "reading the nftables generation", source))?;
        if let Some(a) = answers.acks.iter().find(|a| a.errno != 0) {
            return Err(netlink_error(
                rs,
                "reading the nftables generation",
                a.io_error(),
            ));
        }
        answers
            .replies
            .iter()
            .find_map(|r| txn::parse_generation(r.ty, &r.bytes))
            .ok_or_else(|| {
                netlink_error(
                    rs,
                    "reading the nftables generation",
                    io::Error::new(io::ErrorKind::InvalidData, "no generation in the answer"),
                )
            })
    }
}

fn netlink_error(rs: &Ruleset, what: &str, source: io::Error) -> Error {
    let family: Family = rs.family;
    Error::Netlink {
        family,
        table: rs.table.to_string(),
        what: what.into(),
        source,
    }
}
