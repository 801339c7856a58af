//! Services: type, selector, ports and the traffic settings are copied; the addresses are the
//! provider's (its own ClusterIP and load-balancer IP; a headless Service stays headless);
//! `nodePort`s are the provider's too unless `liqo.io/force-remote-node-port=true`.
//! `default/kubernetes` is never reflected (every cluster has its own).

use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};
use liqo_types::FieldError;

use super::{Ctx, Inputs, Kind, Reflect, Skip, meta};
use crate::consts::reflection::FORCE_REMOTE_NODE_PORT;

/// A headless Service's `clusterIP`.
pub const HEADLESS: &str = "None";

impl Reflect for Service {
    const KIND: Kind = Kind::Service;

    fn skip(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Option<Skip> {
        (ctx.local_namespace == "default" && local.metadata.name.as_deref() == Some("kubernetes"))
            .then_some(Skip::Excluded("the API server's own Service"))
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        let keep_node_ports = meta::flag(&local.metadata, FORCE_REMOTE_NODE_PORT)?;
        let s = local.spec.clone().unwrap_or_default();
        let headless = s.cluster_ip.as_deref() == Some(HEADLESS);
        let ports = s.ports.map(|ports| {
            ports
                .into_iter()
                .map(|p| ServicePort {
                    name: p.name,
                    port: p.port,
                    target_port: p.target_port,
                    protocol: p.protocol,
                    app_protocol: p.app_protocol,
                    node_port: p.node_port.filter(|_| keep_node_ports),
                })
                .collect()
        });
        let spec = ServiceSpec {
            type_: s.type_,
            selector: s.selector,
            ports,
            cluster_ip: headless.then(|| HEADLESS.to_owned()),
            cluster_ips: headless.then(|| vec![HEADLESS.to_owned()]),
            external_name: s.external_name,
            allocate_load_balancer_node_ports: s.allocate_load_balancer_node_ports,
            external_traffic_policy: s.external_traffic_policy,
            internal_traffic_policy: s.internal_traffic_policy,
            ip_family_policy: s.ip_family_policy,
            load_balancer_class: s.load_balancer_class,
            load_balancer_source_ranges: s.load_balancer_source_ranges,
            publish_not_ready_addresses: s.publish_not_ready_addresses,
            session_affinity: s.session_affinity,
            session_affinity_config: s.session_affinity_config,
            ..ServiceSpec::default()
        };
        Ok(Service {
            metadata: meta::remote(&local.metadata, name, ctx, []),
            spec: Some(spec),
            status: None,
        })
    }

    fn same_content(desired: &Self, actual: &Self) -> bool {
        let ports = |s: &Service| {
            s.spec
                .as_ref()
                .and_then(|s| s.ports.clone())
                .unwrap_or_default()
        };
        let (d, a) = (ports(desired), ports(actual));
        d.len() == a.len()
            && d.iter().zip(&a).all(|(d, a)| {
                d.name.as_deref().unwrap_or_default() == a.name.as_deref().unwrap_or_default()
                    && d.port == a.port
                    && d.target_port.clone().unwrap_or(IntOrString::Int(d.port))
                        == a.target_port.clone().unwrap_or(IntOrString::Int(a.port))
                    && d.protocol.as_deref().unwrap_or("TCP") == a.protocol.as_deref().unwrap_or("TCP")
                    && d.app_protocol == a.app_protocol
                    // The provider's own nodePort stands unless ours is forced.
                    && (d.node_port.is_none() || d.node_port == a.node_port)
            })
    }

    fn exact() -> &'static [&'static [&'static str]] {
        &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["spec", "selector"],
            // Optional fields the forge owns and the provider never fills: removed locally,
            // they must go from the copy too.
            &["spec", "publishNotReadyAddresses"],
            &["spec", "loadBalancerSourceRanges"],
            &["spec", "sessionAffinityConfig"],
            &["spec", "externalName"],
            &["spec", "loadBalancerClass"],
        ]
    }
}
