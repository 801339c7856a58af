//! Peering lab clusters the way a user does: `liqoctl generate peer-command` on the provider,
//! its output run by bash with the consumer's kubeconfig, `liqoctl unpeer out-of-band`, or
//! `liqoctl peer in-band` on an in-band lab; and
//! how long until the first packet crosses (one TCP probe, repeated, from a pod of one cluster
//! to a pod of the other at the address the TunnelEndpoint gives).

use std::{
    io::Write as _,
    net::Ipv4Addr,
    process::{Command, Output, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use dataplane::Netns;

use super::{K8sLab, K8sLabError, views};
use crate::lab::{check, cluster::pod_cidr};

impl K8sLab {
    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.liqo.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// The command `<tool> --context <context> <args>` (`kubectl` or `liqoctl` of the set's
    /// `bin/`) with the set's kubeconfig.
    pub fn tool_command(&self, tool: &str, context: &str, args: &[&str]) -> Command {
        let mut c = Command::new(self.liqo.bin.join(tool));
        c.arg("--context")
            .arg(context)
            .args(args)
            .env("KUBECONFIG", &self.set.kubeconfig)
            .env("PATH", self.path());
        c
    }

    /// Runs [`K8sLab::tool_command`].
    pub fn tool(&self, tool: &str, context: &str, args: &[&str]) -> Result<Output, K8sLabError> {
        self.tool_command(tool, context, args)
            .output()
            .map_err(|e| K8sLabError::lab(format!("running {tool}"), e))
    }

    /// Runs [`K8sLab::tool`] and requires success: its stdout; on a failure an error naming the
    /// command with its exit status and stderr (never its stdout, which may hold a token).
    pub fn tool_ok(&self, tool: &str, context: &str, args: &[&str]) -> Result<String, K8sLabError> {
        let out = self.tool(tool, context, args)?;
        if !out.status.success() {
            return Err(K8sLabError::lab(
                format!("{tool} {} on {context}", args.join(" ")),
                format!(
                    "exit {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A client of cluster `name`'s API server.
    pub async fn client(&self, name: &str) -> Result<kube::Client, K8sLabError> {
        let c = self
            .set
            .get(name)
            .ok_or_else(|| K8sLabError::lab(format!("cluster {name}"), "not one of the lab's"))?;
        Ok(c.client().await?)
    }

    /// `consumer` peers with `provider` by the command `liqoctl generate peer-command` prints
    /// on the provider, run by bash with the consumer's own kubeconfig; returns how long
    /// `liqoctl peer` took.
    pub fn peer(&self, consumer: &str, provider: &str) -> Result<Duration, K8sLabError> {
        // Its stdout holds the token: a failure reports only the exit status and stderr.
        let command = self.tool_ok(
            "liqoctl",
            provider,
            &["generate", "peer-command", "--only-command"],
        )?;
        let kubeconfig = &self
            .set
            .get(consumer)
            .ok_or_else(|| K8sLabError::lab(format!("cluster {consumer}"), "not in the lab"))?
            .kubeconfig;
        let started = Instant::now();
        let mut bash = Command::new("bash")
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", self.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| K8sLabError::lab("running bash", e))?;
        bash.stdin
            .take()
            .expect("piped")
            .write_all(command.as_bytes())
            .map_err(|e| K8sLabError::lab("writing the peer command to bash", e))?;
        let out = bash
            .wait_with_output()
            .map_err(|e| K8sLabError::lab("running the peer command", e))?;
        if !out.status.success() {
            return Err(K8sLabError::lab(
                format!("liqoctl peer out-of-band {provider} on {consumer}"),
                failed(&out),
            ));
        }
        Ok(started.elapsed())
    }

    /// `liqoctl --context <a> peer in-band --bidirectional --remote-context <b>` with both
    /// IPAM services (the lab's in-band mode, [`super::inband`]); returns how long it took.
    pub fn peer_in_band(&self, a: &str, b: &str) -> Result<Duration, K8sLabError> {
        let ipam = |c: &str| {
            self.liqo
                .get(c)
                .and_then(|i| i.get("liqo-ipam"))
                .and_then(|r| r.listen.as_deref())
                .map(|l| format!("http://{l}"))
                .ok_or_else(|| K8sLabError::lab(format!("the IPAM of {c}"), "not running"))
        };
        let (ia, ib) = (ipam(a)?, ipam(b)?);
        let started = Instant::now();
        let out = self.tool(
            "liqoctl",
            a,
            &[
                "peer",
                "in-band",
                "--bidirectional",
                "--remote-context",
                b,
                "--ipam-address",
                &ia,
                "--remote-ipam-address",
                &ib,
                "--timeout",
                "120s",
            ],
        )?;
        if !out.status.success() {
            return Err(K8sLabError::lab(
                format!("liqoctl peer in-band {b} on {a}"),
                failed(&out),
            ));
        }
        Ok(started.elapsed())
    }

    /// `liqoctl --context <consumer> unpeer out-of-band <provider>`.
    pub fn unpeer(&self, consumer: &str, provider: &str) -> Result<Duration, K8sLabError> {
        let started = Instant::now();
        let out = self.tool(
            "liqoctl",
            consumer,
            &["unpeer", "out-of-band", provider, "--timeout", "120s"],
        )?;
        if !out.status.success() {
            return Err(K8sLabError::lab(
                format!("liqoctl unpeer out-of-band {provider} on {consumer}"),
                failed(&out),
            ));
        }
        Ok(started.elapsed())
    }

    /// What `kubectl get foreignclusters` prints on `cluster`.
    pub fn foreign_clusters(&self, cluster: &str) -> Result<String, K8sLabError> {
        self.tool_ok("kubectl", cluster, &["get", "foreignclusters"])
    }

    /// Waits (up to `secs`) until a pod of `from` reaches a pod of `to` over TCP, each on a
    /// node other than its gateway's where there is one, at the address `from`'s
    /// TunnelEndpoint for `to` gives; returns when it first answered, measured from `since`.
    pub async fn first_cross_probe(
        &self,
        from: &str,
        to: &str,
        since: Instant,
        secs: u64,
    ) -> Result<Duration, K8sLabError> {
        let (cf, ct) = (self.cluster(from)?, self.cluster(to)?);
        let pick = |c: &crate::topology::Cluster| {
            let (_, p) = c
                .pods()
                .filter(|(n, _)| n.name != c.gateway().name)
                .chain(c.pods())
                .next()
                .expect("a lab cluster has pods");
            p.clone()
        };
        let (src, dst) = (pick(cf), pick(ct));
        let ns = Netns::open(&self.lab.pod_netns(from, &src.name))
            .map_err(|e| K8sLabError::lab(format!("opening {from}/{}", src.name), e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let server = check::echo_server(&self.lab.pod_netns(to, &dst.name), Arc::clone(&stop))?;
        let deadline = since + Duration::from_secs(secs);
        let mut last = String::from("no TunnelEndpoint yet");
        let result = loop {
            let view = views::tunnels(self)
                .await?
                .into_iter()
                .find(|t| t.cluster == from && t.peer == to)
                .map(|t| t.view);
            if let Some(v) = view {
                let addr: Ipv4Addr = v.remote_pod(&pod_cidr(ct), dst.addr.addr());
                match ns.run(|| check::tcp_probe_within(addr, Duration::from_millis(300))) {
                    Ok(Ok(_)) => break Ok(since.elapsed()),
                    Ok(Err(e)) => {
                        last = format!("{from}/{} -> {to}/{} at {addr}: {e}", src.name, dst.name)
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() > deadline {
                break Err(K8sLabError::lab(
                    format!("waiting {secs} s for a packet from {from} to {to}"),
                    last,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        stop.store(true, Ordering::Relaxed);
        // The server thread ends at the flag; a panic there changes nothing here.
        let _ = server.join();
        result
    }

    fn cluster(&self, name: &str) -> Result<&crate::topology::Cluster, K8sLabError> {
        self.lab
            .topology
            .cluster(name)
            .ok_or_else(|| K8sLabError::lab(format!("cluster {name}"), "not in the lab"))
    }
}

fn failed(out: &Output) -> String {
    format!(
        "exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
