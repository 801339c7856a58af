//! The network manager's I/O: reads what `control::network::decide` needs (the IPAM's `List`, the
//! key Secret, the gateway Service, the NetworkConfigs and the TunnelEndpoint in the tenant
//! namespace, all as raw objects so that a peer's bad value is refused by name rather than breaking
//! a read), decides, and hands the actions to the executor (`exec`).

use std::sync::Arc;

use control::{
    api::{
        discovery::{ForeignCluster, PeeringConditionStatus, PeeringConditionType},
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, net, values},
    phase::PeeringPhase,
};
use futures::{Stream, StreamExt};
use ipam::service::proto;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DynamicObject, ListParams},
    core::ApiResource,
    runtime::{WatchStreamExt, controller::Action as Requeue, watcher},
};
use liqo_peering::{
    grpc::GrpcError,
    ipam::{Ipam, Ranges},
};
use liqo_types::{Cidr, ClusterId};
use serde_json::Value;

use control::network::{
    decide::{self, Copy, Local, Observed, Own, Tunnel},
    endpoint,
};

use super::{
    REFUSED_ANNOTATION, REFUSED_SPEC_ANNOTATION, abandon,
    io::{dyn_api, ipam_error, tunnel_name},
    manager::{Manager, NAME},
};
use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::now,
};

/// Events that may change the decision for every peer: the key Secret and, without both
/// overrides, the gateway Services (NetworkConfigs and TunnelEndpoints wake their peer's
/// ForeignCluster only: [`super::watch`]).
pub fn controller_trigger(
    client: Client,
    namespace: &str,
    m: &Manager,
) -> impl Stream<Item = ()> + Send + 'static {
    let key = format!("{}={}", net::KEY_LABEL, net::WIREGUARD);
    let mut streams = vec![
        watcher(
            Api::<Secret>::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(&key),
        )
        .default_backoff()
        .map(|_| ())
        .boxed(),
    ];
    let o = m.config.gateway;
    if o.address.is_none() || o.port.is_none() {
        let gw = format!("{}={}", net::GATEWAY_SERVICE_LABEL, values::TRUE);
        streams.push(
            watcher(
                Api::<Service>::namespaced(client, namespace),
                watcher::Config::default().labels(&gw),
            )
            .default_backoff()
            .map(|_| ())
            .boxed(),
        );
    }
    futures::stream::select_all(streams)
}

