//! Routing tables and rules, read with one dump and changed with one batch on the batch socket.
//!
//! A batch is many messages per `sendmsg`, each with its own sequence number and `NLM_F_ACK`,
//! chunked so that the acknowledgements of a chunk fit the receive buffer; the kernel handles
//! every message of a chunk even after refusing one. Link names are resolved by asking for just
//! the links concerned (a `GET` per name or index, batched), never by dumping every link.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    io,
    sync::{Arc, PoisonError},
};

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::{
    RouteNetlinkMessage,
    link::{LinkAttribute, LinkMessage},
};

use super::{Error, Netlink};
use crate::{
    batch::{self, Ack},
    link,
    names::IfName,
    nlsock::{Answers, Socket},
    request::{Mode, Request},
    route::{self, RouteDiff, RouteSpec},
    rule::{self, RuleSpec},
};

/// Bytes per `sendmsg` of a batch (the send buffer is enlarged if a message needs more).
const CHUNK_BYTES: usize = 128 << 10;

impl Netlink {
    /// Runs `f` with the batch socket on a blocking thread.
    async fn blocking<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut Socket) -> Result<T, Error> + Send + 'static,
    {
        let sock = Arc::clone(&self.batch);
        let job = tokio::task::spawn_blocking(move || {
            f(&mut sock.lock().unwrap_or_else(PoisonError::into_inner))
        });
        match job.await {
            Ok(r) => r,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => Err(Error::Io {
                    what: "talking to the kernel".into(),
                    source: io::Error::other(e),
                }),
            },
        }
    }

    /// The unicast routes of `table` that this crate can describe (kernel-made local and
    /// broadcast routes live in other tables or are not unicast and are left out).
    pub async fn routes(&self, table: u32) -> Result<Vec<RouteSpec>, Error> {
        self.blocking(move |s| Links::default().routes(s, table))
            .await
    }

    /// Makes `table` hold exactly `desired`, touching only routes that differ: one dump of the
    /// table, then one batch of deletions and additions. Returns the diff that was applied.
    ///
    /// If the kernel refuses part of the batch, the first refusal is returned, naming its
    /// route; the messages after it in the batch were still processed, so the table may hold
    /// part of the diff. The next reconcile dumps the table again and computes what is left.
    pub async fn reconcile_table(
        &self,
        table: u32,
        desired: &[RouteSpec],
    ) -> Result<RouteDiff, Error> {
        let desired = desired.to_vec();
        self.blocking(move |s| reconcile_table(s, table, &desired))
            .await
    }

    /// Changes `table` from `from` to `to` (both as the caller wants them; `from` is what it
    /// made the table hold last) with one batch of the routes that differ, without dumping the
    /// table: what a reconcile of `to` would send when nothing changed the table since. Returns
    /// the diff that was applied.
    ///
    /// A route of `from` that is gone already is fine, and a route of `to` replaces one the
    /// table holds with the same destination and metric; other changes made behind the caller's
    /// back stay until a [`Netlink::reconcile_table`] repairs them. Refusals are reported as by
    /// [`Netlink::reconcile_table`].
    pub async fn change_table(
        &self,
        table: u32,
        from: &[RouteSpec],
        to: &[RouteSpec],
    ) -> Result<RouteDiff, Error> {
        let diff = RouteDiff::new(from, to);
        let mine: Vec<&RouteSpec> = diff.remove.iter().chain(&diff.add).collect();
        if let Some(r) = mine.iter().find(|r| r.table != table) {
            return Err(Error::Request {
                what: format!("change table {table}"),
                message: Some(format!("route {r} is of another table")),
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        self.blocking(move |s| change_table(s, diff)).await
    }

    /// Every "lookup table" rule.
    pub async fn rules(&self) -> Result<Vec<RuleSpec>, Error> {
        self.blocking(rules).await
    }

    /// Makes the rules at `priority` exactly `desired` (each of which must have that priority),
    /// adding and deleting only what differs: one dump, one batch. Returns `(added, deleted)`.
    ///
    /// As with [`Netlink::reconcile_table`], the first refusal is returned and the rest of the
    /// batch was still processed; the next reconcile recomputes the diff.
    pub async fn reconcile_rules(
        &self,
        priority: u32,
        desired: &[RuleSpec],
    ) -> Result<(usize, usize), Error> {
        let desired = desired.to_vec();
        self.blocking(move |s| reconcile_rules(s, priority, &desired))
            .await
    }
}

fn reconcile_table(s: &mut Socket, table: u32, desired: &[RouteSpec]) -> Result<RouteDiff, Error> {
    let mut links = Links::default();
    links.learn_names(s, desired.iter().filter_map(|r| r.dev.as_ref()))?;
    let current = links.routes(s, table)?;
    let diff = RouteDiff::new(&current, desired);
    let dev = |r: &RouteSpec| r.dev.as_ref().and_then(|d| links.by_name.get(d).copied());
    let reqs: Vec<Request> = (diff.remove.iter().map(|r| route::delete(r, dev(r))))
        .chain(diff.add.iter().map(|r| route::add(r, dev(r))))
        .collect();
    apply(s, &reqs)?;
    Ok(diff)
}

fn change_table(s: &mut Socket, diff: RouteDiff) -> Result<RouteDiff, Error> {
    let mut links = Links::default();
    links.learn_names(
        s,
        (diff.remove.iter().chain(&diff.add)).filter_map(|r| r.dev.as_ref()),
    )?;
    let dev = |r: &RouteSpec| r.dev.as_ref().and_then(|d| links.by_name.get(d).copied());
    let reqs: Vec<Request> = (diff.remove.iter().map(|r| route::delete(r, dev(r))))
        .chain(diff.add.iter().map(|r| route::replace(r, dev(r))))
        .collect();
    let gone = diff.remove.len();
    apply_except(s, &reqs, |i, ack| i < gone && ack.errno == libc::ESRCH)?;
    Ok(diff)
}

fn rules(s: &mut Socket) -> Result<Vec<RuleSpec>, Error> {
    Ok(dump(s, &rule::dump())?
        .iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewRule(r) => rule::parse(r),
            _ => None,
        })
        .collect())
}

