//! Rotating a lab cluster's gateway key while traffic flows (`liqo-lab rotate-key`): a ping
//! loop (the real `ping`, every 50 ms) and a TCP loop ([`crate::lab::outage::Prober`]) run from
//! a pod of one cluster to a pod of the rotating one; the rotation is asked for as an operator
//! would (`liqoctl rotate-key`, or the key Secret deleted); the report gives the longest
//! interruption of each loop, the keys before and after, and what the gateway's `/status` says.

use std::{
    io::Read as _,
    net::Ipv4Addr,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use control::consts::net;
use dataplane::Netns;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::DeleteParams};

use super::{K8sLab, K8sLabError, views};
use crate::{
    lab::{
        cluster::gateway_node,
        daemons,
        outage::{Outage, Prober, pair_across_views},
    },
    liqo::NAMESPACE,
};

/// How the rotation is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `liqoctl --context <cluster> rotate-key`.
    Liqoctl,
    /// The private key Secret deleted (the operator makes a new key).
    DeleteSecret,
}

/// What a rotation did to the traffic.
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The probed path (`rome/n1-p0 -> milan/n1-p0 at 10.201.1.2`).
    pub path: String,
    /// The gateway's public key before.
    pub old_key: String,
    /// After (its `/status`).
    pub new_key: String,
    /// The published public key (`wireguard-pubkey`) after.
    pub published: String,
    /// The TCP loop.
    pub tcp: Outage,
    /// The ping loop: replies, requests, the longest time without a reply.
    pub ping: (u32, u32, Duration),
    /// From the trigger until the gateway's `/status` showed the new key.
    pub switched_after: Duration,
    /// What `liqoctl rotate-key` printed (with [`Trigger::Liqoctl`]).
    pub liqoctl: Option<String>,
}

impl Rotation {
    /// The longest interruption either loop saw.
    pub fn worst(&self) -> Duration {
        self.tcp.longest_gap.max(self.ping.2)
    }

    /// The report for people.
    pub fn render(&self) -> String {
        format!(
            "probed {}\ngateway key {} -> {} (switched {:.2} s after the request; published {})\n\
             TCP: {} of {} probes answered, longest interruption {:.2} s{}\n\
             ping: {} of {} answered, longest interruption {:.2} s\n",
            self.path,
            self.old_key,
            self.new_key,
            self.switched_after.as_secs_f64(),
            self.published,
            self.tcp.answered,
            self.tcp.probes,
            self.tcp.longest_gap.as_secs_f64(),
            if self.tcp.up_at_end {
                ""
            } else {
                "; NOT RESTORED"
            },
            self.ping.0,
            self.ping.1,
            self.ping.2.as_secs_f64(),
        )
    }
}

/// `ping -D -i 0.05` from a namespace: stopped with SIGINT, its replies read.
struct Pinger(Child);

impl Pinger {
    fn start(ns: &Netns, addr: Ipv4Addr) -> Result<Pinger, K8sLabError> {
        let child = ns
            .command("ping")
            .args(["-D", "-n", "-i", "0.05", "-W", "1", &addr.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| K8sLabError::lab("starting ping", e))?;
        Ok(Pinger(child))
    }

    /// Stops it; (replies, requests, longest time without a reply from the first to the last).
    fn finish(mut self) -> Result<(u32, u32, Duration), K8sLabError> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0.id()).unwrap_or(i32::MAX));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)
            .map_err(|e| K8sLabError::lab("stopping ping", e))?;
        let mut out = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            o.read_to_string(&mut out)
                .map_err(|e| K8sLabError::lab("reading ping", e))?;
        }
        self.0
            .wait()
            .map_err(|e| K8sLabError::lab("waiting for ping", e))?;
        Ok(ping_gaps(&out))
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        // Already gone after `finish`; otherwise it must not outlive the measure. Nothing to do
        // about a failure in a destructor.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// From `ping -D` output: replies, requests (the summary's transmitted), and the longest time
