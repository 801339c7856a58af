//! The URL at which peers reach this cluster's auth service: `https://host[:port]` (the port
//! omitted when 443), from the overrides first, else from Service `liqo-auth`: a LoadBalancer's
//! first ingress (hostname, else IP) and the Service's port, or a NodePort and the InternalIP
//! of a node that is not a virtual node (upstream `GetHomeAuthURL`). [`choose`] decides from
//! what was read; [`discover`] reads it.

use control::consts::{labels, objects, values};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client, api::ListParams};

/// Address and port given on the command line, used instead of what the Service says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The host (name or IP) peers use.
    pub address: Option<String>,
    /// The port peers use.
    pub port: Option<u16>,
}

impl Overrides {
    /// The overrides a controller-manager runs with, from its command line
    /// (`--auth-service-address-override`, `--auth-service-port-override`, as `--flag=value` or
    /// `--flag value`): what a tool reading the Deployment (`liqoctl generate peer-command`)
    /// must announce. A port that does not parse counts as none.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Overrides {
        let mut out = Overrides::default();
        let mut it = args.iter().map(AsRef::as_ref).peekable();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v.to_owned())),
                None => (a, None),
            };
            let value = inline.or_else(|| it.peek().map(|v| (*v).to_owned()));
            match flag {
                "--auth-service-address-override" => out.address = value.filter(|v| !v.is_empty()),
                "--auth-service-port-override" => out.port = value.and_then(|v| v.parse().ok()),
                _ => {}
            }
        }
        out
    }
}

/// Why no URL can be made.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// No override and no Service.
    #[error("Service {namespace}/{name} not found and no address/port override given", name = objects::AUTH_SERVICE)]
    NoService {
        /// The Liqo namespace.
        namespace: String,
    },
    /// A LoadBalancer without ingress yet.
    #[error("LoadBalancer Service {name} has no ingress IP or hostname yet", name = objects::AUTH_SERVICE)]
    NoIngress,
    /// The Service has no port.
    #[error("Service {name} has no port", name = objects::AUTH_SERVICE)]
    NoPort,
    /// The Service's port (or node port) is not a TCP port number.
    #[error("Service {name} has port {port}, not in 1..=65535", name = objects::AUTH_SERVICE)]
    BadPort {
        /// The value.
        port: i32,
    },
    /// A NodePort Service without a node port allocated.
    #[error("NodePort Service {name} has no nodePort", name = objects::AUTH_SERVICE)]
    NoNodePort,
    /// No node with an InternalIP.
    #[error("no (non-virtual) node with an InternalIP to reach NodePort Service {name}", name = objects::AUTH_SERVICE)]
    NoNode,
    /// A Service type that cannot be reached from outside.
    #[error("Service {name} has type {kind}: expose it as LoadBalancer or NodePort, or give the address and port overrides", name = objects::AUTH_SERVICE)]
    Unreachable {
        /// Its type.
        kind: String,
    },
    /// A call to the apiserver failed.
    #[error("reading {what}")]
    Kube {
        /// What.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// The URL of `host` and `port`, as upstream writes it.
pub fn format_url(host: &str, port: u16) -> String {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]") // an IPv6 address
    } else {
        host.to_owned()
    };
    if port == 443 {
        format!("https://{host}")
    } else {
        format!("https://{host}:{port}")
    }
}

fn node_ip(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP" && !a.address.is_empty())
        .map(|a| a.address.as_str())
}

fn is_virtual(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::NODE_TYPE))
        .is_some_and(|t| t == values::VIRTUAL_NODE)
}

