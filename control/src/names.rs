//! The names of the objects the peering makes per remote cluster, built from its identity:
//! [`UniqueName`] (`<cluster name>-<first 3 bytes of sha256(cluster ID) in hex>`), the tenant
//! namespace `liqo-tenant-<UniqueName>`, the remote token Secret `remote-token-<id>`, the
//! virtual node `liqo-<name>`, the RoleBinding `liqo-binding-<ClusterRole>`; and the validated
//! Kubernetes names they are: [`NamespaceName`] (a DNS-1123 label) and [`ObjectName`] (a
//! DNS-1123 subdomain), whose errors name the refused value.
//!
//! Label checks are `liqo_types::id::validate_label` (the tree's one RFC 1123 label check);
//! this module adds the subdomain rule and errors that carry the value.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::{
    api::{ClusterId, ClusterName, InvalidId, discovery::ClusterIdentity, ids},
    consts::objects,
};

/// The longest DNS-1123 label (namespaces, label values).
pub const LABEL_MAX: usize = ids::LABEL_MAX_LEN;
/// The longest DNS-1123 subdomain (most object names).
pub const SUBDOMAIN_MAX: usize = 253;

/// The kind of Kubernetes name a string failed to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A DNS-1123 label: namespaces.
    Label,
    /// A DNS-1123 subdomain: Secrets, nodes, RoleBindings, custom resources.
    Subdomain,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Label => "DNS-1123 label",
            NameKind::Subdomain => "DNS-1123 subdomain",
        })
    }
}

/// What is wrong with a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameProblem {
    /// Empty.
    #[error("is empty")]
    Empty,
    /// Too long.
    #[error("is {len} characters long (at most {max})")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A character other than `a-z`, `0-9`, `-` (and `.` in a subdomain).
    #[error(
        "contains {0:?} (only a-z, 0-9 and '-' are allowed, and '.' between labels of a subdomain)"
    )]
    InvalidChar(char),
    /// A label starts or ends with `-`.
    #[error("starts or ends with '-' (each dot-separated part must start and end with a-z or 0-9)")]
    EdgeDash,
    /// A subdomain with an empty dot-separated part.
    #[error("has an empty part between dots")]
    EmptyPart,
}

/// A string refused as a Kubernetes name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {kind}: {problem}")]
pub struct InvalidName {
    /// The refused string.
    pub value: String,
    /// What it had to be.
    pub kind: NameKind,
    /// Why it is not.
    pub problem: NameProblem,
}

fn label_problem(e: InvalidId, max: usize) -> NameProblem {
    match e {
        InvalidId::Empty => NameProblem::Empty,
        InvalidId::TooLong(len) => NameProblem::TooLong { len, max },
        InvalidId::InvalidChar(c) => NameProblem::InvalidChar(c),
        InvalidId::EdgeDash => NameProblem::EdgeDash,
    }
}

/// Checks a DNS-1123 label (at most 63 of `a-z0-9-`, alphanumeric at both ends).
pub fn validate_label(s: &str) -> Result<(), InvalidName> {
    ids::validate_label(s).map_err(|e| InvalidName {
        value: s.to_owned(),
        kind: NameKind::Label,
        problem: label_problem(e, LABEL_MAX),
    })
}

/// Checks a DNS-1123 subdomain (at most 253 characters; dot-separated labels).
pub fn validate_subdomain(s: &str) -> Result<(), InvalidName> {
    let bad = |problem| InvalidName {
        value: s.to_owned(),
        kind: NameKind::Subdomain,
        problem,
    };
    if s.is_empty() {
        return Err(bad(NameProblem::Empty));
    }
    if s.len() > SUBDOMAIN_MAX {
        return Err(bad(NameProblem::TooLong {
            len: s.len(),
            max: SUBDOMAIN_MAX,
        }));
    }
    for part in s.split('.') {
        match ids::validate_label(part) {
            // Kubernetes limits the whole subdomain, not each part.
            Ok(()) | Err(InvalidId::TooLong(_)) => {}
            Err(InvalidId::Empty) => return Err(bad(NameProblem::EmptyPart)),
            Err(e) => return Err(bad(label_problem(e, LABEL_MAX))),
        }
    }
    Ok(())
}

liqo_types::string_newtype! {
    /// A namespace name (a DNS-1123 label).
    pub struct NamespaceName;
    error = InvalidName;
    check = validate_label;
}

liqo_types::string_newtype! {
    /// An object name (a DNS-1123 subdomain): Secrets, nodes, RoleBindings, Liqo's kinds.
    pub struct ObjectName;
    error = InvalidName;
    check = validate_subdomain;
}

