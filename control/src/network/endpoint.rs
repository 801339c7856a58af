//! Where peers reach our gateway: the override flags (`--gateway-address-override`,
//! `--gateway-port-override`) first, else the Service in the Liqo namespace labelled
//! `net.liqo.io/gateway=true`: a LoadBalancer's first ingress IP and the Service's port, or a
//! NodePort and the node IP the gateway operator writes in annotation
//! `net.liqo.io/gatewayNodeIP`. A LoadBalancer's ingress hostname is used when it has no IP
//! (the gateway operator of the peer resolves it).

use std::{fmt, net::IpAddr};

/// A gateway endpoint: an IP address or a DNS name, and a UDP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The IP address or DNS name (`endpointIP`).
    pub host: String,
    /// The port (`backend_config.port`).
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

use crate::consts::net;
use k8s_openapi::api::core::v1::Service;

/// The override flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--gateway-address-override`.
    pub address: Option<IpAddr>,
    /// `--gateway-port-override`.
    pub port: Option<u16>,
}

/// Why no endpoint can be announced (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// No overrides and no Service.
    #[error(
        "no Service labelled {l}=true in the Liqo namespace and no --gateway-address-override/--gateway-port-override",
        l = net::GATEWAY_SERVICE_LABEL
    )]
    NoService,
    /// More than one Service.
    #[error("{0} Services labelled {label}=true: keep one", label = net::GATEWAY_SERVICE_LABEL)]
    Ambiguous(usize),
    /// A LoadBalancer without an ingress IP or hostname yet.
    #[error("gateway Service {0} has no LoadBalancer ingress IP or hostname yet")]
    NoIngress(String),
    /// A NodePort without the node annotation (the gateway operator writes it).
    #[error(
        "gateway Service {0} is a NodePort without annotation {a} (an IP address)",
        a = net::GATEWAY_NODE_IP_ANNOTATION
    )]
    NoNodeIp(String),
    /// No (node) port.
    #[error("gateway Service {0} has no usable port")]
    NoPort(String),
    /// A type peers cannot reach.
    #[error(
        "gateway Service {name} has type {kind}: expose it as LoadBalancer or NodePort, or give the overrides"
    )]
    Unreachable {
        /// The Service.
        name: String,
        /// Its type.
        kind: String,
    },
}

fn port(p: Option<i32>) -> Option<u16> {
    p.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0)
}

/// The endpoint from the overrides and the gateway Services found (an override wins per part).
pub fn choose(o: Overrides, services: &[Service]) -> Result<Endpoint, EndpointError> {
    if let (Some(a), Some(p)) = (o.address, o.port) {
        return Ok(Endpoint {
            host: a.to_string(),
            port: p,
        });
    }
    let service = match services {
        [] => return Err(EndpointError::NoService),
        [s] => s,
        more => return Err(EndpointError::Ambiguous(more.len())),
    };
    let name = service.metadata.name.clone().unwrap_or_default();
    let spec = service.spec.clone().unwrap_or_default();
    let first = spec.ports.as_ref().and_then(|p| p.first());
    let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
    let (ip, p) = match kind {
        "LoadBalancer" => {
            let ingress = service
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.clone())
                .unwrap_or_default();
            let ip = ingress
                .iter()
                .find_map(|i| i.ip.as_deref()?.parse::<IpAddr>().ok())
                .map(|ip| ip.to_string());
            let host = ip.or_else(|| {
                ingress
                    .iter()
                    .find_map(|i| i.hostname.clone().filter(|h| !h.is_empty()))
            });
            (host, first.and_then(|p| port(Some(p.port))))
        }
        "NodePort" => {
            let node = service
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(net::GATEWAY_NODE_IP_ANNOTATION))
                .and_then(|a| a.parse::<IpAddr>().ok())
                .map(|ip| ip.to_string());
            (node, first.and_then(|p| port(p.node_port)))
        }
        other => {
            return Err(EndpointError::Unreachable {
                name,
                kind: other.to_owned(),
            });
        }
    };
    let host = match (o.address, ip) {
        (Some(a), _) => a.to_string(),
        (None, Some(h)) => h,
        (None, None) if kind == "LoadBalancer" => return Err(EndpointError::NoIngress(name)),
        (None, None) => return Err(EndpointError::NoNodeIp(name)),
    };
    let port = o.port.or(p).ok_or(EndpointError::NoPort(name))?;
    Ok(Endpoint { host, port })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    fn lb(ip: Option<&str>) -> Service {
        let ingress: Vec<_> = ip
            .into_iter()
            .map(|i| match i.parse::<IpAddr>() {
                Ok(_) => json!({"ip": i}),
                Err(_) => json!({"hostname": i}),
            })
            .collect();
        svc(json!({
            "metadata": {"name": "liqo-gateway"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 5871, "nodePort": 31000}]},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
    }

    fn node_port(annotation: Option<&str>) -> Service {
        let mut s = svc(json!({
            "metadata": {"name": "liqo-gateway"},
            "spec": {"type": "NodePort", "ports": [{"port": 5871, "nodePort": 31000}]},
        }));
        if let Some(a) = annotation {
            s.metadata.annotations =
                Some([(net::GATEWAY_NODE_IP_ANNOTATION.to_owned(), a.to_owned())].into());
        }
        s
    }

    #[test]
    fn overrides_win_whole_or_per_part() {
        let both = Overrides {
            address: Some("127.0.0.1".parse().unwrap()),
            port: Some(51820),
        };
        assert_eq!(choose(both, &[]).unwrap().to_string(), "127.0.0.1:51820");
        let addr = Overrides {
            address: Some("198.51.100.1".parse().unwrap()),
            port: None,
        };
        assert_eq!(
            choose(addr, &[lb(None)]).unwrap().to_string(),
            "198.51.100.1:5871"
        );
        assert_eq!(
            choose(Overrides::default(), &[]).unwrap_err(),
            EndpointError::NoService
        );
    }

    #[test]
    fn a_load_balancer_gives_its_ingress_ip_and_port() {
        let o = Overrides::default();
        assert_eq!(
            choose(o, &[lb(Some("203.0.113.9"))]).unwrap().to_string(),
            "203.0.113.9:5871"
        );
        assert_eq!(
            choose(o, &[lb(None)]).unwrap_err().to_string(),
            "gateway Service liqo-gateway has no LoadBalancer ingress IP or hostname yet"
        );
        // A cloud's load balancer known by name only.
        assert_eq!(
            choose(o, &[lb(Some("gw.elb.example.com"))])
                .unwrap()
                .to_string(),
            "gw.elb.example.com:5871"
        );
        assert_eq!(
            choose(o, &[lb(None), lb(None)]).unwrap_err(),
            EndpointError::Ambiguous(2)
        );
    }

    #[test]
    fn a_node_port_gives_the_annotated_node_ip() {
        let o = Overrides::default();
        assert_eq!(
            choose(o, &[node_port(Some("10.0.0.4"))])
                .unwrap()
                .to_string(),
            "10.0.0.4:31000"
        );
        assert!(matches!(
            choose(o, &[node_port(None)]),
            Err(EndpointError::NoNodeIp(_))
        ));
        assert!(matches!(
            choose(o, &[node_port(Some("not-an-ip"))]),
            Err(EndpointError::NoNodeIp(_))
        ));
        let cluster_ip = svc(json!({"metadata": {"name": "g"}, "spec": {"ports": [{"port": 1}]}}));
        assert!(matches!(
            choose(o, &[cluster_ip]),
            Err(EndpointError::Unreachable { .. })
        ));
    }
}