/// The URL from the overrides, the Service (if it exists) and the nodes; `ns` only names the
/// namespace in errors.
pub fn choose(
    overrides: &Overrides,
    service: Option<&Service>,
    nodes: &[Node],
    ns: &str,
) -> Result<String, UrlError> {
    if let (Some(address), Some(port)) = (&overrides.address, overrides.port) {
        return Ok(format_url(address, port));
    }
    let service = service.ok_or_else(|| UrlError::NoService {
        namespace: ns.to_owned(),
    })?;
    let spec = service.spec.as_ref();
    let kind = spec.and_then(|s| s.type_.as_deref()).unwrap_or("ClusterIP");
    let first_port = spec
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .ok_or(UrlError::NoPort)?;
    let (host, port) = match kind {
        "LoadBalancer" => {
            let host = match &overrides.address {
                Some(a) => a.clone(),
                None => {
                    let ingress = service
                        .status
                        .as_ref()
                        .and_then(|s| s.load_balancer.as_ref())
                        .and_then(|lb| lb.ingress.as_ref())
                        .and_then(|i| i.first())
                        .ok_or(UrlError::NoIngress)?;
                    ingress
                        .hostname
                        .clone()
                        .filter(|h| !h.is_empty())
                        .or_else(|| ingress.ip.clone().filter(|i| !i.is_empty()))
                        .ok_or(UrlError::NoIngress)?
                }
            };
            (host, first_port.port)
        }
        "NodePort" => {
            let host = match &overrides.address {
                Some(a) => a.clone(),
                None => nodes
                    .iter()
                    .filter(|n| !is_virtual(n))
                    .find_map(node_ip)
                    .ok_or(UrlError::NoNode)?
                    .to_owned(),
            };
            (host, first_port.node_port.ok_or(UrlError::NoNodePort)?)
        }
        other => {
            return Err(UrlError::Unreachable {
                kind: other.to_owned(),
            });
        }
    };
    let port = match overrides.port {
        Some(p) => p,
        None => u16::try_from(port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or(UrlError::BadPort { port })?,
    };
    Ok(format_url(&host, port))
}

/// The auth URL of this cluster: reads Service `liqo-auth` in `ns` (and the nodes, for a
/// NodePort) unless both overrides are given.
pub async fn discover(
    client: &Client,
    ns: &str,
    overrides: &Overrides,
) -> Result<String, UrlError> {
    if overrides.address.is_some() && overrides.port.is_some() {
        return choose(overrides, None, &[], ns);
    }
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let service = services
        .get_opt(objects::AUTH_SERVICE)
        .await
        .map_err(|source| UrlError::Kube {
            what: format!("Service {ns}/{}", objects::AUTH_SERVICE),
            source,
        })?;
    let is_node_port = service
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("NodePort");
    let nodes = if is_node_port && overrides.address.is_none() {
        Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|source| UrlError::Kube {
                what: "nodes".into(),
                source,
            })?
            .items
    } else {
        Vec::new()
    };
    choose(overrides, service.as_ref(), &nodes, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_read_from_a_command_line() {
        let o = Overrides::from_args(&[
            "--namespace=liqo",
            "--auth-service-address-override=auth.example",
            "--auth-service-port-override",
            "31443",
        ]);
        assert_eq!(
            o,
            Overrides {
                address: Some("auth.example".into()),
                port: Some(31443)
            }
        );
        assert_eq!(Overrides::from_args(&["--x"]), Overrides::default());
        assert_eq!(
            Overrides::from_args(&["--auth-service-port-override=http"]),
            Overrides::default()
        );
    }

    fn service(
        kind: &str,
        port: i32,
        node_port: Option<i32>,
        ingress: serde_json::Value,
    ) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-auth", "namespace": "liqo"},
            "spec": {"type": kind, "ports": [{"port": port, "nodePort": node_port}]},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
        .unwrap()
    }

    fn node(name: &str, ip: &str, virtual_node: bool) -> Node {
        let labels = if virtual_node {
            serde_json::json!({"liqo.io/type": "virtual-node"})
        } else {
            serde_json::json!({})
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": ip}]},
        }))
        .unwrap()
    }

    fn none() -> Overrides {
        Overrides::default()
    }

    #[test]
    fn overrides_win_and_443_is_omitted() {
        let o = Overrides {
            address: Some("auth.example.com".into()),
            port: Some(443),
        };
        assert_eq!(
            choose(&o, None, &[], "liqo").unwrap(),
            "https://auth.example.com"
        );
        let o = Overrides {
            address: Some("10.0.0.1".into()),
            port: Some(31443),
        };
        let svc = service(
            "LoadBalancer",
            1,
            None,
            serde_json::json!([{"ip": "1.2.3.4"}]),
        );
        assert_eq!(
            choose(&o, Some(&svc), &[], "liqo").unwrap(),
            "https://10.0.0.1:31443"
        );
        assert_eq!(format_url("fd00::1", 8443), "https://[fd00::1]:8443");
    }

    #[test]
    fn load_balancer_hostname_then_ip_and_the_service_port() {
        let svc = service(
            "LoadBalancer",
            40123,
            Some(31000),
            serde_json::json!([{"ip": "127.0.0.1"}]),
        );
        assert_eq!(
            choose(&none(), Some(&svc), &[], "liqo").unwrap(),
            "https://127.0.0.1:40123"
        );
        let svc = service(
            "LoadBalancer",
            443,
            None,
            serde_json::json!([{"ip": "1.2.3.4", "hostname": "lb.example"}]),
        );
        assert_eq!(
            choose(&none(), Some(&svc), &[], "liqo").unwrap(),
            "https://lb.example"
        );
        let only_port = Overrides {
            address: None,
            port: Some(9),
        };
        assert_eq!(
            choose(&only_port, Some(&svc), &[], "liqo").unwrap(),
            "https://lb.example:9"
        );
        let pending = service("LoadBalancer", 443, None, serde_json::json!([]));
        assert!(matches!(
            choose(&none(), Some(&pending), &[], "liqo"),
            Err(UrlError::NoIngress)
        ));
    }

    #[test]
    fn node_port_uses_a_real_node_internal_ip() {
        let svc = service("NodePort", 443, Some(30443), serde_json::Value::Null);
        let nodes = [
            node("liqo-rome", "10.9.9.9", true),
            node("n1", "172.18.0.2", false),
        ];
        assert_eq!(
            choose(&none(), Some(&svc), &nodes, "liqo").unwrap(),
            "https://172.18.0.2:30443"
        );
        assert!(matches!(
            choose(&none(), Some(&svc), &nodes[..1], "liqo"),
            Err(UrlError::NoNode)
        ));
    }

    #[test]
    fn errors_name_what_is_missing() {
        let e = choose(&none(), None, &[], "liqo").unwrap_err().to_string();
        assert!(e.contains("liqo/liqo-auth not found"), "{e}");
        let svc = service("ClusterIP", 443, None, serde_json::Value::Null);
        let e = choose(&none(), Some(&svc), &[], "liqo")
            .unwrap_err()
            .to_string();
        assert!(e.contains("type ClusterIP"), "{e}");
        for bad in [70000, 0, -1] {
            let svc = service(
                "LoadBalancer",
                bad,
                None,
                serde_json::json!([{"ip": "1.2.3.4"}]),
            );
            let e = choose(&none(), Some(&svc), &[], "liqo")
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("port {bad}, not in")), "{e}");
        }
    }
}
