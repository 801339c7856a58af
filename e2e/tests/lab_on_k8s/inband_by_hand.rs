//! In-band peers unpeered by hand, without liqoctl ([`unpeer_by_hand`]): `kubectl delete
//! foreignclusters milan` on rome and `... rome` on milan at once. Both must go, none kept
//! waiting forever: each side keeps the tunnel (through which the peer's API server is
//! reached) until its NetworkConfig, the last of its replicated objects, is gone; the side
//! whose peer took its tunnel down first lets what it could not confirm go after
//! `control::peering::replicate::IN_BAND_WAIT`, with a `ReplicaLetGo` Warning Event naming it.
//!
//! Then a peer that does not answer ([`peer_not_answering`]): rome consumed milan and stopped
//! (outgoing peering `No`: the handshakes with milan done), then rome's controller-manager can
//! no longer reach milan's liqo-proxy (a `prohibit` rule in rome's gateway node, where it
//! runs), and rome deletes its ForeignCluster: it goes after that wait, the NetworkConfig let
//! go named in an Event.

use std::time::{Duration, Instant};

use control::{
    api::{
        discovery::{ForeignCluster, PeeringConditionStatus, PeeringConditionType},
        net::TunnelEndpoint,
    },
    consts::{finalizers, labels, values},
    peering::replicate::IN_BAND_WAIT,
    phase::ReplicatedKind,
};
use k8s_openapi::api::core::v1::Event;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
};
use serde_json::json;

/// The replicator's Event when it lets a source go (`liqo_controller_manager::replicator::
/// REASON_LET_GO`).
const LET_GO: &str = "ReplicaLetGo";

