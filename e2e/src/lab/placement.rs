//! Where each cluster's gateway runs, and moving it to another node.
//!
//! A cluster's public address belongs to its gateway, not to a node: the lab keeps it on the
//! `wan0` link, which moves with the gateway (like a load balancer's address following the
//! gateway pod). Moving drains the old gateway (SIGTERM: it removes its namespace, rules and
//! routes), moves `wan0`, points every overlay agent at the new node and starts the gateway
//! there with the same key and configuration; peers see a new handshake from the same key.

use std::{
    fs,
    path::PathBuf,
    thread,
    time::{Duration, Instant},
};

use dataplane::{Netlink, Netns, addr::AddressSpec, route::RouteSpec};
use ipnet::IpNet;
use nix::{
    sys::{
        signal::{self, Signal},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};

use super::{Lab, LabError, build, overlay, peering, services, state};
use crate::topology::Cluster;

fn node_file(lab: &Lab, c: &Cluster) -> PathBuf {
    state::cluster_dir(&lab.prefix, c.name.as_str()).join("gateway-node")
}

fn pid_file(lab: &Lab, c: &Cluster) -> PathBuf {
    state::cluster_dir(&lab.prefix, c.name.as_str()).join("gateway.pid")
}

fn bad(what: impl Into<String>, why: impl Into<String>) -> LabError {
    LabError::Build {
        what: what.into(),
        source: why.into().into(),
    }
}

/// The node the gateway of `c` runs on (`nodes[0]` until it is moved).
pub fn gateway_node(lab: &Lab, c: &Cluster) -> Result<String, LabError> {
    match fs::read_to_string(node_file(lab, c)) {
        Ok(s) => Ok(s.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(c.gateway().name.to_string()),
        Err(e) => Err(LabError::Build {
            what: format!("reading {}", node_file(lab, c).display()),
            source: Box::new(e),
        }),
    }
}

/// The namespace of the node the gateway of `c` runs on.
pub fn gateway_netns(lab: &Lab, c: &Cluster) -> Result<Netns, LabError> {
    lab.netns(&format!("{}/{}", c.name, gateway_node(lab, c)?).parse()?)
}

/// Starts the gateway of `c` on `node` and records where it runs.
pub(crate) fn start_gateway(lab: &Lab, c: &Cluster, node: &str) -> Result<(), LabError> {
    let ns = lab.netns(&format!("{}/{node}", c.name).parse()?)?;
    let dir = state::cluster_dir(&lab.prefix, c.name.as_str());
    let cfg = services::gateway_config_path(lab, c.name.as_str());
    let pid = services::spawn_detached(
        &ns,
        &services::bin("liqo-gateway")?,
        &["run".into(), "--config".into(), cfg.display().to_string()],
        &dir.join("gateway.log"),
    )?;
    services::write_atomic(&pid_file(lab, c), &pid.to_string())?;
    services::write_atomic(&node_file(lab, c), node)?;
    services::wait_for(20, "the gateway", || {
        services::run_in(
            &ns,
            &services::bin("liqo-gateway")?,
            &["status", "-o", "json"],
        )
    })
    .map_err(|e| LabError::Build {
        what: format!(
            "starting the gateway of {} on {node} (see {})",
            c.name,
            dir.join("gateway.log").display()
        ),
        source: Box::new(e),
    })
    .map(drop)
}

/// Whether `pid` has exited: reaped now if it is our child; otherwise gone from `/proc` or a
/// zombie waiting for whoever adopted it (the reaper may be slow; the work is done).
fn gone(pid: Pid) -> bool {
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(_) => match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // The state follows the command name in parentheses.
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_none_or(|(_, rest)| rest.starts_with(['Z', 'X'])),
        },
    }
}

