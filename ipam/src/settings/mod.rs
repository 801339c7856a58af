//! The settings of `liqo-ipam serve` (its flags, or its config file with the same names in
//! camelCase): their defaults, flags over the file, the IPAM configuration they ask for, and
//! which of them a running service takes from a changed file.
//!
//! Pools (`pools`, `additionalPools`) and `reservedSubnets` apply while running, with the checks
//! of the runtime changes (a pool or reserved subnet holding a peer's range is refused, naming
//! the peer); every other field needs a restart, and a file changing one is refused naming it.
//! Where the state is kept (`store`: a file, or a ConfigMap) is in [`store`].

use std::{net::SocketAddr, path::PathBuf};

use ipnet::Ipv4Net;
use liqo_types::{
    Cidr,
    field::{FieldError, bad},
};
use serde::Deserialize;

mod store;

pub use store::{StoreChoice, StoreKind, configmap_name, namespace_name};

/// `--tls-secret`'s value parser: a valid Secret name.
pub fn secret_name(s: &str) -> Result<String, String> {
    check_secret_name(s).map(|()| s.to_owned())
}

use crate::{
    Config, check_cidr,
    service::{
        Overrides,
        server::Security,
        tls_secret::{TlsSecret, check_secret_name},
    },
    state::{DEFAULT_EXTERNAL_CIDR, DEFAULT_POOLS},
    store::configmap::{DEFAULT_NAMESPACE, check_namespace},
};

/// The gRPC address when none is given: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6000";
/// The metrics address when none is given.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9106";
/// The state file when none is given.
pub const DEFAULT_STATE: &str = "/var/lib/liqo-ipam/state.json";
/// The service CIDR when none is given.
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

/// The settings; `None` is "not given".
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    /// gRPC listen address.
    pub listen: Option<SocketAddr>,
    /// Prometheus metrics (and `/status`) listen address.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the state is kept (default: a file).
    pub store: Option<StoreKind>,
    /// State file (`store: file`).
    pub state: Option<PathBuf>,
    /// The ConfigMap of the state (`store: configmap`).
    pub state_configmap: Option<String>,
    /// The namespace of that ConfigMap and of the TLS Secret.
    pub namespace: Option<String>,
    /// Local pod CIDR (required).
    pub pod_cidr: Option<Cidr>,
    /// Local service CIDR.
    pub service_cidr: Option<Cidr>,
    /// Requested local external CIDR.
    pub external_cidr: Option<Cidr>,
    /// Pools, replacing the defaults.
    pub pools: Option<Vec<Cidr>>,
    /// Pools added to `pools` (or to the defaults).
    pub additional_pools: Option<Vec<Cidr>>,
    /// Subnets never handed out.
    pub reserved_subnets: Option<Vec<Cidr>>,
    /// TLS certificate chain.
    pub tls_cert_file: Option<PathBuf>,
    /// TLS private key.
    pub tls_key_file: Option<PathBuf>,
    /// Bearer token file.
    pub token_file: Option<PathBuf>,
    /// Client CA (mutual TLS).
    pub client_ca_file: Option<PathBuf>,
    /// The Secret liqo-ipam keeps its certificate and token in (instead of the three files).
    pub tls_secret: Option<String>,
    /// Names of that certificate besides the Service's.
    pub tls_names: Option<Vec<String>>,
}

/// The pools and reserved subnets a changed file asks a running service to set (`None`: keep).
pub type Change = Overrides;

fn literal<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().expect("a valid literal")
}

/// Checks each CIDR of a list for the IPAM (/1 to /30, no element overlapping an earlier
/// one), naming `field[i]`.
fn nets(field: &str, list: &[Cidr]) -> Result<Vec<Ipv4Net>, FieldError> {
    let mut out: Vec<Ipv4Net> = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let n = check_cidr(c.net()).map_err(|e| bad(format!("{field}[{i}]"), e.to_string()))?;
        if let Some((j, o)) = out
            .iter()
            .enumerate()
            .find(|(_, o)| o.contains(&n) || n.contains(*o))
        {
            let how = if *o == n { "repeats" } else { "overlaps" };
            return Err(bad(
                format!("{field}[{i}]"),
                format!("{n} {how} {field}[{j}] {o}"),
            ));
        }
        out.push(n);
    }
    Ok(out)
}