/// The messages of the Events [`LET_GO`] in `kube` about the ForeignCluster of UID `uid`.
async fn let_go_events(kube: &Client, uid: &str) -> Vec<String> {
    Api::<Event>::all(kube.clone())
        .list(&ListParams::default().fields(&format!("reason={LET_GO}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

/// The objects of every replicated kind in `kube` that `params` selects, as "<Kind> <name>"
/// with the object.
async fn of_replicated_kinds(kube: &Client, params: &ListParams) -> Vec<(String, DynamicObject)> {
    let mut found = Vec::new();
    for kind in ReplicatedKind::ALL {
        let ar = kind.api_resource();
        for o in Api::<DynamicObject>::all_with(kube.clone(), &ar)
            .list(params)
            .await
            .unwrap()
        {
            found.push((format!("{} {}", ar.kind, o.name_any()), o));
        }
    }
    found
}

/// The objects replicated here from a peer (`liqo.io/replicated=true`) of every kind: none
/// may be left once both sides unpeered.
async fn copies(kube: &Client) -> Vec<String> {
    let replicated =
        ListParams::default().labels(&format!("{}={}", labels::REPLICATED, values::TRUE));
    let found = of_replicated_kinds(kube, &replicated).await;
    found.into_iter().map(|(name, _)| name).collect()
}

/// Whether `peer`'s ForeignCluster and every TunnelEndpoint are gone in `kube`; else what is
/// there.
async fn gone(kube: &Client, peer: &str) -> Result<(), String> {
    let fc = Api::<ForeignCluster>::all(kube.clone())
        .get_opt(peer)
        .await
        .unwrap();
    let teps = Api::<TunnelEndpoint>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    match fc {
        None if teps == 0 => Ok(()),
        fc => Err(format!(
            "ForeignCluster {peer} finalizers {:?}, {teps} TunnelEndpoints",
            fc.map(|f| f.metadata.finalizers)
        )),
    }
}

/// The scenario on peered `rome` and `milan` (clients in that order).
pub(crate) async fn unpeer_by_hand(rome: &Client, milan: &Client) {
    let sides = [(rome, "rome", "milan"), (milan, "milan", "rome")];
    let mut uids = Vec::new();
    for (kube, _, peer) in sides {
        let fc = Api::<ForeignCluster>::all(kube.clone())
            .get(peer)
            .await
            .unwrap();
        uids.push(fc.uid().unwrap());
    }
    let started = Instant::now();
    for (kube, _, peer) in sides {
        Api::<ForeignCluster>::all(kube.clone())
            .delete(peer, &DeleteParams::default())
            .await
            .unwrap();
    }
    // The let-go's wait, and room for a loaded machine (CI runs two test binaries on 2
    // cores); a teardown that waited for the grace (300 s) or forever fails.
    let limit = IN_BAND_WAIT + Duration::from_secs(90);
    let mut done = [None, None];
    while done.iter().any(Option::is_none) {
        let mut why = Vec::new();
        for (i, (kube, c, peer)) in sides.iter().enumerate() {
            if done[i].is_some() {
                continue;
            }
            match gone(kube, peer).await {
                Ok(()) => {
                    let secs = started.elapsed().as_secs_f64();
                    eprintln!("{c}: ForeignCluster {peer} deleted by hand: gone in {secs:.1} s");
                    done[i] = Some(secs);
                }
                Err(e) => why.push(format!("{c}: {e}")),
            }
        }
        assert!(
            why.is_empty() || started.elapsed() < limit,
            "{limit:?} after both ForeignClusters were deleted: {why:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for ((kube, c, _), uid) in sides.into_iter().zip(&uids) {
        let left = copies(kube).await;
        assert!(left.is_empty(), "{c}: copies left by the peer: {left:?}");
        // Whichever side's peer took its tunnel down first may have let go (a race): only
        // what it says is checked.
        let let_go = let_go_events(kube, uid).await;
        eprintln!("{c}: {LET_GO} Events {let_go:?}");
        assert!(
            let_go.iter().all(|m| m.contains("has not answered for")),
            "{c}: {let_go:?}"
        );
    }
}

/// A rule refusing every packet to `ip` in `netns` (before the tunnel's policy routing), until
/// dropped: the test's cut of a peer.
struct Cut {
    netns: String,
    ip: String,
}

impl Cut {
    fn new(netns: &str, ip: &str) -> Cut {
        let cut = Cut {
            netns: netns.to_owned(),
            ip: format!("{ip}/32"),
        };
        assert_eq!(cut.rule("add"), Some(0), "ip rule add to {ip} prohibit");
        cut
    }

    /// `ip rule <verb>`'s exit code (`None`: it did not run, or was killed).
    fn rule(&self, verb: &str) -> Option<i32> {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.netns, "ip", "rule", verb, "to"])
            .arg(&self.ip)
            .args(["prohibit", "priority", "1"])
            .output();
        // Also called while a panic unwinds (drop): never panics itself.
        match out {
            Ok(out) => {
                eprintln!(
                    "{}: ip rule {verb} to {} prohibit: {:?} {}",
                    self.netns,
                    self.ip,
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                );
                out.status.code()
            }
            Err(e) => {
                eprintln!("{}: ip rule {verb} to {}: {e}", self.netns, self.ip);
                None
            }
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        // Already gone (the lab taken down) is fine: the rule only matters while it runs.
        self.rule("del");
    }
}

/// Rome (`rome`, its gateway node `netns`), consuming milan in-band, deletes milan's
/// ForeignCluster while milan's liqo-proxy cannot be reached from rome's controller-manager.
pub(crate) async fn peer_not_answering(rome: &Client, netns: &str) {
    let fcs = Api::<ForeignCluster>::all(rome.clone());
    let proxy = fcs
        .get("milan")
        .await
        .unwrap()
        .spec
        .proxy_url()
        .unwrap()
        .to_owned();
    let host = proxy
        .split("://")
        .nth(1)
        .and_then(|h| h.split([':', '/']).next())
        .unwrap()
        .to_owned();
    // Outgoing off: the request withdrawn and deleted while milan answers.
    fcs.patch(
        "milan",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"outgoingPeeringEnabled": "No"}})),
    )
    .await
    .unwrap();
    let stopped = Instant::now();
    loop {
        let fc = fcs.get("milan").await.unwrap();
        let outgoing = fc
            .status
            .as_ref()
            .map(|s| s.condition(PeeringConditionType::OutgoingPeering));
        if outgoing == Some(PeeringConditionStatus::None) {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "outgoing still {outgoing:?} 60 s after it was turned off"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let uid = fcs.get("milan").await.unwrap().uid().unwrap();
    // The peer's silence may start with the cut: the waits are measured from it.
    let cut_at = Instant::now();
    let _cut = Cut::new(netns, &host);
    // With no direction left our NetworkConfig is withdrawn (its finalizer dropped once milan
    // refuses us its copies): that may have happened before the cut. Whether any of our
    // objects for milan still holds the replicator's finalizer now (cut: only a let-go can
    // drop it) says what must follow.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ours = ListParams::default().labels(&format!(
        "{}={},{}={}",
        labels::REPLICATION,
        values::TRUE,
        labels::REMOTE_ID,
        fcs.get("milan")
            .await
            .unwrap()
            .spec
            .cluster_identity
            .cluster_id
    ));
    let held: Vec<String> = of_replicated_kinds(rome, &ours)
        .await
        .into_iter()
        .filter(|(_, o)| {
            o.finalizers()
                .iter()
                .any(|f| f == finalizers::CRD_REPLICATOR)
        })
        .map(|(name, _)| name)
        .collect();
    eprintln!("rome: held by the replicator at the cut: {held:?}");
    let started = Instant::now();
    fcs.delete("milan", &DeleteParams::default()).await.unwrap();
    let limit = IN_BAND_WAIT + Duration::from_secs(90);
    loop {
        match gone(rome, "milan").await {
            Ok(()) => break,
            Err(why) => assert!(
                started.elapsed() < limit,
                "{limit:?} after the deletion, milan ({proxy}) cut: {why}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let since_cut = cut_at.elapsed().as_secs_f64();
    eprintln!(
        "rome: ForeignCluster milan (not answering) gone in {secs:.1} s ({since_cut:.1} s after the cut)"
    );
    let let_go = let_go_events(rome, &uid).await;
    eprintln!("rome: {LET_GO} Events {let_go:?}");
    if held.is_empty() {
        assert!(let_go.is_empty(), "nothing to let go, yet: {let_go:?}");
        return;
    }
    assert!(
        since_cut >= IN_BAND_WAIT.as_secs_f64(),
        "gone {since_cut:.1} s after the cut: nothing waited for milan"
    );
    for object in &held {
        assert!(
            let_go
                .iter()
                .any(|m| m.contains(&format!("let go of {object}:"))
                    && m.contains("milan has not answered for")),
            "no Event for {object}: {let_go:?}"
        );
    }
}