/// One reconcile of a ForeignCluster's network.
pub async fn reconcile(fc: Arc<ForeignCluster>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let Some(m) = ctx.network.clone() else {
        return Ok(Requeue::await_change());
    };
    ctx.metrics.reconcile(NAME);
    let name = fc.name_any();
    let deleting = fc.meta().deletion_timestamp.is_some();
    let has_finalizer = fc
        .finalizers()
        .iter()
        .any(|f| f == net::NETWORK_MANAGER_FINALIZER);
    match run(&fc, &ctx, &m).await {
        Ok(()) => {
            if deleting {
                m.forget(&name);
            } else {
                m.succeeded(&name);
            }
            Ok(Requeue::requeue(ctx.settings.resync))
        }
        Err(e @ Error::Ipam { .. }) => {
            // The teardown needs the IPAM: one failing for longer than the grace does not
            // hold the ForeignCluster's deletion forever.
            let now = now().0;
            let since = m.ipam_failed(&name, now);
            match abandon::abandon(
                deleting,
                has_finalizer,
                true,
                Some(since),
                now,
                m.config.grace,
            ) {
                Some(why) => {
                    abandon::drop_finalizer(&ctx, &m.recorder, &fc, why).await?;
                    m.forget(&name);
                    Ok(Requeue::await_change())
                }
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

fn field(o: &DynamicObject, key: &str) -> Option<Value> {
    o.data.get(key).cloned().filter(|v| !v.is_null())
}

fn deleting_since(o: &DynamicObject) -> Option<k8s_openapi::jiff::Timestamp> {
    o.metadata.deletion_timestamp.as_ref().map(|t| t.0)
}

async fn run(fc: &ForeignCluster, ctx: &Context, m: &Manager) -> Result<(), Error> {
    let peer = fc.spec.cluster_identity.clone();
    let tenant = fc
        .status
        .as_ref()
        .and_then(|s| s.tenant_namespace.as_ref())
        .and_then(|t| t.local.clone());
    let name = tunnel_name(&peer);
    let mut ipam = m.ipam.clone();
    let nc_ar = ApiResource::erase::<NetworkConfig>(&());
    let tep_ar = ApiResource::erase::<TunnelEndpoint>(&());
    let (mut own, mut copy, mut tunnel) = (None, None, None);
    if let Some(ns) = &tenant {
        let ncs = dyn_api(&ctx.client, ns, &nc_ar);
        own = ncs
            .get_opt(&name)
            .await
            .map_err(kerr(format!("get NetworkConfig {ns}/{name}")))?
            .filter(|o| {
                o.labels().get(labels::REPLICATION).map(String::as_str) == Some(values::TRUE)
            });
        let selector = format!(
            "{}={},{}={}",
            labels::REPLICATED,
            values::TRUE,
            labels::ORIGIN_ID,
            peer.cluster_id
        );
        let mut copies = ncs
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kerr(format!("list NetworkConfig copies in {ns}")))?
            .items;
        if copies.len() > 1 {
            tracing::warn!(namespace = %ns, n = copies.len(), "several NetworkConfigs from the peer; using the oldest");
        }
        copy = oldest(&mut copies);
        tunnel = dyn_api(&ctx.client, ns, &tep_ar)
            .get_opt(&name)
            .await
            .map_err(kerr(format!("get TunnelEndpoint {ns}/{name}")))?;
    }
    let mut observed = Observed {
        now: now().0,
        grace: m.config.grace,
        local_id: ctx.local.cluster_id.clone(),
        peer: peer.clone(),
        processable: fc.status.as_ref().is_some_and(|s| {
            s.condition(PeeringConditionType::ProcessForeignClusterStatus)
                == PeeringConditionStatus::Success
        }),
        fc_deleting: fc.meta().deletion_timestamp.is_some(),
        networking: fc.spec.networking_enabled,
        phase: PeeringPhase::of_status(fc.status.as_ref()),
        in_band: fc.spec.in_band(),
        tenant_known: tenant.is_some(),
        has_finalizer: fc
            .finalizers()
            .iter()
            .any(|f| f == net::NETWORK_MANAGER_FINALIZER),
        local: Err("not asked (no network with the peer)".to_owned()),
        own: own.as_ref().map(|o| Own {
            spec: field(o, "spec").unwrap_or(Value::Null),
            deleting_since: deleting_since(o),
            status: field(o, "status"),
        }),
        copy: copy.as_ref().map(|o| Copy {
            spec: field(o, "spec").unwrap_or(Value::Null),
            status: field(o, "status"),
            refused: o.annotations().get(REFUSED_ANNOTATION).cloned(),
            refused_spec: o.annotations().get(REFUSED_SPEC_ANNOTATION).cloned(),
            deleting: o.metadata.deletion_timestamp.is_some(),
        }),
        ipam: None,
        tunnel: tunnel.as_ref().map(|o| Tunnel {
            spec: field(o, "spec").unwrap_or(Value::Null),
            deleting_since: deleting_since(o),
        }),
    };
    // The IPAM is asked only about a network wanted or held (the finalizer comes before
    // any network object and the IPAM's ranges, and goes after them).
    if decide::wanted(&observed) || observed.has_finalizer {
        let (ours, held) = ipam_state(&mut ipam, &peer.cluster_id).await?;
        observed.local = local(ctx, m, ours).await?;
        observed.ipam = held;
    }
    let fc_name = fc.name_any();
    match (&observed.local, decide::wanted(&observed)) {
        (Err(why), true) if m.waiting(&fc_name, why) => {
            tracing::warn!(peer = %peer.cluster_id, reason = %why, "cannot announce our network yet");
        }
        (Ok(_), _) => m.announced(&fc_name),
        _ => {}
    }
    if let Some(e) = decide::own_status_error(&observed) {
        tracing::warn!(peer = %peer.cluster_id, error = %e, "the peer's status on our NetworkConfig is unusable");
    }
    let actions = decide::decide(&observed);
    if !actions.is_empty() {
        tracing::debug!(peer = %peer.cluster_id, ?actions, "network");
    }
    let x = super::exec::Exec {
        ctx,
        m,
        fc,
        ns: tenant.as_deref().unwrap_or_default(),
        name: &name,
        nc_ar: &nc_ar,
        tep_ar: &tep_ar,
        copy: copy.as_ref(),
        ipam,
        peer: peer.cluster_id.clone(),
    };
    x.run(actions).await
}

/// The oldest object (by creation, then name): the same one on every pass.
fn oldest(objects: &mut Vec<DynamicObject>) -> Option<DynamicObject> {
    objects.sort_by(|a, b| {
        let key = |o: &DynamicObject| {
            (
                o.metadata.creation_timestamp.as_ref().map(|t| t.0),
                o.name_any(),
            )
        };
        key(a).cmp(&key(b))
    });
    (!objects.is_empty()).then(|| objects.swap_remove(0))
}

/// Our ranges and what the IPAM holds for `peer`.
async fn ipam_state(
    ipam: &mut ipam::service::client::Client,
    peer: &ClusterId,
) -> Result<(Ranges, Option<liqo_peering::ipam::IpamPeer>), Error> {
    let list = ipam
        .list(proto::Empty {})
        .await
        .map_err(|s| ipam_error(peer)(call("list", &s)))?
        .into_inner();
    let cidr = |f: &'static str, v: &str| -> Result<Cidr, Error> {
        v.parse().map_err(|source| {
            ipam_error(peer)(GrpcError::Answer {
                call: "list",
                field: f,
                source,
            })
        })
    };
    let ours = Ranges {
        pods: cidr("pod_cidr", &list.pod_cidr)?,
        external: cidr("external_cidr", &list.external_cidr)?,
    };
    let held = Ipam::peer(ipam, peer).await.map_err(ipam_error(peer))?;
    Ok((ours, held))
}

fn call(name: &'static str, s: &tonic::Status) -> GrpcError {
    GrpcError::Call {
        call: name,
        code: s.code(),
        message: s.message().to_owned(),
    }
}

/// What we announce, or why not yet (no key, no endpoint).
async fn local(ctx: &Context, m: &Manager, ranges: Ranges) -> Result<Result<Local, String>, Error> {
    let ns = &ctx.settings.namespace;
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), ns)
        .get_opt(net::PUBLIC_KEY_SECRET)
        .await
        .map_err(kerr(format!("get Secret {ns}/{}", net::PUBLIC_KEY_SECRET)))?;
    let key = secret
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(net::PUBLIC_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned());
    let public_key = match key.map(|k| k.parse()) {
        Some(Ok(k)) => k,
        Some(Err(_)) => {
            return Ok(Err(format!(
                "Secret {ns}/{} key {} is not a WireGuard public key",
                net::PUBLIC_KEY_SECRET,
                net::PUBLIC_KEY
            )));
        }
        None => {
            return Ok(Err(format!(
                "no Secret {ns}/{} with key {} yet (the gateway operator makes it)",
                net::PUBLIC_KEY_SECRET,
                net::PUBLIC_KEY
            )));
        }
    };
    let o = m.config.gateway;
    let services = if o.address.is_some() && o.port.is_some() {
        Vec::new()
    } else {
        let gw = format!("{}={}", net::GATEWAY_SERVICE_LABEL, values::TRUE);
        Api::<Service>::namespaced(ctx.client.clone(), ns)
            .list(&ListParams::default().labels(&gw))
            .await
            .map_err(kerr(format!("list gateway Services in {ns}")))?
            .items
    };
    Ok(endpoint::choose(o, &services)
        .map(|endpoint| Local {
            ranges,
            public_key,
            endpoint,
        })
        .map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;

    fn o(name: &str, created: Option<&str>) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "net.liqo.io/v1alpha1", "kind": "NetworkConfig",
            "metadata": {"name": name, "creationTimestamp": created},
        }))
        .unwrap()
    }

    #[test]
    fn of_several_copies_the_oldest_is_used() {
        use kube::ResourceExt;
        let mut v = vec![
            o("c", Some("2026-11-23T08:02:00Z")),
            o("b", Some("2026-11-23T08:01:00Z")),
            o("a", Some("2026-11-23T08:01:00Z")),
        ];
        assert_eq!(super::oldest(&mut v).unwrap().name_any(), "a");
        assert!(super::oldest(&mut Vec::new()).is_none());
    }
}
