//! A TCP relay from a node's network namespace to the root namespace: what lets processes in a
//! lab node (the operators, as host-network pods would be) reach the harness's API server and
//! the cluster's IPAM service, which listen on the root namespace's loopback.
//!
//! The relay process runs in the root namespace; each listener is bound inside the node's
//! namespace (a socket keeps the namespace it was made in) and every accepted connection is
//! dialled from the root namespace. It is started detached with the lab directory in its
//! command line, so `liqo-lab down` finds it even after a crash.

use std::{
    net::{SocketAddr, TcpListener},
    path::Path,
    str::FromStr,
};

use dataplane::{
    Netns, NetnsName,
    supervisor::{Proc, Spec},
};

use super::K8sLabError;
use crate::topology::{Cluster, Node};

/// Where the API server is reached inside every lab node (the TLS name 127.0.0.1 of the
/// harness's serving certificate holds there too).
pub const API_LISTEN: &str = "127.0.0.1:6443";
/// Where the cluster's IPAM service is reached inside every lab node.
pub const IPAM_LISTEN: &str = "127.0.0.1:6000";

/// The node the cluster's API server is published at (`--advertise-address`: its LAN
/// address, which its relay forwards to the API server): the last one, so that a peer reaching
/// the home API server crosses the cluster's LAN from the gateway while the gateway stays on
/// the first node (one node, or the gateway moved there: it is reached on the gateway's node).
pub fn api_node(c: &Cluster) -> &Node {
    c.nodes.last().expect("a lab cluster has nodes")
}

/// What the relay of node `n` of `c` forwards: the API server ([`API_LISTEN`]) and the IPAM
/// ([`IPAM_LISTEN`]) inside the node, given their addresses on the host's loopback; on the
/// [`api_node`] also its LAN address at the API server's port (where `default/kubernetes`
/// says the API server is: what peers reach through their tunnel, the gateway translating an
/// external-CIDR address to it).
pub fn forwards(c: &Cluster, n: &Node, api: SocketAddr, ipam: Option<SocketAddr>) -> Vec<Forward> {
    let mut out = vec![Forward {
        listen: API_LISTEN.parse().expect("literal"),
        connect: api,
    }];
    out.extend(ipam.map(|connect| Forward {
        listen: IPAM_LISTEN.parse().expect("literal"),
        connect,
    }));
    if n.name == api_node(c).name {
        out.push(Forward {
            listen: SocketAddr::new(n.lan_addr.addr().into(), api.port()),
            connect: api,
        });
    }
    out
}

/// One forwarded port: `listen` inside the node, `connect` in the root namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    /// The address bound inside the node's namespace.
    pub listen: SocketAddr,
    /// The address dialled from the root namespace.
    pub connect: SocketAddr,
}

/// A `--forward` that is not `<listen>=<connect>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid forward {0:?}: expected <listen addr:port>=<connect addr:port>")]
pub struct BadForward(pub String);

impl FromStr for Forward {
    type Err = BadForward;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadForward(s.to_owned());
        let (l, c) = s.split_once('=').ok_or_else(bad)?;
        Ok(Forward {
            listen: l.parse().map_err(|_| bad())?,
            connect: c.parse().map_err(|_| bad())?,
        })
    }
}

impl std::fmt::Display for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.listen, self.connect)
    }
}

/// Binds every listener inside `netns`, then relays until killed (the `liqo-lab relay`
/// process); with `egress`, also serves the API server's egress proxy on that socket
/// ([`super::egress`]).
pub fn serve(
    netns: &NetnsName,
    forwards: &[Forward],
    egress: Option<&Path>,
) -> Result<(), K8sLabError> {
    let ns = Netns::open(netns).map_err(|e| K8sLabError::lab(format!("opening {netns}"), e))?;
    let mut bound = Vec::new();
    for f in forwards {
        let l = ns
            .run(|| {
                let l = TcpListener::bind(f.listen)?;
                l.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(l)
            })
            .map_err(|e| K8sLabError::lab(format!("entering {netns}"), e))?
            .map_err(|e| K8sLabError::lab(format!("binding {} in {netns}", f.listen), e))?;
        bound.push((l, f.connect));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| K8sLabError::lab("starting a runtime", e))?;
    rt.block_on(async move {
        let mut tasks = Vec::new();
        for (l, to) in bound {
            let l = tokio::net::TcpListener::from_std(l)
                .map_err(|e| K8sLabError::lab("registering a listener", e))?;
            tasks.push(tokio::spawn(accept(l, to)));
        }
        if let Some(socket) = egress {
            let ns =
                Netns::open(netns).map_err(|e| K8sLabError::lab(format!("opening {netns}"), e))?;
            let socket = socket.to_owned();
            tasks.push(tokio::spawn(async move {
                if let Err(e) = super::egress::serve(&socket, ns).await {
                    // The API server then cannot reach the kubelets: end the relay loudly.
                    panic!("the egress proxy: {}", liqo_types::chain(&e));
                }
            }));
        }
        for t in tasks {
            // An accept loop only ends by a panic; the process then exits and is restarted
            // by whoever supervises it.
            if let Err(e) = t.await {
                return Err(K8sLabError::lab("a relay task", e));
            }
        }
        Ok(())
    })
}

async fn accept(l: tokio::net::TcpListener, to: SocketAddr) {
    loop {
        let (mut inbound, from) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accepting");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        tokio::spawn(async move {
            let mut outbound = match tokio::net::TcpStream::connect(to).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(%from, %to, error = %e, "dialling");
                    return;
                }
            };
            // Latency matters more than throughput for API calls.
            for s in [&inbound, &outbound] {
                if let Err(e) = s.set_nodelay(true) {
                    tracing::debug!(error = %e, "TCP_NODELAY");
                }
            }
            if let Err(e) = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await {
                tracing::debug!(%from, %to, error = %e, "a relayed connection ended");
            }
        });
    }
}

/// Starts `liqo-lab relay` for node namespace `netns` (detached; `tag` is a path under the lab
/// directory, so teardown finds the process by its command line).
pub(crate) fn spawn(
    netns: &NetnsName,
    forwards: &[Forward],
    egress: Option<&Path>,
    tag: &Path,
    log: &Path,
) -> Result<Proc, K8sLabError> {
    let program = crate::lab::bin("liqo-lab")
        .map_err(|e| K8sLabError::lab("finding liqo-lab for the relay", e))?;
    let mut spec = Spec::new("liqo-lab", program, log)
        .args(["relay", "--netns", netns.as_str(), "--tag"])
        .args([tag]);
    for f in forwards {
        spec = spec.args(["--forward".to_owned(), f.to_string()]);
    }
    if let Some(socket) = egress {
        spec = spec.args(["--egress-socket"]).args([socket]);
    }
    spec.detached()
        .map_err(|e| K8sLabError::lab(format!("starting the relay of {netns}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_parse_and_bad_ones_are_named() {
        let f: Forward = "127.0.0.1:6443=127.0.0.1:34567".parse().unwrap();
        assert_eq!(f.listen.port(), 6443);
        assert_eq!(f.connect.port(), 34567);
        assert_eq!(f.to_string(), "127.0.0.1:6443=127.0.0.1:34567");
        for bad in ["127.0.0.1:6443", "a=b", "127.0.0.1:1=", "=127.0.0.1:1"] {
            let e = bad.parse::<Forward>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
