//! The API server's way into a lab with real nodes: an HTTP CONNECT proxy on a Unix socket (mode
//! 0600, in the lab's directory) that the API server's egress selection sends what it dials in
//! the cluster to (kubelets for logs, exec and port-forward; pods and Services), dialled from
//! inside a node's network namespace, where the lab's LAN and pods are. The root namespace
//! cannot reach them. It runs in the node's relay process ([`super::relay`]).
//!
//! Only `CONNECT <IPv4>:<port>` is served (the API server dials kubelets at their InternalIP); a
//! loopback target is dialled from the root namespace (a virtual kubelet runs as a host process);
//! anything else is answered 400 naming what was asked, and a refused dial 502 with the error.

use std::{
    net::{SocketAddr, SocketAddrV4},
    os::unix::fs::PermissionsExt,
    path::Path,
    time::Duration,
};

use dataplane::Netns;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::K8sLabError;

/// What the log says of a refused dial ([`super::diagnose`] looks for it).
pub const DIAL_FAILED: &str = "an egress dial failed";
/// The longest request head read.
const MAX_HEAD: usize = 8 << 10;
/// How long a dial may take.
const DIAL: Duration = Duration::from_secs(5);

/// Why a request was refused (its text goes back to the API server).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not `CONNECT host:port HTTP/1.x`.
    #[error("not an HTTP CONNECT request: {0:?}")]
    NotConnect(String),
    /// The target is no `IPv4:port`.
    #[error(
        "CONNECT target {0:?} is no IPv4 address and port (kubelets are dialled at their InternalIP)"
    )]
    Target(String),
}

/// The target of a CONNECT request head (up to the blank line).
pub fn target(head: &str) -> Result<SocketAddrV4, Refused> {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    match (method, target, version) {
        (Some("CONNECT"), Some(t), Some(v))
            if v.starts_with("HTTP/1.") && parts.next().is_none() =>
        {
            t.parse::<SocketAddrV4>()
                .map_err(|_| Refused::Target(t.to_owned()))
        }
        _ => Err(Refused::NotConnect(line.chars().take(200).collect())),
    }
}

/// Where a target is dialled from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// The root namespace: a loopback address is a program of the host (a virtual kubelet
    /// run as a process, whose node's InternalIP is 127.0.0.1).
    Root,
    /// Inside the node: the lab's LAN and pods.
    Node,
}

/// Where `to` is dialled from.
pub fn dial_from(to: &SocketAddrV4) -> From {
    if to.ip().is_loopback() {
        From::Root
    } else {
        From::Node
    }
}

/// Serves the proxy on `socket` (replaced if it exists), dialling from inside `ns`.
pub async fn serve(socket: &Path, ns: Netns) -> Result<(), K8sLabError> {
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(K8sLabError::lab(
                format!("removing {}", socket.display()),
                e,
            ));
        }
    }
    // Bound under a name no client uses, made 0600, then renamed: never reachable with the
    // umask's mode.
    let staged = socket.with_extension("staged");
    match std::fs::remove_file(&staged) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(K8sLabError::lab(
                format!("removing {}", staged.display()),
                e,
            ));
        }
    }
    let l = tokio::net::UnixListener::bind(&staged)
        .map_err(|e| K8sLabError::lab(format!("binding {}", staged.display()), e))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| K8sLabError::lab(format!("chmod 0600 {}", staged.display()), e))?;
    std::fs::rename(&staged, socket)
        .map_err(|e| K8sLabError::lab(format!("renaming to {}", socket.display()), e))?;
    let ns = std::sync::Arc::new(ns);
    loop {
        let (conn, _) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accepting on the egress socket");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ns = ns.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(conn, &ns).await {
                tracing::debug!(error = %e, "an egress connection ended");
            }
        });
    }
}

async fn handle(mut conn: tokio::net::UnixStream, ns: &Netns) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let to = match target(&text) {
        Ok(t) => t,
        Err(e) => {
            conn.write_all(format!("HTTP/1.1 400 Bad Request\r\n\r\n{e}").as_bytes())
                .await?;
            return Ok(());
        }
    };
    // A socket keeps the namespace it was made in.
    let socket = match dial_from(&to) {
        From::Root => tokio::net::TcpSocket::new_v4()?,
        From::Node => ns
            .run(tokio::net::TcpSocket::new_v4)
            .map_err(std::io::Error::other)??,
    };
    let dialled = tokio::time::timeout(DIAL, socket.connect(SocketAddr::V4(to))).await;
    let mut out = match dialled {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refuse(&mut conn, &to, &e.to_string()).await,
        Err(_) => return refuse(&mut conn, &to, "no answer within 5 s").await,
    };
    conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    if let Err(e) = out.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY");
    }
    tokio::io::copy_bidirectional(&mut conn, &mut out).await?;
    Ok(())
}

async fn refuse(
    conn: &mut tokio::net::UnixStream,
    to: &SocketAddrV4,
    why: &str,
) -> std::io::Result<()> {
    tracing::warn!(%to, why, "{DIAL_FAILED}");
    conn.write_all(format!("HTTP/1.1 502 Bad Gateway\r\n\r\ndialling {to}: {why}").as_bytes())
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connect_to_an_address_and_port_is_served() {
        let ok = target("CONNECT 172.18.0.2:10250 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(ok.to_string(), "172.18.0.2:10250");
        assert_eq!(
            target("CONNECT n1:10250 HTTP/1.1\r\n\r\n"),
            Err(Refused::Target("n1:10250".into()))
        );
        for bad in [
            "GET / HTTP/1.1",
            "CONNECT 1.2.3.4:5",
            "CONNECT 1.2.3.4:5 HTTP/2 x",
            "",
        ] {
            let e = target(bad).unwrap_err();
            assert!(matches!(e, Refused::NotConnect(_)), "{bad}: {e}");
        }
        assert!(
            target("CONNECT n1:1 HTTP/1.1")
                .unwrap_err()
                .to_string()
                .contains("\"n1:1\"")
        );
        assert_eq!(dial_from(&"127.0.0.1:34429".parse().unwrap()), From::Root);
        assert_eq!(dial_from(&"172.18.0.2:10250".parse().unwrap()), From::Node);
    }
}
