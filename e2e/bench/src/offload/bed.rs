//! The offload bench's clusters with Liqo set up (unless only the vanilla side runs), and what
//! runs on them: the ladder (the offloaded Deployment scaled 0 → 100 → N, Liqo's processes
//! sampled at each level) and the timed runs of both sides.

use std::time::{Duration, Instant};

use kube::Client;

use super::{
    options::{OFFLOADED, OffloadOptions, VANILLA},
    report::{Level, Phase, ProcUsage, Side},
    requests, restart, settle,
    setup::{self, Procs, Setup},
    track, workload,
};
use e2e::{
    k8s::{Binaries, Clusters},
    liqo,
};

use crate::{BenchError, measure::LoadTracker, run};

/// Liqo on the clusters, rome peered with milan and the namespace offloaded.
pub(crate) struct WithLiqo {
    pub(crate) installed: liqo::Liqo,
    pub(crate) remote_ns: String,
    pub(crate) procs: Procs,
}

/// How long the setup took.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SetupSecs {
    pub(crate) install: f64,
    pub(crate) peering: f64,
    pub(crate) offload: f64,
    pub(crate) virtual_node_pods: Option<u64>,
}

/// Where a side's Deployment runs: its cluster and namespace, the provider's namespace of its
/// pods (offloaded), and Liqo's processes (when installed).
struct Place<'a> {
    client: &'a Client,
    ns: &'a str,
    remote: Option<(&'a Client, &'a str)>,
    procs: Option<&'a Procs>,
}

/// The clusters and what every run shares.
pub(super) struct Bed {
    /// Held so that the clusters live as long as the bed (dropping it stops them).
    set: Clusters,
    rome: Client,
    milan: Client,
    pub(super) liqo: Option<WithLiqo>,
    timeout: Duration,
}

async fn client(set: &Clusters, name: &str) -> Result<Client, BenchError> {
    let c = set
        .get(name)
        .ok_or_else(|| BenchError::Options(format!("no cluster {name}")))?;
    c.client()
        .await
        .map_err(|e| BenchError::step(format!("a client of {name}"), &e))
}

impl Bed {
    /// Installs Liqo (milan shares 100 %, virtual kubelets as processes), peers rome with
    /// milan and offloads [`OFFLOADED`] with `Remote`, unless `opts.vanilla_only`; creates
    /// [`VANILLA`] on milan.
    pub(super) async fn new(
        set: Clusters,
        bins: &Binaries,
        opts: &OffloadOptions,
    ) -> Result<(Bed, SetupSecs), BenchError> {
        let timeout = Duration::from_secs(opts.timeout_secs);
        let (rome, milan) = (client(&set, "rome").await?, client(&set, "milan").await?);
        let mut secs = SetupSecs::default();
        let liqo = if opts.vanilla_only {
            None
        } else {
            let (l, s) = with_liqo(
                &set,
                bins,
                &rome,
                opts.pods,
                opts.vk_workers,
                false,
                timeout,
            )
            .await?;
            secs = s;
            Some(l)
        };
        workload::create_namespace(&milan, VANILLA).await?;
        workload::service_account(&milan, VANILLA, timeout).await?;
        Ok((
            Bed {
                set,
                rome,
                milan,
                liqo,
                timeout,
            },
            secs,
        ))
    }

    /// rome's client (for the apiserver's version).
    pub(super) fn rome(&self) -> &Client {
        &self.rome
    }