fn net(field: &str, c: Option<Cidr>, default: &str) -> Result<Ipv4Net, FieldError> {
    let c = c.unwrap_or_else(|| literal(default));
    check_cidr(c.net()).map_err(|e| bad(field, e.to_string()))
}

impl Settings {
    /// Decodes a config file; every error names its field.
    pub fn from_yaml(text: &str) -> Result<Settings, FieldError> {
        liqo_types::field::yaml(text)
    }

    /// These settings (the flags) over `file`: a field given here wins.
    pub fn over(self, file: Settings) -> Settings {
        Settings {
            listen: self.listen.or(file.listen),
            metrics_listen: self.metrics_listen.or(file.metrics_listen),
            store: self.store.or(file.store),
            state: self.state.or(file.state),
            state_configmap: self.state_configmap.or(file.state_configmap),
            namespace: self.namespace.or(file.namespace),
            pod_cidr: self.pod_cidr.or(file.pod_cidr),
            service_cidr: self.service_cidr.or(file.service_cidr),
            external_cidr: self.external_cidr.or(file.external_cidr),
            pools: self.pools.or(file.pools),
            additional_pools: self.additional_pools.or(file.additional_pools),
            reserved_subnets: self.reserved_subnets.or(file.reserved_subnets),
            tls_cert_file: self.tls_cert_file.or(file.tls_cert_file),
            tls_key_file: self.tls_key_file.or(file.tls_key_file),
            token_file: self.token_file.or(file.token_file),
            client_ca_file: self.client_ca_file.or(file.client_ca_file),
            tls_secret: self.tls_secret.or(file.tls_secret),
            tls_names: self.tls_names.or(file.tls_names),
        }
    }

    /// The gRPC address (default [`DEFAULT_LISTEN`]).
    pub fn listen(&self) -> SocketAddr {
        self.listen.unwrap_or_else(|| literal(DEFAULT_LISTEN))
    }

    /// The metrics address (default [`DEFAULT_METRICS_LISTEN`]).
    pub fn metrics_listen(&self) -> SocketAddr {
        self.metrics_listen
            .unwrap_or_else(|| literal(DEFAULT_METRICS_LISTEN))
    }