/// between two consecutive replies.
fn ping_gaps(out: &str) -> (u32, u32, Duration) {
    let mut times = Vec::new();
    for line in out.lines() {
        if !line.contains("bytes from") {
            continue;
        }
        let t = line
            .strip_prefix('[')
            .and_then(|l| l.split_once(']'))
            .and_then(|(t, _)| t.parse::<f64>().ok());
        if let Some(t) = t {
            times.push(t);
        }
    }
    let sent = out
        .lines()
        .find_map(|l| l.split_once(" packets transmitted"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0);
    let longest = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(0.0_f64, f64::max);
    let replies = u32::try_from(times.len()).unwrap_or(u32::MAX);
    (replies, sent, Duration::from_secs_f64(longest.max(0.0)))
}

impl K8sLab {
    /// Rotates the gateway key of `cluster` while `from` probes it (ping and TCP), asked for
    /// by `trigger`; waits until the gateway runs a new key and a TCP probe sent after the
    /// switch is answered (each at most `within` after the request), then `settle` more.
    pub async fn rotate_key(
        &self,
        cluster: &str,
        from: &str,
        trigger: Trigger,
        settle: Duration,
        within: Duration,
    ) -> Result<Rotation, K8sLabError> {
        let c = self
            .lab
            .topology
            .cluster(cluster)
            .ok_or_else(|| K8sLabError::lab(format!("cluster {cluster}"), "not in the lab"))?;
        let gw = self.lab.node(c, &gateway_node(&self.lab, c)?)?;
        let old_key = daemons::gateway_status(&gw)?.public_key;
        let views: Vec<_> = views::peerings(self)
            .await?
            .into_iter()
            .filter(|(c, p, _)| c == from && p == cluster)
            .collect();
        let (src, dst, addr, path) =
            pair_across_views(&self.lab, &views, from, &[])?.ok_or_else(|| {
                K8sLabError::lab(
                    format!("probing {cluster} from {from}"),
                    "they are not peered (no TunnelEndpoint)",
                )
            })?;
        let src_ns =
            Netns::open(&src).map_err(|e| K8sLabError::lab(format!("opening {src}"), e))?;
        let prober = Prober::start(&src, &dst, addr)?;
        let pinger = Pinger::start(&src_ns, addr)?;
        // A second of traffic before the rotation.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t0 = Instant::now();
        let liqoctl = match trigger {
            Trigger::Liqoctl => {
                let mut cmd = tokio::process::Command::from(self.tool_command(
                    "liqoctl",
                    cluster,
                    &["rotate-key", "--timeout", "60s"],
                ));
                cmd.stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                Some(
                    cmd.spawn()
                        .map_err(|e| K8sLabError::lab("running liqoctl rotate-key", e))?,
                )
            }
            Trigger::DeleteSecret => {
                let client = self.client(cluster).await?;
                Api::<Secret>::namespaced(client, NAMESPACE)
                    .delete(net::PRIVATE_KEY_SECRET, &DeleteParams::default())
                    .await
                    .map_err(K8sLabError::kube(format!(
                        "deleting Secret {NAMESPACE}/{} on {cluster}",
                        net::PRIVATE_KEY_SECRET
                    )))?;
                None
            }
        };
        // The gateway runs another key.
        let switched_after = loop {
            let now = daemons::gateway_status(&gw)?.public_key;
            if now != old_key {
                break t0.elapsed();
            }
            if t0.elapsed() > within {
                return Err(K8sLabError::lab(
                    format!("rotating the key of {cluster}"),
                    format!("the gateway still runs {old_key} after {within:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // liqoctl's own wait (the peers connected with the new key), if it ran.
        let liqoctl = match liqoctl {
            Some(child) => {
                let out = child
                    .wait_with_output()
                    .await
                    .map_err(|e| K8sLabError::lab("running liqoctl rotate-key", e))?;
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                if !out.status.success() {
                    return Err(K8sLabError::lab(
                        format!("liqoctl --context {cluster} rotate-key"),
                        format!("exit {:?}: {text}", out.status.code()),
                    ));
                }
                Some(text)
            }
            None => None,
        };
        // Traffic back (a TCP probe sent after the switch answered) before the settle: a
        // rotation that nothing waited for (the Secret deleted) would otherwise be judged on
        // `settle` alone, however long its peers take; a slow return shows as the outage.
        let switched = t0 + switched_after;
        while !prober.up_since(switched) && t0.elapsed() < within {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(settle).await;
        let tcp = prober.finish()?;
        let ping = pinger.finish()?;
        let new_key = daemons::gateway_status(&gw)?.public_key;
        let client = self.client(cluster).await?;
        let published = Api::<Secret>::namespaced(client, NAMESPACE)
            .get(net::PUBLIC_KEY_SECRET)
            .await
            .map_err(K8sLabError::kube(format!(
                "reading Secret {NAMESPACE}/{}",
                net::PUBLIC_KEY_SECRET
            )))?
            .data
            .and_then(|d| d.get(net::PUBLIC_KEY).cloned())
            .map(|b| String::from_utf8_lossy(&b.0).trim().to_owned())
            .unwrap_or_default();
        Ok(Rotation {
            path,
            old_key,
            new_key,
            published,
            tcp,
            ping,
            switched_after,
            liqoctl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_between_replies() {
        let out = "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n\
            [1700000000.000000] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=62 time=0.1 ms\n\
            [1700000000.050000] 64 bytes from 10.0.0.2: icmp_seq=2 ttl=62 time=0.1 ms\n\
            [1700000001.250000] 64 bytes from 10.0.0.2: icmp_seq=26 ttl=62 time=0.1 ms\n\
            \n--- 10.0.0.2 ping statistics ---\n\
            30 packets transmitted, 3 received, 90% packet loss, time 1500ms\n";
        let (replies, sent, gap) = ping_gaps(out);
        assert_eq!((replies, sent), (3, 30));
        assert!((gap.as_secs_f64() - 1.2).abs() < 1e-6, "{gap:?}");
        assert_eq!(ping_gaps(""), (0, 0, Duration::ZERO));
    }
}
