//! Bringing one variant of the gateway leg up and down: routes only, our gateway, or a
//! WireGuard daemon configured with `wg`.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use dataplane::{Netns, addr::AddressSpec};
use ipnet::{IpNet, Ipv4Net};

use super::{
    BenchError, Profile, TUNNEL_MTU, Variant,
    bed::{self, Bed, Node},
    daemon::{self, Daemon},
    install::Peers,
    keys::{Keys, side},
    names::{cleanup_failed, remove_file},
    options::fail,
};

/// How long a variant may take to pass its first packet.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Where our gateway serves `/status`, inside its gateway's namespace.
pub(crate) const OURS_STATUS: &str = "127.0.0.1:9107";

/// One variant of the leg, up.
pub(crate) struct Leg {
    pub(crate) variant: Variant,
    /// The daemons of side A and B (none for `plain`).
    pub(crate) daemons: Vec<Daemon>,
}

/// Brings `v` up in `profile` and waits until podA reaches podB through it. On failure,
/// whatever was started is taken down again.
pub(crate) async fn up(
    bed: &Bed,
    peers: &Peers,
    keys: &Keys,
    v: Variant,
    profile: Profile,
) -> Result<Leg, BenchError> {
    let mut leg = Leg {
        variant: v,
        daemons: Vec::new(),
    };
    match start(bed, peers, keys, profile, &mut leg).await {
        Ok(()) => Ok(leg),
        Err(e) => {
            down(bed, leg).await;
            Err(e)
        }
    }
}

async fn start(
    bed: &Bed,
    peers: &Peers,
    keys: &Keys,
    profile: Profile,
    leg: &mut Leg,
) -> Result<(), BenchError> {
    let v = leg.variant;
    bed.pod_routes(v.is_tunnel().then_some(TUNNEL_MTU)).await?;
    if v == Variant::Plain {
        bed.add_leg_routes(false).await?;
        return connected(bed, peers, leg).await;
    }
    let program = peers
        .daemon(v)
        .ok_or_else(|| fail(format!("starting {v}"), "its binary was not prepared"))?;
    let run = bed.names.run_dir();
    for side_a in [true, false] {
        let s = side(side_a);
        let ifname = bed.names.wg_if(side_a).to_string();
        let (args, envs): (Vec<String>, Vec<(&str, &str)>) = match v {
            Variant::Ours => (
                vec![
                    "run".into(),
                    "--config".into(),
                    keys.ours_conf(side_a).display().to_string(),
                    "--status-listen".into(),
                    OURS_STATUS.into(),
                ],
                vec![],
            ),
            Variant::Boringtun => (
                vec![
                    "--foreground".into(),
                    "--threads".into(),
                    "1".into(),
                    "--disable-drop-privileges".into(),
                    "-l".into(),
                    run.join(format!("boringtun{s}.trace"))
                        .display()
                        .to_string(),
                    ifname,
                ],
                vec![("WG_SUDO", "1")],
            ),
            _ => (
                vec!["-f".into(), ifname],
                vec![("WG_PROCESS_FOREGROUND", "1"), ("LOG_LEVEL", "error")],
            ),
        };
        let taskset = match (profile.cpu(side_a), &peers.taskset) {
            (Some(cpu), Some(t)) => Some((t.as_path(), cpu)),
            (Some(_), None) => return Err(fail("pinning", "taskset was not found")),
            (None, _) => None,
        };
        let mut d = daemon::spawn(
            format!("{v} on gw{s}"),
            bed.ns(Node::gw(side_a)),
            taskset,
            program,
            &args,
            &envs,
            run.join(format!("{v}-{s}.log")),
        )?;
        if v == Variant::Boringtun {
            d.logs.push(run.join(format!("boringtun{s}.trace")));
        }
        leg.daemons.push(d);
    }
    if v != Variant::Ours {
        configure_wg(bed, peers, keys, leg).await?;
    }
    connected(bed, peers, leg).await
}

