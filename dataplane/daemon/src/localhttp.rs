//! The client side of the daemons' loopback HTTP ([`crate::server`] is the server): a minimal
//! HTTP/1.1 GET for their status endpoints (`/status`, `/metrics`, `/health`), used by their
//! `status` subcommands, the operators, the lab and the tests. Not a general HTTP client.

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// Fetches `path` from `addr` and returns the body; a non-200 answer is an error carrying its
/// status line.
pub fn get(addr: SocketAddr, path: &str) -> io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out
        .split_once("\r\n\r\n")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(io::Error::other(format!(
            "{addr}{path}: {}",
            head.lines().next().unwrap_or_default()
        )));
    }
    Ok(body.to_owned())
}
