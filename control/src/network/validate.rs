//! The checks on a peer's NetworkConfig, made on the object as it reached us (raw JSON: a value the
//! CRD's schema lets through but our types refuse, say a CIDR with host bits, must be refused
//! naming its field, not break the watch). What is refused: a spec naming another cluster, a CIDR
//! that is not an IPv4 network without host bits of length /1 to /30, a pod CIDR overlapping the
//! same spec's external CIDR, a backend other than WireGuard, a key that is not a WireGuard key, a
//! port outside 1..=65535, an endpoint that is neither a unicast IP address nor a DNS name. A pod
//! or external CIDR equal to ours or to another peer's is normal: the IPAM remaps it.

use std::net::IpAddr;

use crate::consts::net;
use liqo_types::view::Ranges;
use liqo_types::{Cidr, ClusterId, FieldError, PublicKey, field::bad};
use serde_json::Value;

use super::endpoint::Endpoint;

/// A peer's NetworkConfig that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The ranges it announces.
    pub announced: Ranges,
    /// Its gateway's key.
    pub public_key: PublicKey,
    /// Its gateway's endpoint.
    pub endpoint: Endpoint,
}

fn text<'a>(spec: &'a Value, path: &[&str], field: &str) -> Result<&'a str, FieldError> {
    let mut v = spec;
    for p in path {
        v = v.get(p).ok_or_else(|| bad(field, "missing"))?;
    }
    v.as_str()
        .ok_or_else(|| bad(field, format!("{v} is not a string")))
}

/// A CIDR field: an IPv4 network without host bits, usable as a range.
fn cidr(spec: &Value, key: &str) -> Result<Cidr, FieldError> {
    let field = format!("spec.{key}");
    let s = text(spec, &[key], &field)?;
    let c: Cidr = s.parse().map_err(|e| bad(&field, format!("{e}")))?;
    c.range().map_err(|e| bad(&field, e.to_string()))
}

