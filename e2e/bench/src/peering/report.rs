//! The results of `liqo-bench peering`: the rounds, their summary (median, min-max, ratio to
//! the apiserver floor) and the notes, on the report core ([`crate::report_core`]). Pure: built from
//! rounds, serialized for `-o json`, rendered by [`mod@super::render`].

use serde::{Deserialize, Serialize};

use crate::report_core::{Header, Spread, ratio};

/// The resident memory of one cluster's liqo-controller-manager after a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// The cluster.
    pub cluster: String,
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM` (the peak resident set so far), KiB.
    pub hwm_kib: u64,
}

/// One round: peer, wait, unpeer, wait, sample the memory, measure the floor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    /// Which round (1-based).
    pub repeat: u32,
    /// Background CPU load when the round started, percent.
    pub background_load_pct: f64,
    /// Seconds from `liqoctl peer` to each event; `auth_secs` is `None` when the
    /// authentication was already Established (kept from an earlier round).
    pub auth_secs: Option<f64>,
    /// ... to rome's `OutgoingPeering=Established`.
    pub outgoing_secs: f64,
    /// ... to milan's `IncomingPeering=Established`.
    pub incoming_secs: f64,
    /// ... to `liqoctl peer` exiting (it waits for the peering itself).
    pub peer_command_secs: f64,
    /// Seconds from `liqoctl unpeer` to rome's `OutgoingPeering=None`.
    pub unpeer_secs: f64,
    /// ... to milan's `IncomingPeering=None`.
    pub unpeer_incoming_secs: f64,
    /// ... to `liqoctl unpeer` exiting.
    pub unpeer_command_secs: f64,
    /// The apiserver floor samples of this round, milliseconds.
    pub floor_ms: Vec<f64>,
    /// Both controller-managers after the round.
    pub memory: Vec<Memory>,
}

/// What a row of the summary measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// `liqoctl peer` -> rome AuthenticationStatus=Established.
    Auth,
    /// `liqoctl peer` -> rome OutgoingPeering=Established (the figure).
    Outgoing,
    /// `liqoctl peer` -> milan IncomingPeering=Established.
    Incoming,
    /// `liqoctl peer` exits.
    PeerCommand,
    /// `liqoctl unpeer` -> rome OutgoingPeering=None.
    Unpeer,
    /// `liqoctl unpeer` -> milan IncomingPeering=None.
    UnpeerIncoming,
    /// `liqoctl unpeer` exits.
    UnpeerCommand,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 7] = [
        Metric::Auth,
        Metric::Outgoing,
        Metric::Incoming,
        Metric::PeerCommand,
        Metric::Unpeer,
        Metric::UnpeerIncoming,
        Metric::UnpeerCommand,
    ];

    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Auth => "peer -> rome AuthenticationStatus=Established",
            Metric::Outgoing => "peer -> rome OutgoingPeering=Established",
            Metric::Incoming => "peer -> milan IncomingPeering=Established",
            Metric::PeerCommand => "peer -> liqoctl peer exited",
            Metric::Unpeer => "unpeer -> rome OutgoingPeering=None",
            Metric::UnpeerIncoming => "unpeer -> milan IncomingPeering=None",
            Metric::UnpeerCommand => "unpeer -> liqoctl unpeer exited",
        }
    }

    /// Its value in round `r`, seconds.
    pub fn of(self, r: &Round) -> Option<f64> {
        match self {
            Metric::Auth => r.auth_secs,
            Metric::Outgoing => Some(r.outgoing_secs),
            Metric::Incoming => Some(r.incoming_secs),
            Metric::PeerCommand => Some(r.peer_command_secs),
            Metric::Unpeer => Some(r.unpeer_secs),
            Metric::UnpeerIncoming => Some(r.unpeer_incoming_secs),
            Metric::UnpeerCommand => Some(r.unpeer_command_secs),
        }
    }
}

/// One row of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// What.
    pub metric: Metric,
    /// Seconds over the rounds that have it.
    pub secs: Option<Spread>,
    /// How many rounds have it.
    pub rounds: usize,
    /// Median seconds / the floor's median (how many apiserver round trips it is worth).
    pub over_floor: Option<f64>,
}

/// The memory and CPU of one cluster's liqo-controller-manager over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// The cluster.
    pub cluster: String,
    /// `VmRSS` after each round, MiB.
    pub rss_mib: Option<Spread>,
    /// The highest `VmHWM` seen, MiB.
    pub hwm_mib: f64,
    /// CPU seconds (user + system) from the first `liqoctl peer` to the last round's end.
    pub cpu_secs: f64,
    /// Wall seconds of that same span.
    pub wall_secs: f64,
}

/// How the run was done, besides the core header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    /// Rounds.
    pub repeats: u32,
    /// Floor samples per round.
    pub floor_samples: u32,
    /// The Kubernetes version the apiservers report.
    pub kubernetes: String,
    /// Seconds to start the two clusters.
    pub clusters_up_secs: f64,
    /// Seconds to install Liqo.
    pub install_secs: f64,
}

/// Everything one `liqo-bench peering` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeeringReport {
    /// How and on what.
    pub header: Header,
    /// The rounds, the floor samples, the clusters.
    pub setup: Setup,
    /// The summary, one row per [`Metric`].
    pub rows: Vec<Row>,
    /// The floor: CRD apply + status patch + watch event, milliseconds.
    pub floor_ms: Option<Spread>,
    /// Per cluster.
    pub usage: Vec<Usage>,
    /// Every round.
    pub rounds: Vec<Round>,
    /// How to read the figures.
    pub notes: Vec<String>,
}

const KIB_PER_MIB: f64 = 1024.0;

impl PeeringReport {
    /// Summarizes `rounds`; `cpu` is each cluster's (CPU seconds, wall seconds).
    pub fn new(
        header: Header,
        setup: Setup,
        rounds: Vec<Round>,
        cpu: &[(String, f64, f64)],
    ) -> PeeringReport {
        let floor_ms = Spread::of(rounds.iter().flat_map(|r| r.floor_ms.iter().copied()));
        let floor_secs = floor_ms.map(|f| f.median / 1000.0);
        let rows = Metric::ALL
            .iter()
            .map(|&metric| {
                let values: Vec<f64> = rounds.iter().filter_map(|r| metric.of(r)).collect();
                let secs = Spread::of(values.iter().copied());
                Row {
                    metric,
                    rounds: values.len(),
                    over_floor: ratio(secs.map(|s| s.median), floor_secs),
                    secs,
                }
            })
            .collect();
        let usage = cpu
            .iter()
            .map(|(cluster, cpu_secs, wall_secs)| {
                let mine = || {
                    rounds
                        .iter()
                        .flat_map(|r| r.memory.iter())
                        .filter(move |m| &m.cluster == cluster)
                };
                Usage {
                    cluster: cluster.clone(),
                    rss_mib: Spread::of(mine().map(|m| m.rss_kib as f64 / KIB_PER_MIB)),
                    hwm_mib: mine().map(|m| m.hwm_kib).max().unwrap_or(0) as f64 / KIB_PER_MIB,
                    cpu_secs: *cpu_secs,
                    wall_secs: *wall_secs,
                }
            })
            .collect();
        let notes = notes(&header, &setup, &rounds);
        PeeringReport {
            header,
            setup,
            rows,
            floor_ms,
            usage,
            rounds,
            notes,
        }
    }

    /// The row of `m`.
    pub fn row(&self, m: Metric) -> Option<&Row> {
        self.rows.iter().find(|r| r.metric == m)
    }
}

/// What the figures are and are not.
fn notes(h: &Header, setup: &Setup, rounds: &[Round]) -> Vec<String> {
    let mut out = vec![
        "each round: milan's `liqoctl generate peer-command --only-command` (generated once, \
         not timed) is run on rome as `liqoctl peer out-of-band milan ...`; the clock starts \
         just before liqoctl is spawned and each event is the first time a watch on the \
         ForeignClusters (rome's, milan's) shows the condition; then `liqoctl unpeer \
         out-of-band milan`, timed the same way, and the next round starts once milan's \
         IncomingPeering is None too"
            .into(),
        "peering involves both clusters: rome authenticates to milan's liqo-auth, its \
         ResourceRequest is replicated to milan, milan authenticates back, its ResourceOffer is \
         replicated to rome and accepted; the virtual kubelet is a no-op (no node), the network \
         is not set up (NETWORKING None)"
            .into(),
        "floor: on rome, a NamespaceOffloading (a CRD no controller watches, so no reaction \
         adds to it) is server-side applied, its status patched, and the clock stops when a \
         watch opened beforehand delivers the patched status; that is one controller step's \
         apiserver cost, the least any controller pays per hop. `/ floor` = median seconds / \
         the floor's median: how many such steps the figure is worth"
            .into(),
        "memory: VmRSS and VmHWM from /proc/<pid>/status of each cluster's \
         liqo-controller-manager after every round (after the unpeer); CPU: utime+stime from \
         /proc/<pid>/stat over the rounds"
            .into(),
    ];
    if rounds.iter().skip(1).any(|r| r.auth_secs.is_none()) {
        out.push(
            "the authentication is only measured when it was not Established already: after \
             the first round the identity is kept (unpeering does not drop it), so later \
             rounds peer with an existing identity"
                .into(),
        );
    }
    out.push(
        "the clusters are the harness's (etcd, kube-apiserver, kube-controller-manager, \
         scheduler and kwok nodes as local processes, one machine for both); upstream Liqo \
         cannot run here (no container runtime), so there is no upstream figure from this \
         machine. The only external figure is the seeds' (Liqo v0.5.4 docs): `liqoctl peer` \
         \"might require a few seconds, depending on the download time of the Liqo virtual \
         kubelet image\", and the whole Liqo control plane needs \"less than 200 MB of RAM\" \
         (two-node KinD, one peer, 100 offloaded pods)"
            .into(),
    );
    out.extend(h.debug_note());
    if setup.repeats < crate::peering::MIN_REPEATS {
        out.push(format!(
            "only {} round(s) (--quick): a smoke test, not a measurement",
            setup.repeats
        ));
    }
    if h.load.max_pct > 15.0 {
        out.push(format!(
            "background CPU load reached {:.0}% at the start of a round (this counts the \
             bench's own idle clusters too, and anything else on the machine): figures may be \
             high",
            h.load.max_pct
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The core header of a run with a debug build of ours.
    pub(crate) fn header() -> Header {
        let mut h = crate::report_core::tests::header();
        h.tools = vec![crate::report_core::Tool {
            name: "liqo-controller-manager".into(),
            path: "/src/target/debug/liqo-controller-manager".into(),
            version: "liqo-controller-manager 0.1.0".into(),
        }];
        h.installs = vec![];
        h
    }

    pub(crate) fn setup(repeats: u32) -> Setup {
        Setup {
            repeats,
            floor_samples: 3,
            kubernetes: "v1.36.0".into(),
            clusters_up_secs: 20.0,
            install_secs: 5.0,
        }
    }

    pub(crate) fn round(repeat: u32, outgoing: f64) -> Round {
        Round {
            repeat,
            background_load_pct: 2.0,
            auth_secs: (repeat == 1).then_some(0.5),
            outgoing_secs: outgoing,
            incoming_secs: outgoing - 0.1,
            peer_command_secs: outgoing + 0.2,
            unpeer_secs: 0.4,
            unpeer_incoming_secs: 0.5,
            unpeer_command_secs: 0.6,
            floor_ms: vec![10.0, 20.0, 30.0],
            memory: vec![
                Memory {
                    cluster: "rome".into(),
                    rss_kib: 10 * 1024 * repeat as u64,
                    hwm_kib: 40 * 1024,
                },
                Memory {
                    cluster: "milan".into(),
                    rss_kib: 8 * 1024,
                    hwm_kib: 9 * 1024,
                },
            ],
        }
    }

    #[test]
    fn medians_ratios_to_the_floor_and_memory_per_cluster() {
        let rounds = vec![round(1, 2.0), round(2, 1.0), round(3, 4.0)];
        let cpu = [
            ("rome".to_owned(), 1.5, 30.0),
            ("milan".to_owned(), 1.0, 30.0),
        ];
        let r = PeeringReport::new(header(), setup(3), rounds, &cpu);
        let out = r.row(Metric::Outgoing).unwrap();
        assert_eq!(out.secs.unwrap().median, 2.0);
        assert_eq!((out.secs.unwrap().min, out.secs.unwrap().max), (1.0, 4.0));
        assert_eq!(r.floor_ms.unwrap().median, 20.0);
        assert_eq!(out.over_floor, Some(100.0), "2 s / 20 ms");
        let auth = r.row(Metric::Auth).unwrap();
        assert_eq!((auth.rounds, auth.secs.unwrap().median), (1, 0.5));
        assert_eq!(r.usage[0].cluster, "rome");
        assert_eq!(r.usage[0].rss_mib.unwrap().median, 20.0);
        assert_eq!(r.usage[0].hwm_mib, 40.0);
        assert_eq!(r.usage[1].rss_mib.unwrap().max, 8.0);
        assert!(r.notes.iter().any(|n| n.contains("identity is kept")));
        assert!(r.notes.iter().any(|n| n.contains("DEBUG")));
        assert!(r.notes.iter().any(|n| n.contains("no container runtime")));
    }
}
