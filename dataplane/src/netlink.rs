//! The one module that talks rtnetlink. Everything else builds [`Request`] values.
//!
//! A [`Netlink`] is bound to the namespace its sockets were opened in: [`Netlink::connect_in`]
//! opens them on a thread that entered the namespace, so a single process drives many namespaces
//! without ever moving its own threads.
//!
//! Single requests go through the rtnetlink crate, one round trip each. Whole tables and the
//! rules ([`Netlink::reconcile_table`], [`Netlink::reconcile_rules`]) are read with one dump and
//! changed with one batch: many messages per `sendmsg` on a second socket (`nlsock`),
//! their acknowledgements read in bulk (`tables`).

mod tables;

use std::{
    collections::HashMap,
    io,
    os::fd::{AsFd, AsRawFd},
    sync::{Arc, Mutex},
};

use futures::StreamExt;
use rtnetlink::{
    Handle,
    packet_core::{NetlinkMessage, NetlinkPayload},
    packet_route::RouteNetlinkMessage,
};

use crate::{
    addr::{self, AddressSpec},
    link::{self, LinkInfo, LinkKind, LinkRefs, LinkSpec},
    names::IfName,
    neigh::{self, FdbSpec, NeighbourSpec},
    netns::{self, Netns},
    nlsock::{self, NETLINK_ROUTE},
    request::Request,
    route::{self, RouteSpec},
    rule::{self, RuleSpec},
};