    /// The store's settings as given.
    fn store_given(&self) -> store::Given<'_> {
        store::Given {
            kind: self.store,
            state: self.state.as_deref(),
            configmap: self.state_configmap.as_deref(),
            namespace: self.namespace.as_deref(),
        }
    }

    /// Where the state is kept: the file (default [`DEFAULT_STATE`]), or the ConfigMap
    /// (default `liqo-ipam-state` in `liqo`) with its name and namespace checked, an error
    /// naming the field, its flag and the value.
    pub fn store(&self) -> Result<StoreChoice, FieldError> {
        self.store_given().choice(self.state())
    }

    /// Settings given that the chosen store does not use (each is ignored), by flag
    /// (`--namespace` is the TLS Secret's too).
    pub fn unused_store_flags(&self) -> Vec<&'static str> {
        let mut flags = self.store_given().unused_flags();
        if self.tls_secret.is_some() {
            flags.retain(|f| *f != "--namespace");
        }
        flags
    }

    /// The state file (default [`DEFAULT_STATE`]).
    pub fn state(&self) -> PathBuf {
        self.state.clone().unwrap_or_else(|| DEFAULT_STATE.into())
    }

    /// The server's security options; the TLS Secret's name, namespace and extra names
    /// checked, an error naming the field, its flag and the value.
    pub fn security(&self) -> Result<Security, FieldError> {
        Ok(Security {
            tls_cert_file: self.tls_cert_file.clone(),
            tls_key_file: self.tls_key_file.clone(),
            token_file: self.token_file.clone(),
            client_ca_file: self.client_ca_file.clone(),
            tls_secret: self.tls_secret()?,
        })
    }

    /// The TLS Secret (`--tls-secret` in `--namespace`, default `liqo`), if given.
    fn tls_secret(&self) -> Result<Option<TlsSecret>, FieldError> {
        let Some(name) = &self.tls_secret else {
            return match self.tls_names {
                Some(_) => Err(bad("tlsNames", "needs tlsSecret (--tls-secret)")),
                None => Ok(None),
            };
        };
        check_secret_name(name)
            .map_err(|p| bad("tlsSecret", format!("--tls-secret {name:?}: {p}")))?;
        let namespace = self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        check_namespace(namespace)
            .map_err(|p| bad("namespace", format!("--namespace {namespace:?}: {p}")))?;
        let mut extra_names = Vec::new();
        for (i, n) in self.tls_names.iter().flatten().enumerate() {
            if n.parse::<std::net::IpAddr>().is_err() && !liqo_types::dns::is_dns_name(n) {
                return Err(bad(
                    format!("tlsNames[{i}]"),
                    format!("--tls-names {n:?}: neither a DNS name nor an IP address"),
                ));
            }
            extra_names.push(n.clone());
        }
        Ok(Some(TlsSecret {
            namespace: namespace.to_owned(),
            name: name.clone(),
            extra_names,
        }))
    }

    /// The pools asked for: `pools` (or the defaults) plus `additionalPools`; `None` when
    /// neither is given (the stored pools are kept).
    pub fn pools(&self) -> Result<Option<Vec<Ipv4Net>>, FieldError> {
        let base = self
            .pools
            .as_deref()
            .map(|p| nets("pools", p))
            .transpose()?;
        let extra = self
            .additional_pools
            .as_deref()
            .map(|p| nets("additionalPools", p))
            .transpose()?;
        if let Some(extra) = &extra {
            let base = base
                .clone()
                .unwrap_or_else(|| DEFAULT_POOLS.map(literal).to_vec());
            for (i, n) in extra.iter().enumerate() {
                if let Some(o) = base.iter().find(|o| o.contains(n) || n.contains(*o)) {
                    return Err(bad(
                        format!("additionalPools[{i}]"),
                        format!("{n} overlaps pool {o}"),
                    ));
                }
            }
        }
        Ok(match (base, extra) {
            (None, None) => None,
            (base, extra) => {
                let mut pools = base.unwrap_or_else(|| DEFAULT_POOLS.map(literal).to_vec());
                pools.extend(extra.unwrap_or_default());
                Some(pools)
            }
        })
    }

    /// The reserved subnets asked for; `None` when not given (the stored ones are kept).
    pub fn reserved(&self) -> Result<Option<Vec<Ipv4Net>>, FieldError> {
        self.reserved_subnets
            .as_deref()
            .map(|r| nets("reservedSubnets", r))
            .transpose()
    }

    /// The IPAM configuration for a fresh state, and what replaces the stored pools and
    /// reserved subnets of a restored one.
    pub fn config(&self) -> Result<(Config, Overrides), FieldError> {
        let pod = self
            .pod_cidr
            .ok_or_else(|| bad("podCidr", "required (--pod-cidr)"))?;
        let mut config = Config::new(
            check_cidr(pod.net()).map_err(|e| bad("podCidr", e.to_string()))?,
            net("serviceCidr", self.service_cidr, DEFAULT_SERVICE_CIDR)?,
        );
        config.external_cidr = net("externalCidr", self.external_cidr, DEFAULT_EXTERNAL_CIDR)?;
        let overrides = Overrides {
            pools: self.pools()?,
            reserved: self.reserved()?,
        };
        if let Some(p) = &overrides.pools {
            config.pools.clone_from(p);
        }
        if let Some(r) = &overrides.reserved {
            config.reserved.clone_from(r);
        }
        Ok((config, overrides))
    }

    /// What a running service started with `running` must change for these settings: the
    /// pools and reserved subnets that differ (`None` where they do not; a field no longer
    /// given keeps what runs). A change to any other field is refused naming it.
    pub fn change_from(&self, running: &Settings) -> Result<Change, FieldError> {
        let restart = |field: &str, running: String| {
            bad(
                field,
                format!("changes only on a restart (running with {running})"),
            )
        };
        if self.listen() != running.listen() {
            return Err(restart("listen", running.listen().to_string()));
        }
        if self.metrics_listen() != running.metrics_listen() {
            return Err(restart(
                "metricsListen",
                running.metrics_listen().to_string(),
            ));
        }
        if self.state() != running.state() {
            return Err(restart("state", running.state().display().to_string()));
        }
        self.store_given().change_from(&running.store_given())?;
        let effective = |c: Option<Cidr>, default: &str| c.unwrap_or_else(|| literal(default));
        for (field, new, old) in [
            (
                "podCidr",
                self.pod_cidr.map(|c| c.to_string()),
                running.pod_cidr.map(|c| c.to_string()),
            ),
            (
                "serviceCidr",
                Some(effective(self.service_cidr, DEFAULT_SERVICE_CIDR).to_string()),
                Some(effective(running.service_cidr, DEFAULT_SERVICE_CIDR).to_string()),
            ),
            (
                "externalCidr",
                Some(effective(self.external_cidr, DEFAULT_EXTERNAL_CIDR).to_string()),
                Some(effective(running.external_cidr, DEFAULT_EXTERNAL_CIDR).to_string()),
            ),
        ] {
            if new != old {
                return Err(restart(field, old.unwrap_or_else(|| "none".into())));
            }
        }
        if self.tls_secret != running.tls_secret {
            return Err(restart(
                "tlsSecret",
                running.tls_secret.clone().unwrap_or_else(|| "none".into()),
            ));
        }
        if self.tls_names != running.tls_names {
            let old = running.tls_names.as_ref().map(|n| n.join(","));
            return Err(restart("tlsNames", old.unwrap_or_else(|| "none".into())));
        }
        for (field, new, old) in [
            ("tlsCertFile", &self.tls_cert_file, &running.tls_cert_file),
            ("tlsKeyFile", &self.tls_key_file, &running.tls_key_file),
            ("tokenFile", &self.token_file, &running.token_file),
            (
                "clientCaFile",
                &self.client_ca_file,
                &running.client_ca_file,
            ),
        ] {
            if new != old {
                let old = old
                    .as_ref()
                    .map_or_else(|| "none".into(), |p| p.display().to_string());
                return Err(restart(field, old));
            }
        }
        let (pools, old_pools) = (self.pools()?, running.pools()?);
        let (reserved, old_reserved) = (self.reserved()?, running.reserved()?);
        Ok(Change {
            pools: pools.filter(|p| Some(p) != old_pools.as_ref()),
            reserved: reserved.filter(|r| Some(r) != old_reserved.as_ref()),
        })
    }
}