/// Checks a peer's NetworkConfig `spec` (as JSON) sent to `local` (our cluster ID).
pub fn peer_config(spec: &Value, local: &ClusterId) -> Result<PeerConfig, FieldError> {
    let id = text(spec, &["cluster", "clusterID"], "spec.cluster.clusterID")?;
    if id != local.as_str() {
        return Err(bad(
            "spec.cluster.clusterID",
            format!("{id:?} is not this cluster ({local})"),
        ));
    }
    let pods = cidr(spec, "podCIDR")?;
    let external = cidr(spec, "externalCIDR")?;
    if pods.overlaps(&external) {
        return Err(bad(
            "spec.externalCIDR",
            format!("{external} overlaps spec.podCIDR {pods}"),
        ));
    }
    let backend = text(spec, &["backendType"], "spec.backendType")?;
    if backend != net::WIREGUARD {
        return Err(bad(
            "spec.backendType",
            format!("{backend:?} is not supported (only {:?})", net::WIREGUARD),
        ));
    }
    let key_field = format!("spec.backend_config.{}", net::PUBLIC_KEY);
    let key = text(spec, &["backend_config", net::PUBLIC_KEY], &key_field)?;
    // The key is public, but a bad value is quoted only by its length.
    let public_key: PublicKey = key.parse().map_err(|_| {
        bad(
            &key_field,
            format!(
                "not a WireGuard key ({} characters; want 44 characters of base64 encoding 32 bytes)",
                key.len()
            ),
        )
    })?;
    let port_field = format!("spec.backend_config.{}", net::PORT);
    let port = text(spec, &["backend_config", net::PORT], &port_field)?;
    let port: u16 = match port.parse() {
        Ok(p) if p > 0 => p,
        _ => {
            return Err(bad(
                &port_field,
                format!("{port:?} is not a port (1-65535)"),
            ));
        }
    };
    let host = text(spec, &["endpointIP"], "spec.endpointIP")?;
    match host.parse::<IpAddr>() {
        Ok(ip) => {
            let unicast = match ip {
                IpAddr::V4(a) => !(a.is_unspecified() || a.is_multicast() || a.is_broadcast()),
                IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast()),
            };
            if !unicast {
                return Err(bad(
                    "spec.endpointIP",
                    format!("{ip} is not a unicast address"),
                ));
            }
        }
        // A name (the peer's load balancer by hostname): its gateway operator resolves it.
        Err(_) if liqo_types::dns::is_dns_name(host) => {}
        Err(_) => {
            return Err(bad(
                "spec.endpointIP",
                format!("{host:?} is neither an IP address nor a DNS name"),
            ));
        }
    }
    Ok(PeerConfig {
        announced: Ranges { pods, external },
        public_key,
        endpoint: Endpoint {
            host: host.to_owned(),
            port,
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEY: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";

    fn spec() -> Value {
        json!({
            "cluster": {"clusterID": "rome-id", "clusterName": "rome"},
            "podCIDR": "10.200.0.0/16",
            "externalCIDR": "10.201.0.0/16",
            "endpointIP": "192.0.2.7",
            "backendType": "wireguard",
            "backend_config": {"publicKey": KEY, "port": "51820"},
        })
    }

    fn check(edit: impl FnOnce(&mut Value)) -> Result<PeerConfig, String> {
        let mut s = spec();
        edit(&mut s);
        peer_config(&s, &"rome-id".parse().unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_good_config_is_read_typed() {
        let p = check(|_| {}).unwrap();
        assert_eq!(p.announced.pods.to_string(), "10.200.0.0/16");
        assert_eq!(p.announced.external.to_string(), "10.201.0.0/16");
        assert_eq!(p.endpoint.to_string(), "192.0.2.7:51820");
        let p = check(|s| s["endpointIP"] = json!("gw.milan.example.com")).unwrap();
        assert_eq!(p.endpoint.to_string(), "gw.milan.example.com:51820");
        assert_eq!(p.public_key.to_string(), KEY);
    }

    type Edit = Box<dyn FnOnce(&mut Value)>;

    #[test]
    fn every_bad_field_is_named() {
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|s| s["podCIDR"] = json!("10.200.0.1/16")),
                "spec.podCIDR: 10.200.0.1/16 has host bits set (did you mean 10.200.0.0/16?)",
            ),
            (
                Box::new(|s| s["externalCIDR"] = json!("fd00::/8")),
                "spec.externalCIDR: \"fd00::/8\" is an IPv6 CIDR; only IPv4 is supported",
            ),
            (
                Box::new(|s| s["podCIDR"] = json!("10.0.0.0/31")),
                "spec.podCIDR: 10.0.0.0/31: a range must be /1 to /30 long",
            ),
            (
                Box::new(|s| s["externalCIDR"] = json!("10.200.128.0/17")),
                "spec.externalCIDR: 10.200.128.0/17 overlaps spec.podCIDR 10.200.0.0/16",
            ),
            (
                Box::new(|s| s["cluster"]["clusterID"] = json!("naples-id")),
                "spec.cluster.clusterID: \"naples-id\" is not this cluster (rome-id)",
            ),
            (
                Box::new(|s| s["backendType"] = json!("ipsec")),
                "spec.backendType: \"ipsec\" is not supported (only \"wireguard\")",
            ),
            (
                Box::new(|s| s["backend_config"]["publicKey"] = json!("abc")),
                "spec.backend_config.publicKey: not a WireGuard key (3 characters",
            ),
            (
                Box::new(|s| s["backend_config"]["port"] = json!("0")),
                "spec.backend_config.port: \"0\" is not a port (1-65535)",
            ),
            (
                Box::new(|s| s["backend_config"]["port"] = json!("70000")),
                "spec.backend_config.port: \"70000\" is not a port",
            ),
            (
                Box::new(|s| {
                    s["backend_config"].as_object_mut().unwrap().remove("port");
                }),
                "spec.backend_config.port: missing",
            ),
            (
                Box::new(|s| s["endpointIP"] = json!("gw_1.example.com")),
                "spec.endpointIP: \"gw_1.example.com\" is neither an IP address nor a DNS name",
            ),
            (
                Box::new(|s| s["endpointIP"] = json!("300.1.1.1")),
                "spec.endpointIP: \"300.1.1.1\" is neither an IP address nor a DNS name",
            ),
            (
                Box::new(|s| s["endpointIP"] = json!("")),
                "spec.endpointIP: \"\" is neither an IP address nor a DNS name",
            ),
            (
                Box::new(|s| s["endpointIP"] = json!("0.0.0.0")),
                "spec.endpointIP: 0.0.0.0 is not a unicast address",
            ),
            (
                Box::new(|s| s["podCIDR"] = json!(7)),
                "spec.podCIDR: 7 is not a string",
            ),
        ];
        for (edit, want) in cases {
            let got = check(edit).unwrap_err();
            assert!(
                got.starts_with(want),
                "{got:?} does not start with {want:?}"
            );
        }
    }

    #[test]
    fn overlapping_other_clusters_is_normal() {
        // The same pod CIDR as ours (and every other peer's): the IPAM remaps it.
        assert!(check(|s| s["podCIDR"] = json!("10.244.0.0/16")).is_ok());
    }
}
