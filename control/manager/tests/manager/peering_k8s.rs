//! Two real clusters (the test kit's harness), each running liqo-auth's server (admin client) and
//! these controllers in-process under the chart's ClusterRole (a ServiceAccount token): rome
//! peers out of band with milan as `liqoctl peer out-of-band` would (remote token +
//! ForeignCluster). Checked: both directions' conditions, the RoleBindings, the offer (the
//! sharing percentage of milan's kwok nodes, raised by a new node, with milan's storage
//! class), refusals (own ID, wrong token), the unpeer, peering again with the same
//! identities, and deleting the ForeignCluster.

use crate::common;

use common::*;

use std::time::Instant;

use control::{
    api::{
        discovery::{
            ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T, ResourceRequest,
        },
        sharing::ResourceOffer,
    },
    consts::labels,
    names,
};
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::api::resource::Quantity};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use liqo_auth::tokens;
use testkit::k8s;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rome_peers_with_milan_out_of_band_gets_an_offer_and_unpeers() {
    // Another test of this binary may have installed it: then that one is used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, TWO_SAME).await.unwrap();
    let rome_id = identity(ROME_ID, "rome");
    let milan_id = identity(MILAN_ID, "milan");
    let rome = start(&set.clusters[0], &rome_id).await;
    let milan = start(&set.clusters[1], &milan_id).await;

    // A default StorageClass on milan: the offer lists it.
    let class: k8s_openapi::api::storage::v1::StorageClass =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "standard",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/no-provisioner",
        }))
        .unwrap();
    Api::<k8s_openapi::api::storage::v1::StorageClass>::all(milan.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();

    // What `liqoctl peer out-of-band milan --auth-url --cluster-id --auth-token` writes.
    let milan_token = tokens::local_token(&milan.client, "liqo").await.unwrap();
    tokens::write_remote_token(&rome.client, "liqo", &milan_id.cluster_id, &milan_token)
        .await
        .unwrap();
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "milan", "labels": {labels::CLUSTER_ID: MILAN_ID}},
        "spec": {
            "clusterIdentity": {"clusterID": MILAN_ID, "clusterName": "milan"},
            "foreignAuthUrl": milan.url,
            "outgoingPeeringEnabled": "Yes",
            "incomingPeeringEnabled": "Auto",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    let t = Instant::now();
    Api::<ForeignCluster>::all(rome.client.clone())
        .create(&PostParams::default(), &fc)
        .await
        .unwrap();

    eventually(20, "rome's ForeignCluster for milan established", || {
        fc_conditions(
            &rome.client,
            "milan",
            &[
                (T::ProcessForeignClusterStatus, S::Success),
                (T::AuthenticationStatus, S::Established),
                (T::OutgoingPeering, S::Established),
                (T::IncomingPeering, S::None),
                (T::NetworkStatus, S::None),
            ],
        )
    })
    .await;
    eprintln!("outgoing established in {:.1} s", t.elapsed().as_secs_f64());
    eventually(20, "milan's incoming ForeignCluster for rome", || {
        fc_conditions(
            &milan.client,
            "rome",
            &[
                (T::AuthenticationStatus, S::Established),
                (T::IncomingPeering, S::Established),
                (T::OutgoingPeering, S::None),
            ],
        )
    })
    .await;
    let milan_fc = Api::<ForeignCluster>::all(milan.client.clone())
        .get("rome")
        .await
        .unwrap();
    assert_eq!(
        milan_fc.metadata.labels.unwrap()[labels::DISCOVERY_TYPE],
        "IncomingPeering"
    );

    // The offer: the sharing percentage of milan's 3 kwok nodes (32 cpu, 256Gi each).
    let rome_tenant = names::tenant_namespace(&milan_id).to_string();
    let milan_tenant = names::tenant_namespace(&rome_id).to_string();
    let want = expected_offer(&milan.client).await;
    assert_eq!(want["cpu"], Quantity("28800m".into()));
    eventually(20, "the offer in rome", || {
        offer_is(&rome.client, &rome_tenant, &want)
    })
    .await;
    let ro = Api::<ResourceOffer>::namespaced(rome.client.clone(), &rome_tenant)
        .get("milan")
        .await
        .unwrap();
    assert_eq!(ro.spec.cluster_id.as_str(), MILAN_ID);
    assert_eq!(ro.spec.storage_classes.len(), 1);
    assert_eq!(ro.spec.storage_classes[0].storage_class_name, "standard");
    assert!(ro.spec.storage_classes[0].default);
    let status = ro.status.unwrap();
    assert_eq!(status.phase, control::api::sharing::OfferPhase::Accepted);
    assert_eq!(
        status.virtual_kubelet_status,
        control::api::sharing::VirtualKubeletStatus::Created
    );
    assert!(
        ro.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"liqo.io/virtualkubelet".to_owned())
    );

    // Roles: milan lets rome write its own request only (basic); rome lets milan write offers.
    let bindings = |c: Client, ns: String| async move {
        let mut names: Vec<String> =
            Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(c, &ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|b| b.metadata.name)
                .collect();
        names.sort();
        names
    };
    assert_eq!(
        bindings(rome.client.clone(), rome_tenant.clone()).await,
        [
            "liqo-binding-liqo-remote-peering-basic",
            "liqo-binding-liqo-remote-peering-outgoing"
        ]
    );
    assert_eq!(
        bindings(milan.client.clone(), milan_tenant.clone()).await,
        [
            "liqo-binding-liqo-remote-peering-basic",
            "liqo-binding-liqo-remote-peering-incoming"
        ]
    );

    // A new kwok node on milan raises the offer.
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "milan-extra",
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": "milan-extra", "type": "kwok"},
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }))
    .unwrap();
    Api::<Node>::all(milan.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    eventually(20, "the raised offer in rome", || {
        let (rome, milan, ns) = (
            rome.client.clone(),
            milan.client.clone(),
            rome_tenant.clone(),
        );
        async move {
            let want = expected_offer(&milan).await;
            if want["cpu"] != Quantity("38400m".into()) {
                return Err(format!("milan's new node not Ready yet: {want:?}"));
            }
            offer_is(&rome, &ns, &want).await
        }
    })
    .await;

    // Refusals: our own cluster ID is not processed; a ForeignCluster naming naples at milan's
    // auth URL is refused before any token is sent (milan's /ids answers milan's ID).
    let bad = |name: &str, id: &str, url: &str| -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterIdentity": {"clusterID": id, "clusterName": name},
                "foreignAuthUrl": url,
                "outgoingPeeringEnabled": "Yes",
            },
        }))
        .unwrap()
    };
    let fcs = Api::<ForeignCluster>::all(rome.client.clone());
    fcs.create(&PostParams::default(), &bad("myself", ROME_ID, &milan.url))
        .await
        .unwrap();
    let wrong = control::identity::AuthToken::generate().unwrap();
    tokens::write_remote_token(&rome.client, "liqo", &NAPLES_ID.parse().unwrap(), &wrong)
        .await
        .unwrap();
    fcs.create(
        &PostParams::default(),
        &bad("naples", NAPLES_ID, &milan.url),
    )
    .await
    .unwrap();
    eventually(20, "refusals", || async {
        fc_conditions(
            &rome.client,
            "myself",
            &[
                (T::ProcessForeignClusterStatus, S::Error),
                (T::AuthenticationStatus, S::None),
            ],
        )
        .await?;
        fc_conditions(
            &rome.client,
            "naples",
            &[
                (T::ProcessForeignClusterStatus, S::Success),
                (T::AuthenticationStatus, S::Error),
                (T::OutgoingPeering, S::None),
            ],
        )
        .await
    })
    .await;
    let myself = fcs.get("myself").await.unwrap();
    let process = control::conditions::get(
        &myself.status.unwrap().peering_conditions,
        T::ProcessForeignClusterStatus,
    )
    .cloned()
    .unwrap();
    assert_eq!(process.reason.as_deref(), Some("LocalCluster"));
    let naples = fcs.get("naples").await.unwrap();
    let auth = control::conditions::get(
        &naples.status.unwrap().peering_conditions,
        T::AuthenticationStatus,
    )
    .cloned()
    .unwrap();
    assert_eq!(
        auth.reason.as_deref(),
        Some("ClusterIDMismatch"),
        "{auth:?}"
    );
    let message = auth.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "answers for cluster {MILAN_ID} (milan), not {NAPLES_ID}"
        )) && message.contains("no token was sent")
            && message.contains("asking again at"),
        "{message}"
    );

    // Unpeer: outgoing No.
    Api::<ForeignCluster>::all(rome.client.clone())
        .patch(
            "milan",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"outgoingPeeringEnabled": "No"}})),
        )
        .await
        .unwrap();
    eventually(20, "unpeered", || {
        let (rome, milan) = (rome.client.clone(), milan.client.clone());
        let (rt, mt) = (rome_tenant.clone(), milan_tenant.clone());
        async move {
            fc_conditions(
                &rome,
                "milan",
                &[
                    (T::OutgoingPeering, S::None),
                    (T::AuthenticationStatus, S::Established),
                ],
            )
            .await?;
            // Milan's ForeignCluster for rome was made by the incoming peering: it goes.
            if Api::<ForeignCluster>::all(milan.clone())
                .get_opt("rome")
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err("milan's ForeignCluster for rome still there".into());
            }
            for (c, ns, side) in [(&rome, &rt, "rome"), (&milan, &mt, "milan")] {
                let rrs = Api::<ResourceRequest>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ros = Api::<ResourceOffer>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if !rrs.items.is_empty() || !ros.items.is_empty() {
                    return Err(format!(
                        "{side}: {} ResourceRequests, {} ResourceOffers left",
                        rrs.items.len(),
                        ros.items.len()
                    ));
                }
            }
            Ok(())
        }
    })
    .await;
    // The ForeignCluster and the tenant namespaces stay; the outgoing role is unbound.
    assert!(
        Api::<ForeignCluster>::all(rome.client.clone())
            .get_opt("milan")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        bindings(rome.client.clone(), rome_tenant.clone()).await,
        ["liqo-binding-liqo-remote-peering-basic"]
    );

    // Peering again reuses the identities (a second identity request would be refused).
    let identities = |c: Client, ns: String| async move {
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(c, &ns)
            .list(&ListParams::default().labels(&format!("{}=true", labels::LOCAL_IDENTITY)))
            .await
            .unwrap()
            .items
            .len()
    };
    assert_eq!(
        identities(rome.client.clone(), rome_tenant.clone()).await,
        1
    );
    Api::<ForeignCluster>::all(rome.client.clone())
        .patch(
            "milan",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"outgoingPeeringEnabled": "Yes"}})),
        )
        .await
        .unwrap();
    eventually(20, "peered again", || async {
        fc_conditions(
            &rome.client,
            "milan",
            &[(T::OutgoingPeering, S::Established)],
        )
        .await?;
        fc_conditions(
            &milan.client,
            "rome",
            &[(T::IncomingPeering, S::Established)],
        )
        .await
    })
    .await;
    assert_eq!(
        identities(rome.client.clone(), rome_tenant.clone()).await,
        1
    );
    assert_eq!(
        identities(milan.client.clone(), milan_tenant.clone()).await,
        1
    );
    let fc = Api::<ForeignCluster>::all(rome.client.clone())
        .get("milan")
        .await
        .unwrap();
    assert!(
        fc.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"crdReplicator.liqo.io".to_owned())
    );

    // Deleting the ForeignCluster unpeers first, then lets it go.
    Api::<ForeignCluster>::all(rome.client.clone())
        .delete("milan", &Default::default())
        .await
        .unwrap();
    eventually(20, "the ForeignCluster deleted after the unpeer", || {
        let (rome, milan) = (rome.client.clone(), milan.client.clone());
        let (rt, mt) = (rome_tenant.clone(), milan_tenant.clone());
        async move {
            if Api::<ForeignCluster>::all(rome.clone())
                .get_opt("milan")
                .await
                .map_err(|e| e.to_string())?
                .is_some()
            {
                return Err("rome's ForeignCluster for milan still there".into());
            }
            for (c, ns, side) in [(&rome, &rt, "rome"), (&milan, &mt, "milan")] {
                let rrs = Api::<ResourceRequest>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ros = Api::<ResourceOffer>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if !rrs.items.is_empty() || !ros.items.is_empty() {
                    return Err(format!(
                        "{side}: {} ResourceRequests, {} ResourceOffers left",
                        rrs.items.len(),
                        ros.items.len()
                    ));
                }
            }
            Ok(())
        }
    })
    .await;

    rome.stop().await;
    milan.stop().await;
    set.release().await.unwrap();
}