/// The field a refused runtime change is reported on: the list that changed (or, when both
/// did, the one the IPAM's error is about), and in it the element the error names.
pub fn refused_field(change: &Change, new: &Settings, e: &crate::Error) -> String {
    let list = refused_list(change, new, e);
    let net = match e {
        crate::Error::InUse { net, .. } | crate::Error::NotConfigured { net, .. } => Some(*net),
        crate::Error::PoolOverlap(a, _) => Some(*a),
        _ => None,
    };
    let items = match list {
        "pools" => new.pools.as_deref(),
        "additionalPools" => new.additional_pools.as_deref(),
        _ => new.reserved_subnets.as_deref(),
    };
    match net.and_then(|n| items?.iter().position(|c| c.net() == n)) {
        Some(i) => format!("{list}[{i}]"),
        None => list.to_owned(),
    }
}

fn refused_list(change: &Change, new: &Settings, e: &crate::Error) -> &'static str {
    let pools = if new.pools.is_some() {
        "pools"
    } else {
        "additionalPools"
    };
    match (&change.pools, &change.reserved) {
        (Some(_), None) => pools,
        (None, Some(_)) => "reservedSubnets",
        _ => match e {
            crate::Error::InUse {
                what: "reserved subnet",
                ..
            }
            | crate::Error::NotConfigured {
                what: "reserved subnet",
                ..
            } => "reservedSubnets",
            _ => pools,
        },
    }
}

#[cfg(test)]
mod tests;