/// What went wrong talking to the kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The netlink socket could not be opened.
    #[error("opening a netlink socket")]
    Connect(#[source] io::Error),
    /// The kernel refused a request.
    #[error("{what}{}", said(message))]
    Request {
        /// The request, described (`add route 10.1.0.0/16 via 10.0.0.2`).
        what: String,
        /// The kernel's explanation, when it gave one (extended acknowledgement).
        message: Option<String>,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Talking to the kernel failed (sending a batch, reading its answers, a dump).
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A link named in the desired state does not exist.
    #[error("no link named {0}")]
    NoSuchLink(IfName),
    /// The namespace could not be entered or opened.
    #[error(transparent)]
    Netns(#[from] netns::Error),
}

/// `: <the kernel's explanation>`, or nothing.
/// ": <the kernel's message>", or nothing.
pub(crate) fn said(message: &Option<String>) -> String {
    message
        .as_ref()
        .map(|m| format!(": {m}"))
        .unwrap_or_default()
}

impl Error {
    /// The OS error number, if the kernel refused the request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Request { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// A connection to rtnetlink in one network namespace.
#[derive(Debug, Clone)]
pub struct Netlink {
    handle: Handle,
    /// The socket of batches and dumps; one exchange at a time.
    batch: Arc<Mutex<nlsock::Socket>>,
}

impl Netlink {
    /// Connects in the calling thread's namespace. Must be called inside a tokio runtime.
    pub fn connect() -> Result<Netlink, Error> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(Error::Connect)?;
        let batch = nlsock::Socket::open(NETLINK_ROUTE).map_err(Error::Connect)?;
        tokio::spawn(conn);
        Ok(Netlink {
            handle,
            batch: Arc::new(Mutex::new(batch)),
        })
    }

    /// Connects inside `ns`. Must be called inside a tokio runtime.
    pub fn connect_in(ns: &Netns) -> Result<Netlink, Error> {
        let rt = tokio::runtime::Handle::current();
        let (conn, batch) = ns.run(move || {
            let _guard = rt.enter();
            (
                rtnetlink::new_connection(),
                nlsock::Socket::open(NETLINK_ROUTE),
            )
        })?;
        let (conn, handle, _) = conn.map_err(Error::Connect)?;
        let batch = batch.map_err(Error::Connect)?;
        tokio::spawn(conn);
        Ok(Netlink {
            handle,
            batch: Arc::new(Mutex::new(batch)),
        })
    }

    /// Sends one request and collects the messages of the answer: the one place where single
    /// requests reach the kernel (batches go through the batch socket, `netlink::tables`).
    pub async fn execute(&self, req: Request) -> Result<Vec<RouteNetlinkMessage>, Error> {
        tracing::trace!(what = %req.what, "netlink");
        let mut msg = NetlinkMessage::from(req.message);
        msg.header.flags = req.mode.flags();
        let fail = |source| Error::Request {
            what: req.what.clone(),
            message: None,
            source,
        };
        let mut answer = self
            .handle
            .clone()
            .request(msg)
            .map_err(|e| fail(io::Error::other(e.to_string())))?;
        let mut out = Vec::new();
        while let Some(m) = answer.next().await {
            match m.payload {
                NetlinkPayload::InnerMessage(inner) => out.push(inner),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(fail(io::Error::from_raw_os_error(-code.get())));
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Every link.
    pub async fn links(&self) -> Result<Vec<LinkInfo>, Error> {
        let msgs = self.execute(link::dump()).await?;
        Ok(msgs
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link::parse(l)),
                _ => None,
            })
            .collect())
    }

    /// The link named `name`, if any.
    pub async fn link(&self, name: &IfName) -> Result<Option<LinkInfo>, Error> {
        Ok(self
            .links()
            .await?
            .into_iter()
            .find(|l| l.name == name.as_str()))
    }

    /// Index of the link named `name`.
    pub async fn index(&self, name: &IfName) -> Result<u32, Error> {
        self.link(name)
            .await?
            .map(|l| l.index)
            .ok_or_else(|| Error::NoSuchLink(name.clone()))
    }

    async fn index_of(&self, name: Option<&IfName>) -> Result<Option<u32>, Error> {
        match name {
            Some(n) => Ok(Some(self.index(n).await?)),
            None => Ok(None),
        }
    }

    /// Creates a link.
    pub async fn add_link(&self, spec: &LinkSpec) -> Result<(), Error> {
        let peer_ns = match &spec.kind {
            LinkKind::Veth {
                peer_netns: Some(n),
                ..
            } => Some(Netns::open(n)?),
            _ => None,
        };
        let vxlan_dev = match &spec.kind {
            LinkKind::Vxlan(v) => self.index_of(v.dev.as_ref()).await?,
            _ => None,
        };
        let refs = LinkRefs {
            controller: self.index_of(spec.controller.as_ref()).await?,
            vxlan_dev,
            peer_netns_fd: peer_ns.as_ref().map(|ns| ns.as_fd().as_raw_fd()),
        };
        self.execute(link::add(spec, &refs)).await?;
        drop(peer_ns);
        Ok(())
    }

    /// Sets a link up or down.
    pub async fn set_up(&self, name: &IfName, up: bool) -> Result<(), Error> {
        let index = self.index(name).await?;
        self.execute(link::set_up(index, name, up)).await.map(drop)
    }

    /// Sets a link's MTU.
    pub async fn set_mtu(&self, name: &IfName, mtu: u32) -> Result<(), Error> {
        let index = self.index(name).await?;
        self.execute(link::set_mtu(index, name, mtu))
            .await
            .map(drop)
    }

    /// What identifies the VXLAN device `name` (VNI, port, source, underlay), if it is one.
    pub async fn vxlan_identity(
        &self,
        name: &IfName,
    ) -> Result<Option<crate::link::VxlanIdentity>, Error> {
        Ok(self.link(name).await?.and_then(|l| l.vxlan))
    }

    /// Sets a link's hardware address.
    pub async fn set_mac(&self, name: &IfName, mac: [u8; 6]) -> Result<(), Error> {
        let index = self.index(name).await?;
        self.execute(link::set_mac(index, name, mac))
            .await
            .map(drop)
    }

    /// Moves a link into another namespace.
    pub async fn move_link(&self, name: &IfName, to: &Netns) -> Result<(), Error> {
        let index = self.index(name).await?;
        self.execute(link::set_netns(
            index,
            name,
            to.as_fd().as_raw_fd(),
            to.name(),
        ))
        .await
        .map(drop)
    }

    /// Deletes a link; returns whether it existed.
    pub async fn delete_link(&self, name: &IfName) -> Result<bool, Error> {
        match self.link(name).await? {
            Some(l) => self
                .execute(link::delete(l.index, name))
                .await
                .map(|_| true),
            None => Ok(false),
        }
    }

    /// Adds an address.
    pub async fn add_address(&self, spec: &AddressSpec) -> Result<(), Error> {
        let index = self.index(&spec.link).await?;
        self.execute(addr::add(spec, index)).await.map(drop)
    }

    /// Every address, by link name.
    pub async fn addresses(&self) -> Result<Vec<AddressSpec>, Error> {
        let names = self.names().await?;
        let msgs = self.execute(addr::dump()).await?;
        Ok(msgs
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) => addr::parse(a),
                _ => None,
            })
            .filter_map(|(i, a)| {
                Some(AddressSpec {
                    link: names.get(&i)?.clone(),
                    addr: a,
                })
            })
            .collect())
    }

    async fn names(&self) -> Result<HashMap<u32, IfName>, Error> {
        Ok(self
            .links()
            .await?
            .into_iter()
            .filter_map(|l| Some((l.index, l.name.parse().ok()?)))
            .collect())
    }

    /// Adds a route.
    pub async fn add_route(&self, spec: &RouteSpec) -> Result<(), Error> {
        let dev = self.index_of(spec.dev.as_ref()).await?;
        self.execute(route::add(spec, dev)).await.map(drop)
    }

    /// Adds or replaces a route.
    pub async fn replace_route(&self, spec: &RouteSpec) -> Result<(), Error> {
        let dev = self.index_of(spec.dev.as_ref()).await?;
        self.execute(route::replace(spec, dev)).await.map(drop)
    }

    /// Deletes a route.
    pub async fn delete_route(&self, spec: &RouteSpec) -> Result<(), Error> {
        let dev = self.index_of(spec.dev.as_ref()).await?;
        self.execute(route::delete(spec, dev)).await.map(drop)
    }

    /// Adds a policy-routing rule.
    pub async fn add_rule(&self, spec: &RuleSpec) -> Result<(), Error> {
        self.execute(rule::add(spec)).await.map(drop)
    }

    /// Deletes a policy-routing rule.
    pub async fn delete_rule(&self, spec: &RuleSpec) -> Result<(), Error> {
        self.execute(rule::delete(spec)).await.map(drop)
    }

    /// Sets a permanent neighbour entry.
    pub async fn set_neighbour(&self, spec: &NeighbourSpec) -> Result<(), Error> {
        let index = self.index(&spec.link).await?;
        self.execute(neigh::set(spec, index)).await.map(drop)
    }

    /// Deletes a neighbour entry.
    pub async fn delete_neighbour(&self, spec: &NeighbourSpec) -> Result<(), Error> {
        let index = self.index(&spec.link).await?;
        self.execute(neigh::delete(spec, index)).await.map(drop)
    }

    /// The permanent neighbours of the link `name`.
    pub async fn neighbours(&self, name: &IfName) -> Result<Vec<NeighbourSpec>, Error> {
        let index = self.index(name).await?;
        let msgs = self.execute(neigh::dump()).await?;
        Ok(msgs
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => neigh::parse_permanent(n),
                _ => None,
            })
            .filter(|(i, _, _)| *i == index)
            .map(|(_, ip, mac)| NeighbourSpec {
                link: name.clone(),
                ip,
                mac,
            })
            .collect())
    }

    /// Appends an FDB entry to a VXLAN device.
    pub async fn append_fdb(&self, spec: &FdbSpec) -> Result<(), Error> {
        let index = self.index(&spec.link).await?;
        self.execute(neigh::append_fdb(spec, index)).await.map(drop)
    }

    /// Deletes an FDB entry.
    pub async fn delete_fdb(&self, spec: &FdbSpec) -> Result<(), Error> {
        let index = self.index(&spec.link).await?;
        self.execute(neigh::delete_fdb(spec, index)).await.map(drop)
    }

    /// The FDB entries with a remote destination of the link `name`.
    pub async fn fdb(&self, name: &IfName) -> Result<Vec<FdbSpec>, Error> {
        let index = self.index(name).await?;
        let msgs = self.execute(neigh::dump_fdb()).await?;
        Ok(msgs
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => neigh::parse_fdb(n),
                _ => None,
            })
            .filter(|(i, _, _)| *i == index)
            .map(|(_, mac, dst)| FdbSpec {
                link: name.clone(),
                mac,
                dst,
            })
            .collect())
    }
}