    /// Where `side`'s Deployment runs.
    fn place(&self, side: Side) -> Result<Place<'_>, BenchError> {
        let liqo = self.liqo.as_ref();
        match side {
            Side::Vanilla => Ok(Place {
                client: &self.milan,
                ns: VANILLA,
                remote: None,
                procs: liqo.map(|l| &l.procs),
            }),
            Side::Liqo => {
                let l = liqo.ok_or_else(|| {
                    BenchError::Options("the Liqo side needs Liqo (not --vanilla-only)".into())
                })?;
                Ok(Place {
                    client: &self.rome,
                    ns: OFFLOADED,
                    remote: Some((&self.milan, l.remote_ns.as_str())),
                    procs: Some(&l.procs),
                })
            }
        }
    }

    /// The ladder (with Liqo), the timed runs of each side (alternating which goes first),
    /// and Liqo's processes once more after them; the levels, the runs and the background
    /// load seen.
    pub(super) async fn measure(
        &self,
        opts: &OffloadOptions,
    ) -> Result<(Vec<Phase>, Vec<Level>, LoadTracker), BenchError> {
        let mut levels = match &self.liqo {
            Some(_) => self.ladder(&opts.ladder()).await?,
            None => Vec::new(),
        };
        let sides: &[Side] = if self.liqo.is_some() {
            &[Side::Vanilla, Side::Liqo]
        } else {
            &[Side::Vanilla]
        };
        let mut load = LoadTracker::default();
        let mut phases = Vec::new();
        let mut progress = run::Progress::new(sides.len() * opts.repeats as usize);
        for repeat in 1..=opts.repeats {
            let mut order = sides.to_vec();
            if repeat % 2 == 0 {
                order.reverse();
            }
            for side in order {
                // The last Liqo run ends with the virtual kubelet killed and started again.
                let restart = side == Side::Liqo && repeat == opts.repeats && opts.restart_vk;
                let p = self
                    .timed(side, repeat, opts.pods, restart, &mut load)
                    .await?;
                eprintln!(
                    "{} {} run {repeat}: {:.2} s to {} Running, scheduled->Ready p50 {:.0} ms \
                     p99 {:.0} ms",
                    progress.step(),
                    side.label(),
                    p.secs,
                    p.pods,
                    p.scheduled_to_ready.map_or(0.0, |l| l.p50_ms),
                    p.scheduled_to_ready.map_or(0.0, |l| l.p99_ms),
                );
                phases.push(p);
            }
        }
        if let Some(l) = &self.liqo {
            // Sampled at rest, as the idle level was: once the deletions' work is done.
            let settled = settle::settle(&l.procs).await?;
            eprintln!(
                "bench: Liqo's processes sampled {:.0} s after the last run ({})",
                settled.secs,
                if settled.quiet { "quiet" } else { "NOT quiet" }
            );
            levels.push(Level {
                pods: 0,
                secs: settled.secs,
                after_timed: true,
                quiet: settled.quiet,
                processes: l.procs.usage()?,
            });
        }
        Ok((phases, levels, load))
    }

    /// The offloaded Deployment scaled through `counts`, the processes sampled at each.
    async fn ladder(&self, counts: &[u32]) -> Result<Vec<Level>, BenchError> {
        let Place {
            client,
            ns,
            remote,
            procs,
        } = self.place(Side::Liqo)?;
        let procs = procs.ok_or_else(|| BenchError::Options("no Liqo processes".into()))?;
        let mut watch = workload::PodWatch::open(client, ns).await?;
        workload::create(client, ns, 0).await?;
        let mut levels = Vec::new();
        for &n in counts {
            let secs = if n == 0 {
                0.0
            } else {
                setup::virtual_node_pods(client, u64::from(n), self.timeout).await?;
                watch.restart_clock();
                workload::scale(client, ns, n).await?;
                watch.until_running(n as usize, self.timeout).await?
            };
            let processes = procs.usage()?;
            eprintln!(
                "bench: ladder at {n} pods ({secs:.1} s): {}",
                usage_line(&processes)
            );
            levels.push(Level {
                pods: n,
                secs,
                after_timed: false,
                quiet: false,
                processes,
            });
        }
        workload::clear(client, ns, remote, self.timeout).await?;
        Ok(levels)
    }

    /// One timed run of `side`; every pod is deleted afterwards.
    async fn timed(
        &self,
        side: Side,
        repeat: u32,
        pods: u32,
        restart: bool,
        load: &mut LoadTracker,
    ) -> Result<Phase, BenchError> {
        let Place {
            client,
            ns,
            remote,
            procs,
        } = self.place(side)?;
        if side == Side::Liqo {
            // milan's offer counts its free pods: after a vanilla run it takes a moment to grow.
            setup::virtual_node_pods(client, u64::from(pods), self.timeout).await?;
        }
        let background_load_pct = load.quiet().await?;
        let mut watch = workload::PodWatch::open(client, ns).await?;
        // The offloaded pods on milan, watched at the same time on the same clock.
        let mut remote_watch = match remote {
            Some((c, rns)) => Some(workload::PodWatch::open_all(c, rns).await?),
            None => None,
        };
        let audit = self.audit_logs();
        let before = requests::Mark::now(&audit).await?;
        let mut cpu0 = procs.map(Procs::cpu).transpose()?.unwrap_or_default();
        cpu0.extend(setup::harness_cpu(&self.set)?);
        let t0 = Instant::now();
        watch.restart_clock_at(t0);
        if let Some(r) = remote_watch.as_mut() {
            r.restart_clock_at(t0);
        }
        workload::create(client, ns, pods).await?;
        let n = pods as usize;
        let (secs, _) = tokio::try_join!(watch.until_running(n, self.timeout), async {
            match remote_watch.as_mut() {
                Some(r) => r.until_running(n, self.timeout).await.map(Some),
                None => Ok(None),
            }
        })?;
        let mut cpu1 = procs.map(Procs::cpu).transpose()?.unwrap_or_default();
        cpu1.extend(setup::harness_cpu(&self.set)?);
        let t = watch.tracker();
        let breakdown = remote_watch
            .as_ref()
            .map(|r| track::breakdown(t, r.tracker()));
        let phase = Phase {
            side,
            repeat,
            pods,
            secs,
            created_to_running: t.created_to_running(),
            scheduled_to_ready: t.scheduled_to_ready(),
            breakdown,
            cpu: setup::cpu_delta(&cpu0, &cpu1),
            background_load_pct,
            requests: Vec::new(),
            restart: None,
        };
        let restart = match (restart, remote, procs) {
            (true, Some((milan, remote_ns)), Some(procs)) => {
                eprintln!("bench: killing the virtual kubelet with {pods} pods Running");
                let r = restart::measure(&restart::Inputs {
                    rome: client,
                    ns,
                    milan,
                    remote_ns,
                    procs,
                    audit: &audit,
                    pods,
                    timeout: self.timeout,
                })
                .await?;
                eprintln!(
                    "bench: virtual kubelet again in {:.1} s, its Lease renewed after {:.1} s, \
                     quiet after {:.1} s; {} pod writes; {} Running, {} ShadowPods, {} remote pods",
                    r.secs_to_process,
                    r.secs_to_lease,
                    r.secs_to_quiet,
                    r.pod_writes,
                    r.home_running,
                    r.shadow_pods,
                    r.remote_pods
                );
                Some(r)
            }
            _ => None,
        };
        let phase = Phase { restart, ..phase };
        workload::clear(client, ns, remote, self.timeout).await?;
        // Every request from the create until every pod is gone on both sides.
        let after = requests::Mark::now(&audit).await?;
        let requests = before.until(&after)?.per_client(pods);
        Ok(Phase { requests, ..phase })
    }

    /// Each cluster's audit log.
    fn audit_logs(&self) -> Vec<(String, std::path::PathBuf)> {
        self.set
            .clusters
            .iter()
            .map(|c| (c.name.clone(), c.audit_log()))
            .collect()
    }

    /// The last lines of both controller-managers' logs (they go with the clusters).
    pub(super) fn log_tails(&self) -> String {
        let mut out = String::new();
        let Some(l) = &self.liqo else {
            return out;
        };
        for i in &l.installed.clusters {
            if let Some(r) = i.get("liqo-controller-manager") {
                let text = std::fs::read_to_string(&r.proc.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                out.push_str(&format!(
                    "--- liqo-controller-manager of {} ({}):\n",
                    i.cluster, r.proc.log
                ));
                for l in &lines[lines.len().saturating_sub(10)..] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// Liqo installed, peered and the namespace offloaded; the setup's times.
pub(crate) async fn with_liqo(
    set: &Clusters,
    bins: &Binaries,
    rome: &Client,
    pods: u32,
    vk_workers: Option<usize>,
    vk_ipam: bool,
    timeout: Duration,
) -> Result<(WithLiqo, SetupSecs), BenchError> {
    let t = Instant::now();
    let mut lopts = liqo::Options {
        virtual_kubelet: liqo::VkMode::Process,
        vk_pod_workers: vk_workers,
        vk_ipam,
        ..liqo::Options::default()
    };
    lopts.sharing_percentage.insert("milan".into(), 100);
    let installed = liqo::install(set, bins, &lopts)
        .await
        .map_err(|e| BenchError::step("installing Liqo", &e))?;
    let install = t.elapsed().as_secs_f64();
    let manager = |name: &str| {
        installed
            .get(name)
            .and_then(|i| i.get("liqo-controller-manager"))
            .map(|r| r.proc.pid)
            .ok_or_else(|| BenchError::Options(format!("no liqo-controller-manager on {name}")))
    };
    let procs = Procs::new(manager("rome")?, manager("milan")?);
    eprintln!("bench: Liqo installed in {install:.1} s");
    let rome_kubeconfig = set
        .get("rome")
        .map(|c| c.kubeconfig.clone())
        .unwrap_or_default();
    let s = Setup {
        liqoctl: installed.bin.join("liqoctl"),
        kubeconfig: &set.kubeconfig,
        rome_kubeconfig: &rome_kubeconfig,
        timeout,
    };
    let t = Instant::now();
    s.peer().await?;
    let vnode_pods = setup::virtual_node_pods(rome, u64::from(pods), timeout).await?;
    let peering = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let remote_ns = s.offload(rome, OFFLOADED).await?;
    let offload = t.elapsed().as_secs_f64();
    workload::service_account(rome, OFFLOADED, timeout).await?;
    eprintln!(
        "bench: peered in {peering:.1} s ({} with {vnode_pods} pods), {OFFLOADED} offloaded \
         to milan's {remote_ns} in {offload:.1} s",
        setup::VIRTUAL_NODE
    );
    Ok((
        WithLiqo {
            installed,
            remote_ns,
            procs,
        },
        SetupSecs {
            install,
            peering,
            offload,
            virtual_node_pods: Some(vnode_pods),
        },
    ))
}

fn usage_line(ps: &[ProcUsage]) -> String {
    ps.iter()
        .map(|p| {
            format!(
                "{} {:.1} MiB, {:.1} CPU s",
                p.process,
                p.rss_mib(),
                p.cpu_secs
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