fn reconcile_rules(
    s: &mut Socket,
    priority: u32,
    desired: &[RuleSpec],
) -> Result<(usize, usize), Error> {
    let current: Vec<RuleSpec> = rules(s)?
        .into_iter()
        .filter(|r| r.priority == priority)
        .collect();
    let stale: Vec<&RuleSpec> = current.iter().filter(|r| !desired.contains(r)).collect();
    let missing: BTreeSet<&RuleSpec> = desired.iter().filter(|r| !current.contains(r)).collect();
    let reqs: Vec<Request> = (stale.iter().map(|r| rule::delete(r)))
        .chain(missing.iter().map(|r| rule::add(r)))
        .collect();
    apply(s, &reqs)?;
    Ok((missing.len(), stale.len()))
}

/// The link named `name` (one `RTM_GETLINK`, no dump).
pub(crate) fn link_named(name: &IfName) -> Request {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    Request::new(
        RouteNetlinkMessage::GetLink(msg),
        Mode::Modify,
        format!("look up link {name}"),
    )
}

/// The link with index `index`.
pub(crate) fn link_indexed(index: u32) -> Request {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    Request::new(
        RouteNetlinkMessage::GetLink(msg),
        Mode::Modify,
        format!("look up link {index}"),
    )
}

/// Link names and indices learnt so far, asked of the kernel a batch at a time.
#[derive(Debug, Default)]
struct Links {
    by_name: HashMap<IfName, u32>,
    by_index: HashMap<u32, IfName>,
}

impl Links {
    /// Learns the links of `answers` (replies to [`link_named`] or [`link_indexed`]).
    fn learn(&mut self, answers: &Answers) -> Result<(), Error> {
        for r in &answers.replies {
            if let RouteNetlinkMessage::NewLink(l) = parse(&r.bytes)? {
                let info = link::parse(&l);
                if let Ok(name) = info.name.parse::<IfName>() {
                    self.by_index.insert(info.index, name.clone());
                    self.by_name.insert(name, info.index);
                }
            }
        }
        Ok(())
    }

