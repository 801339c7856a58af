//! The home IPAM of the reflection bench: rome's `liqo-ipam` given to the virtual kubelets
//! alone (the network manager off: no gateways run here), milan's view of rome told by hand
//! (as milan's network manager would), and after the kill the check that the virtual kubelet
//! holds, for milan, exactly the external addresses rome's remaining EndpointSlices list: no
//! mapping leaked, none missing.

use std::collections::BTreeSet;

use e2e::liqo::Liqo;
use ipam::service::{
    client::{Client, ClientOptions, connect},
    proto::{Empty, Hold, RemapRequest, SetPeerViewRequest},
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, api::ListParams};

use crate::BenchError;

/// How milan sees rome's pods and external CIDR (any free ranges: nothing routes here).
const POD_VIEW: &str = "10.171.0.0/16";
const EXTERNAL_VIEW: &str = "10.172.0.0/16";
/// milan's external CIDR as announced to rome.
const MILAN_EXTERNAL: &str = "10.202.0.0/16";
/// The addresses of the bench's slices that are not pods (`workload`'s `192.168.x.y`).
const OUTSIDE: &str = "192.168.";

/// The IPAM's admin client and milan's ID there.
pub(crate) struct HomeIpam {
    client: Client,
    milan: String,
}

fn ipam_err(what: &'static str) -> impl FnOnce(tonic::Status) -> BenchError {
    move |e| BenchError::step(what, &e)
}

/// Connects to rome's IPAM and tells it milan (its pod CIDR) and milan's view of rome.
pub(crate) async fn tell_views(
    liqo: &Liqo,
    milan_pods: ipnet::Ipv4Net,
) -> Result<HomeIpam, BenchError> {
    let rome = liqo
        .get("rome")
        .ok_or_else(|| BenchError::Options("no Liqo on rome".into()))?;
    let listen = rome
        .get("liqo-ipam")
        .and_then(|r| r.listen.clone())
        .ok_or_else(|| BenchError::Options("rome's liqo-ipam does not listen".into()))?;
    let milan = liqo
        .get("milan")
        .ok_or_else(|| BenchError::Options("no Liqo on milan".into()))?
        .cluster_id
        .clone();
    let mut client = connect(&ClientOptions::new(format!("http://{listen}")))
        .await
        .map_err(|e| BenchError::step("connecting to rome's liqo-ipam", &e))?;
    client
        .remap(RemapRequest {
            cluster_id: milan.clone(),
            pod_cidr: milan_pods.to_string(),
            external_cidr: MILAN_EXTERNAL.into(),
        })
        .await
        .map_err(ipam_err("telling rome's IPAM milan's CIDRs"))?;
    client
        .set_peer_view(SetPeerViewRequest {
            cluster_id: milan.clone(),
            our_pod_view: POD_VIEW.into(),
            our_external_view: EXTERNAL_VIEW.into(),
        })
        .await
        .map_err(ipam_err("telling rome's IPAM milan's view of rome"))?;
    Ok(HomeIpam { client, milan })
}

/// What the virtual kubelet holds for milan against what rome's slices in `ns` list.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holds {
    /// External mappings the virtual kubelet holds for milan.
    pub held: usize,
    /// Held though no slice lists them.
    pub leaked: Vec<String>,
    /// Listed by a slice but not held.
    pub missing: Vec<String>,
}

impl HomeIpam {
    /// The holds now against rome's slices in `ns`.
    pub(crate) async fn holds(&self, rome: &kube::Client, ns: &str) -> Result<Holds, BenchError> {
        let slices = Api::<EndpointSlice>::namespaced(rome.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| BenchError::step("listing rome's EndpointSlices", &e))?;
        let listed: BTreeSet<String> = slices
            .items
            .iter()
            .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
            .filter(|a| a.starts_with(OUTSIDE))
            .collect();
        let ours = Hold {
            cluster_id: self.milan.clone(),
            holder: control::consts::reflection::IPAM_HOLDER.into(),
        };
        let held: BTreeSet<String> = self
            .client
            .clone()
            .list(Empty {})
            .await
            .map_err(ipam_err("listing rome's IPAM"))?
            .into_inner()
            .endpoints
            .into_iter()
            .filter(|e| e.holds.contains(&ours))
            .map(|e| e.ip)
            .collect();
        Ok(Holds {
            held: held.len(),
            leaked: held.difference(&listed).cloned().collect(),
            missing: listed.difference(&held).cloned().collect(),
        })
    }
}