/// Stops the gateway of `c` with SIGTERM (it removes what it created) and waits for it.
fn stop_gateway(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let text = fs::read_to_string(pid_file(lab, c)).map_err(|e| LabError::Build {
        what: format!("reading {}", pid_file(lab, c).display()),
        source: Box::new(e),
    })?;
    let raw: i32 = text
        .trim()
        .parse()
        .map_err(|_| bad("reading the gateway pid", format!("{text:?} is not a pid")))?;
    let pid = Pid::from_raw(raw);
    let cmdline = fs::read(format!("/proc/{raw}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("liqo-gateway") {
        return Ok(()); // Already gone (and the pid may have been reused).
    }
    let _ = signal::kill(pid, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        if Instant::now() > deadline {
            let _ = signal::kill(pid, Signal::SIGKILL);
            return Err(bad(
                format!("stopping the gateway of {}", c.name),
                "it did not exit within 10 s of SIGTERM; killed",
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Moves the public link `wan0` (and its address and route) from `from` to `to`.
async fn move_wan(lab: &Lab, c: &Cluster, from: &Netns, to: &Netns) -> Result<(), LabError> {
    let fail = |what: &str| {
        let what = format!("{what} for {}", c.name);
        move |e: dataplane::netlink::Error| LabError::Build {
            what,
            source: Box::new(e),
        }
    };
    let wan0 = "wan0".parse().expect("literal");
    Netlink::connect_in(from)
        .map_err(fail("netlink"))?
        .move_link(&wan0, to)
        .await
        .map_err(fail("moving wan0"))?;
    let nl = Netlink::connect_in(to).map_err(fail("netlink"))?;
    nl.set_up(&wan0, true).await.map_err(fail("wan0 up"))?;
    let addr = if c.behind_nat {
        build::nat_lan_node()
    } else {
        c.wan_addr
    };
    nl.add_address(&AddressSpec {
        link: wan0,
        addr: IpNet::V4(addr),
    })
    .await
    .map_err(fail("wan0 address"))?;
    if c.behind_nat {
        let r = RouteSpec {
            via: Some(build::nat_lan_router().addr().into()),
            ..RouteSpec::to(IpNet::V4(lab.topology.wan_cidr))
        };
        nl.add_route(&r).await.map_err(fail("route to the WAN"))?;
    }
    Ok(())
}

/// Puts the gateway back on `from` after a failed move (best effort: each step is tried, and
/// failures are logged; the caller reports the original error).
async fn rollback(lab: &Lab, c: &Cluster, from: &str, old_ns: &Netns, new_ns: &Netns) {
    let _ = stop_gateway(lab, c);
    let wan_here = match Netlink::connect_in(new_ns) {
        Ok(nl) => nl
            .link(&"wan0".parse().expect("literal"))
            .await
            .is_ok_and(|l| l.is_some()),
        Err(_) => false,
    };
    if wan_here && let Err(e) = move_wan(lab, c, new_ns, old_ns).await {
        tracing::error!(error = %e, "moving wan0 back");
    }
    if let Err(e) = overlay::point_at(lab, c, from) {
        tracing::error!(error = %e, "pointing the overlay back");
    }
    if let Err(e) = start_gateway(lab, c, from) {
        tracing::error!(error = %e, "restarting the gateway on {from}");
    }
}

/// What a gateway move did, with timings.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The node it left.
    pub from: String,
    /// The node it runs on now.
    pub to: String,
    /// Time to drain the old gateway.
    pub stopped: Duration,
    /// Time until the new gateway had a session with every peer and every overlay agent
    /// followed.
    pub ready: Duration,
}

/// Moves the gateway of `cluster` to `node`.
pub async fn move_gateway(lab: &Lab, cluster: &str, node: &str) -> Result<Moved, LabError> {
    let c = peering::cluster(lab, cluster)?;
    if c.node(node).is_none() {
        let known: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        return Err(LabError::BadTarget {
            target: format!("{cluster}/{node}"),
            why: format!("no such node; {cluster} has {}", known.join(", ")),
        });
    }
    let from = gateway_node(lab, c)?;
    if from == node {
        return Err(bad(
            format!("moving the gateway of {cluster} to {node}"),
            "it already runs there",
        ));
    }
    let (old_ns, new_ns) = (
        lab.netns(&format!("{cluster}/{from}").parse()?)?,
        lab.netns(&format!("{cluster}/{node}").parse()?)?,
    );
    let t = Instant::now();
    if let Err(e) = stop_gateway(lab, c) {
        // Killed without its own cleanup: restart it where it was (it adopts what is left).
        let _ = start_gateway(lab, c, &from);
        return Err(e);
    }
    let stopped = t.elapsed();
    let moved = async {
        move_wan(lab, c, &old_ns, &new_ns).await?;
        overlay::point_at(lab, c, node)?;
        start_gateway(lab, c, node)?;
        let peers = services::read_gateway_config(lab, cluster)?.peers;
        for p in &peers {
            services::wait_for(
                10,
                &format!("{cluster}'s gateway to handshake with {}", p.id),
                || peering::handshaken(&new_ns, p.id.as_str()),
            )?;
        }
        overlay::sync(lab, c)
    }
    .await;
    if let Err(e) = moved {
        rollback(lab, c, &from, &old_ns, &new_ns).await;
        return Err(e);
    }
    Ok(Moved {
        from,
        to: node.to_owned(),
        stopped,
        ready: t.elapsed(),
    })
}