    /// Learns the indices of `names`; a name with no link is [`Error::NoSuchLink`].
    fn learn_names<'a>(
        &mut self,
        s: &mut Socket,
        names: impl IntoIterator<Item = &'a IfName>,
    ) -> Result<(), Error> {
        let names: BTreeSet<&IfName> = names
            .into_iter()
            .filter(|n| !self.by_name.contains_key(*n))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let reqs: Vec<Request> = names.iter().map(|n| link_named(n)).collect();
        let (first, answers) = exchange(s, &reqs)?;
        self.learn(&answers)?;
        if let Some((i, ack)) = batch::first_refusal(&answers.acks, first, reqs.len())
            && ack.errno != libc::ENODEV
        {
            return Err(refused(&reqs[i], ack));
        }
        match names.into_iter().find(|n| !self.by_name.contains_key(*n)) {
            Some(n) => Err(Error::NoSuchLink(n.clone())),
            None => Ok(()),
        }
    }

    /// Learns the names of `indices`; a link gone meanwhile stays unnamed.
    fn learn_indices(&mut self, s: &mut Socket, indices: BTreeSet<u32>) -> Result<(), Error> {
        if indices.is_empty() {
            return Ok(());
        }
        let reqs: Vec<Request> = indices.into_iter().map(link_indexed).collect();
        let (first, answers) = exchange(s, &reqs)?;
        self.learn(&answers)?;
        match batch::first_refusal(&answers.acks, first, reqs.len()) {
            Some((i, ack)) if ack.errno != libc::ENODEV => Err(refused(&reqs[i], ack)),
            _ => Ok(()),
        }
    }

    /// The unicast routes of `table`, their devices named.
    fn routes(&mut self, s: &mut Socket, table: u32) -> Result<Vec<RouteSpec>, Error> {
        let datagrams = dump_raw(s, &route::dump(table))?;
        let payloads = || {
            datagrams
                .iter()
                // Split once already, when they were received: they cannot be malformed.
                .flat_map(|d| batch::messages(d).unwrap_or_default())
                .filter(|m| m.ty == route::RTM_NEWROUTE)
                .map(|m| &m.bytes[batch::HDR_LEN..])
        };
        let parse_all = |links: &Links, unknown: &mut BTreeSet<u32>| -> Vec<RouteSpec> {
            payloads()
                .filter_map(|p| {
                    route::parse(p, |i| {
                        let name = links.by_index.get(&i).cloned();
                        if name.is_none() {
                            unknown.insert(i);
                        }
                        name
                    })
                })
                .filter(|r| r.table == table)
                .collect()
        };
        let mut unknown = BTreeSet::new();
        let routes = parse_all(self, &mut unknown);
        if unknown.is_empty() {
            return Ok(routes);
        }
        // Devices not asked for: named, then the routes read again.
        self.learn_indices(s, unknown)?;
        Ok(parse_all(self, &mut BTreeSet::new()))
    }
}

fn parse(bytes: &[u8]) -> Result<RouteNetlinkMessage, Error> {
    let bad = |e: String| Error::Io {
        what: "reading the kernel's answer".into(),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    };
    match NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) {
        Ok(m) => match m.payload {
            NetlinkPayload::InnerMessage(inner) => Ok(inner),
            other => Err(bad(format!("unexpected message {other:?}"))),
        },
        Err(e) => Err(bad(e.to_string())),
    }
}

/// One dump, its datagrams whole.
fn dump_raw(s: &mut Socket, req: &Request) -> Result<Vec<Vec<u8>>, Error> {
    let build = |seq| {
        batch::frame(std::slice::from_ref(req), seq, 1, usize::MAX)
            .into_iter()
            .next()
            .map(|c| c.bytes)
            .unwrap_or_default()
    };
    s.dump(build).map_err(|source| Error::Io {
        what: req.what.clone(),
        source,
    })
}

/// One dump, its messages parsed.
fn dump(s: &mut Socket, req: &Request) -> Result<Vec<RouteNetlinkMessage>, Error> {
    let datagrams = dump_raw(s, req)?;
    let mut out = Vec::new();
    for d in &datagrams {
        let msgs = batch::messages(d).map_err(|e| Error::Io {
            what: req.what.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })?;
        for m in msgs.iter().filter(|m| m.ty >= 16) {
            out.push(parse(m.bytes)?);
        }
    }
    Ok(out)
}

/// Sends `reqs` in chunks and gathers every answer; returns the first sequence number too.
fn exchange(s: &mut Socket, reqs: &[Request]) -> Result<(u32, Answers), Error> {
    let first = s.reserve(reqs.len());
    let mut all = Answers::default();
    for c in batch::frame(reqs, first, s.ack_room(), CHUNK_BYTES) {
        let seqs: HashSet<u32> = (c.start..c.start + c.count)
            .map(|i| batch::seq_of(first, i))
            .collect();
        let answers = s
            .exchange(&c.bytes, &seqs, &seqs)
            .map_err(|source| Error::Io {
                what: format!(
                    "sending {} requests ({}{})",
                    c.count,
                    reqs[c.start].what,
                    if c.count > 1 { ", ..." } else { "" }
                ),
                source,
            })?;
        all.acks.extend(answers.acks);
        all.replies.extend(answers.replies);
    }
    Ok((first, all))
}

/// The error of a refused request.
fn refused(req: &Request, ack: &Ack) -> Error {
    Error::Request {
        what: req.what.clone(),
        message: ack.message.clone(),
        source: ack.io_error(),
    }
}

/// Sends `reqs` as one batch; the first refusal is the error (the rest were still processed).
fn apply(s: &mut Socket, reqs: &[Request]) -> Result<(), Error> {
    apply_except(s, reqs, |_, _| false)
}

/// [`apply`], with the refusals that `fine(index, ack)` accepts taken as done.
fn apply_except(
    s: &mut Socket,
    reqs: &[Request],
    fine: impl Fn(usize, &Ack) -> bool,
) -> Result<(), Error> {
    if reqs.is_empty() {
        return Ok(());
    }
    let (first, answers) = exchange(s, reqs)?;
    match batch::first_refusal_but(&answers.acks, first, reqs.len(), fine) {
        Some((i, ack)) => Err(refused(&reqs[i], ack)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
