//! Fixtures for the NamespaceOffloading controller's decisions (peers milan/center and
//! turin/south, as in the seed); the cases are in `cases.rs`.

use std::fmt::Write;

use k8s_openapi::{
    api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm},
    jiff::Timestamp,
};

use super::*;
use crate::{
    api::{
        offloading::{NamespaceMappingStrategy, OffloadingPhase},
        virtualkubelet::MappingPhase,
    },
    consts::labels,
};

const MILAN: &str = "milan-539f8b";
const TURIN: &str = "turin-7881be";

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn rome() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: "11111111-1111-4111-8111-111111111111".parse().unwrap(),
        cluster_name: "rome".parse().unwrap(),
    }
}

fn region(value: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "topology.liqo.io/region".into(),
                operator: "In".into(),
                values: Some(vec![value.into()]),
            }]),
            match_fields: None,
        }],
    }
}

/// One peer as a fixture: a node with a region label (or none), this namespace's entries.
#[derive(Clone)]
struct P {
    map: &'static str,
    id: ClusterId,
    labels: BTreeMap<String, String>,
    node: Option<bool>, // Some(deleting)
    desired: Option<String>,
    current: Option<RemoteNamespaceStatus>,
}

fn peer(map: &'static str, region: &str) -> P {
    let id = if map == MILAN {
        "22222222-2222-4222-8222-222222222222"
    } else {
        "33333333-3333-4333-8333-333333333333"
    };
    P {
        map,
        id: id.parse().unwrap(),
        labels: BTreeMap::from([
            (labels::NODE_TYPE.into(), "virtual-node".into()),
            ("topology.liqo.io/region".into(), region.into()),
        ]),
        node: Some(false),
        desired: None,
        current: None,
    }
}

impl P {
    fn desired(mut self, remote: &str) -> Self {
        self.desired = Some(remote.into());
        self
    }
    fn current(mut self, remote: &str, phase: MappingPhase) -> Self {
        self.current = Some(RemoteNamespaceStatus {
            remote_namespace: Some(remote.into()),
            phase: Some(phase),
        });
        self
    }
    fn node(mut self, node: Option<bool>) -> Self {
        self.node = node;
        self
    }
}

/// The NamespaceOffloading side of a fixture.
struct W {
    ns: NamespaceName,
    spec: NamespaceOffloadingSpec,
    generation: Option<i64>,
    deleting: bool,
    has_finalizer: bool,
    status: NamespaceOffloadingStatus,
    labelled: bool,
    peers: Vec<P>,
}

fn world(peers: Vec<P>) -> W {
    W {
        ns: "liqo-demo".parse().unwrap(),
        spec: NamespaceOffloadingSpec {
            namespace_mapping_strategy: NamespaceMappingStrategy::EnforceSameName,
            pod_offloading_strategy: PodOffloadingStrategy::LocalAndRemote,
            cluster_selector: Some(region("south")),
        },
        generation: Some(1),
        deleting: false,
        has_finalizer: true,
        status: NamespaceOffloadingStatus::default(),
        labelled: true,
        peers,
    }
}

fn two() -> Vec<P> {
    vec![peer(MILAN, "center"), peer(TURIN, "south")]
}

impl W {
    fn decide_at(&self, now: Time) -> Vec<Action> {
        let peers: Vec<Peer<'_>> = self
            .peers
            .iter()
            .map(|p| Peer {
                map: p.map,
                map_namespace: "tenant",
                cluster_id: &p.id,
                node: p.node.map(|deleting| NodeView {
                    name: "liqo-x",
                    labels: &p.labels,
                    deleting,
                }),
                desired: p.desired.as_deref(),
                current: p.current.as_ref(),
            })
            .collect();
        let local = rome();
        decide(&Observed {
            namespace: &self.ns,
            spec: &self.spec,
            generation: self.generation,
            deleting: self.deleting,
            has_finalizer: self.has_finalizer,
            status: &self.status,
            labelled: self.labelled,
            peers: &peers,
            local: &local,
            now,
        })
    }
    fn decide(&self) -> Vec<Action> {
        self.decide_at(at(1_700_000_000))
    }
}

fn set(map: &str, remote: &str) -> Action {
    Action::SetDesired {
        map_namespace: "tenant".into(),
        map: map.into(),
        remote: remote.into(),
    }
}

fn remove(map: &str) -> Action {
    Action::RemoveDesired {
        map_namespace: "tenant".into(),
        map: map.into(),
    }
}

/// The actions, one a line, a status as its phase and conditions.
fn show(actions: &[Action]) -> String {
    let mut text = String::new();
    for a in actions {
        match a {
            Action::Status(s) => {
                let name = s.remote_namespace_name.as_deref().unwrap_or("-");
                let phase = s.offloading_phase;
                writeln!(
                    text,
                    "Status {phase:?} {name} gen {:?}",
                    s.observed_generation
                )
                .unwrap();
                for (map, list) in &s.remote_namespaces_conditions {
                    for c in list {
                        let reason = c.reason.as_deref().unwrap_or("-");
                        let message = c.message.as_deref().unwrap_or("-");
                        writeln!(
                            text,
                            "  {map}: {:?} {:?} {reason}: {message}",
                            c.type_, c.status
                        )
                        .unwrap();
                    }
                }
            }
            other => writeln!(text, "{other:?}").unwrap(),
        }
    }
    text
}

fn status_of(actions: &[Action]) -> &NamespaceOffloadingStatus {
    match actions.last() {
        Some(Action::Status(s)) => s,
        other => panic!("no status last: {other:?}"),
    }
}

mod cases;