impl ObjectName {
    /// A name built from parts that are valid by construction.
    fn built(s: String) -> Self {
        debug_assert!(validate_subdomain(&s).is_ok(), "{s}");
        Self(s)
    }
}

/// A cluster's name made unique by its ID: `<cluster name>-<hex of the first 3 bytes of
/// sha256(cluster ID)>` (upstream `foreignCluster.UniqueName`; the seed's `naples-7881be`).
/// Names the tenant namespaces and the per-peer network objects, and a ForeignCluster whose
/// cluster name is taken. Always a DNS-1123 subdomain (a label of at most 70 characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UniqueName(String);

impl UniqueName {
    /// The UniqueName of a cluster.
    pub fn new(cluster: &ClusterIdentity) -> Self {
        Self(format!(
            "{}-{}",
            cluster.cluster_name,
            id_hash(&cluster.cluster_id)
        ))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an object name (NetworkConfig, TunnelEndpoint, ForeignCluster on a clash).
    pub fn to_object_name(&self) -> ObjectName {
        ObjectName::built(self.0.clone())
    }
}

impl fmt::Display for UniqueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The 6 hex digits of the first 3 bytes of sha256(cluster ID).
fn id_hash(id: &ClusterId) -> String {
    hex::encode(&Sha256::digest(id.as_str().as_bytes())[..3])
}

/// The tenant namespace for a remote cluster: `liqo-tenant-<UniqueName>`. A namespace name is
/// at most 63 characters: when the UniqueName does not fit (a cluster name longer than 44
/// characters, where upstream fails to create the namespace), the cluster name part is cut to
/// fit (and a trailing `-` dropped); the hash of the ID keeps it unique.
pub fn tenant_namespace(remote: &ClusterIdentity) -> NamespaceName {
    let hash = id_hash(&remote.cluster_id);
    let room = LABEL_MAX - objects::TENANT_NAMESPACE_PREFIX.len() - 1 - hash.len();
    let name = remote.cluster_name.as_str();
    let name = name[..name.len().min(room)].trim_end_matches('-');
    let ns = format!("{}{name}-{hash}", objects::TENANT_NAMESPACE_PREFIX);
    debug_assert!(validate_label(&ns).is_ok(), "{ns}");
    NamespaceName(ns)
}

/// The Secret holding a remote cluster's token: `remote-token-<cluster ID>`.
pub fn remote_token_secret(remote: &ClusterId) -> ObjectName {
    ObjectName::built(format!("{}{remote}", objects::REMOTE_TOKEN_PREFIX))
}

/// The virtual node standing for a remote cluster: `liqo-<cluster name>`.
pub fn virtual_node(remote: &ClusterName) -> ObjectName {
    ObjectName::built(format!("{}{remote}", objects::VIRTUAL_NODE_PREFIX))
}

/// The RoleBinding of a peering ClusterRole in a tenant namespace:
/// `liqo-binding-<ClusterRole>`. Refused when the ClusterRole's name is not a subdomain or
/// the result is too long.
pub fn role_binding(cluster_role: &str) -> Result<ObjectName, InvalidName> {
    validate_subdomain(cluster_role)?;
    format!("{}{cluster_role}", objects::ROLE_BINDING_PREFIX).parse()
}

/// The consumer's ResourceRequest, in its tenant namespace for the provider (and its copy at
/// the provider): named after the **consumer**.
pub fn resource_request(consumer: &ClusterName) -> ObjectName {
    ObjectName::built(consumer.to_string())
}

/// The provider's ResourceOffer, in its tenant namespace for the consumer (and its copy at
/// the consumer): named after the **provider**.
pub fn resource_offer(provider: &ClusterName) -> ObjectName {
    ObjectName::built(provider.to_string())
}

/// The ForeignCluster the ResourceRequest controller makes for a consumer that peered with us:
/// named after its cluster name, or its [`UniqueName`] when a ForeignCluster of that name
/// already stands for another cluster (`holder`: the cluster ID of the ForeignCluster named
/// like it, if any).
pub fn incoming_foreign_cluster(
    remote: &ClusterIdentity,
    holder: Option<&ClusterId>,
) -> ObjectName {
    match holder {
        Some(id) if *id != remote.cluster_id => UniqueName::new(remote).to_object_name(),
        _ => ObjectName::built(remote.cluster_name.to_string()),
    }
}

#[cfg(test)]
mod tests;