/// Waits for the UAPI sockets, then `wg setconf`, addresses, MTU, up and routes.
async fn configure_wg(
    bed: &Bed,
    peers: &Peers,
    keys: &Keys,
    leg: &mut Leg,
) -> Result<(), BenchError> {
    let wg = peers
        .wg
        .as_deref()
        .ok_or_else(|| fail("configuring WireGuard", "wg was not prepared"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    for (i, side_a) in [true, false].into_iter().enumerate() {
        let sock = bed.names.socket(side_a);
        while !sock.exists() {
            daemon::check_alive(&mut leg.daemons[i])?;
            if Instant::now() > deadline {
                return Err(fail(
                    format!(
                        "{} made no UAPI socket {}",
                        leg.daemons[i].label,
                        sock.display()
                    ),
                    leg.daemons[i].log_tail(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for side_a in [true, false] {
        let gw = Node::gw(side_a);
        let ifname = bed.names.wg_if(side_a);
        let out = bed
            .ns(gw)
            .command(wg)
            .arg("setconf")
            .arg(ifname.as_str())
            .arg(keys.wg_conf(side_a))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| fail("running wg setconf", e.to_string()))?;
        if !out.status.success() {
            return Err(fail(
                format!("wg setconf {ifname}"),
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ));
        }
        let ip = if side_a { bed::TUN_A } else { bed::TUN_B };
        let what = format!("configuring {ifname}");
        let nl = bed.nl(gw);
        let err = |e: dataplane::netlink::Error| BenchError::step(&what, &e);
        nl.add_address(&AddressSpec {
            link: ifname.clone(),
            addr: IpNet::V4(Ipv4Net::new(ip, 30).expect("valid length")),
        })
        .await
        .map_err(err)?;
        nl.set_mtu(&ifname, TUNNEL_MTU).await.map_err(err)?;
        nl.set_up(&ifname, true).await.map_err(err)?;
    }
    bed.add_leg_routes(true).await
}

/// One ping from podA to podB.
async fn ping_once(bed: &Bed, ping: &Path) -> bool {
    let cmd: Command = {
        let mut c = bed.ns(Node::PodA).command(ping);
        c.args(["-c", "1", "-W", "1", "-q", &bed::POD_B.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// Waits until podA reaches podB (the handshake is done), while the daemons live.
pub(crate) async fn connected(bed: &Bed, peers: &Peers, leg: &mut Leg) -> Result<(), BenchError> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
        for d in &mut leg.daemons {
            daemon::check_alive(d)?;
        }
        if ping_once(bed, &peers.ping).await {
            return Ok(());
        }
        if Instant::now() > deadline {
            let tails: Vec<String> = leg
                .daemons
                .iter()
                .map(|d| format!("\n  [{}] {}", d.label, d.log_tail()))
                .collect();
            return Err(fail(
                format!(
                    "{}: no traffic from podA to podB after {} s",
                    leg.variant,
                    CONNECT_TIMEOUT.as_secs()
                ),
                tails.concat(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Takes the variant down: stops its daemons and removes what they may have left.
pub(crate) async fn down(bed: &Bed, mut leg: Leg) {
    let grace = if leg.variant == Variant::Ours {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(3)
    };
    let mut clean = true;
    for d in &mut leg.daemons {
        match d.stop(grace) {
            Ok(exit) => clean &= !exit.killed,
            Err(e) => {
                eprintln!("bench: stopping {}: {}", d.label, liqo_types::chain(&e));
                clean = false;
            }
        }
    }
    match leg.variant {
        Variant::Plain => bed.remove_leg_routes(false).await,
        Variant::Ours => {
            if !clean {
                eprintln!("bench: liqo-gateway did not stop on SIGTERM; removing what it left");
            }
            scrub_ours(bed).await;
        }
        _ => {
            for side_a in [true, false] {
                let wg = bed.names.wg_if(side_a);
                // Ok(false): the daemon removed it on its way out.
                if let Err(e) = bed.nl(Node::gw(side_a)).delete_link(&wg).await {
                    cleanup_failed(format_args!("deleting {wg}"), &e);
                }
                remove_file(&bed.names.socket(side_a));
            }
            bed.remove_leg_routes(true).await;
        }
    }
}

/// What our gateway would have removed on SIGTERM (normally nothing is left): its host rules
/// and routes, its veth and its namespace.
async fn scrub_ours(bed: &Bed) {
    use gateway::{
        config::defaults,
        plan::{HOST_RULE_PRIORITY, HOST_TABLE},
    };
    for side_a in [true, false] {
        let nl = bed.nl(Node::gw(side_a));
        if let Err(e) = nl.reconcile_rules(HOST_RULE_PRIORITY, &[]).await {
            cleanup_failed(
                format_args!("emptying the rules at {HOST_RULE_PRIORITY}"),
                &e,
            );
        }
        if let Err(e) = nl.reconcile_table(HOST_TABLE, &[]).await {
            cleanup_failed(format_args!("emptying table {HOST_TABLE}"), &e);
        }
        if let Ok(link) = defaults::HOST_LINK.parse() {
            // Ok(false): the gateway removed it on its way out.
            if let Err(e) = nl.delete_link(&link).await {
                cleanup_failed(format_args!("deleting {link}"), &e);
            }
        }
        let name = bed.names.gateway_netns(side_a);
        if let Err(e) = Netns::purge(&name) {
            cleanup_failed(format_args!("purging namespace {name}"), &e);
        }
    }
}
