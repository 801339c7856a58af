//! Every label, annotation, finalizer, data key and fixed object name the peering reads or
//! writes, spelled as upstream Liqo v0.5 spells them, so objects written by either read the
//! same. Each string is defined here once; the controllers, `liqo-auth` and `liqoctl` use
//! these constants and never repeat the literals. Names built from a cluster's identity
//! (tenant namespaces, `remote-token-<id>`, `liqo-<name>`, ...) are made by [`crate::names`]
//! from the prefixes below.

/// Label keys.
pub mod labels {
    /// The cluster ID an object belongs to or speaks of (ForeignCluster, tenant namespace,
    /// remote token Secret, identity Secret, ResourceOffer: the consumer).
    pub const CLUSTER_ID: &str = "discovery.liqo.io/cluster-id";
    /// Marks a tenant namespace (value [`super::values::TRUE`]).
    pub const TENANT_NAMESPACE: &str = "discovery.liqo.io/tenant-namespace";
    /// Marks the consumer's identity Secret for a provider (value [`super::values::TRUE`]).
    pub const LOCAL_IDENTITY: &str = "discovery.liqo.io/local-identity";
    /// Set on an identity Secret once its certificate is signed (value [`super::values::TRUE`]).
    pub const CERTIFICATE_AVAILABLE: &str = "discovery.liqo.io/certificate-available";
    /// Marks a remote token Secret (`remote-token-<id>`).
    pub const AUTH_TOKEN: &str = "discovery.liqo.io/auth-token";
    /// Marks the CertificateSigningRequests `liqo-auth` files for remote clusters (value
    /// [`super::values::TRUE`]).
    pub const REMOTE_TENANT_CSR: &str = "discovery.liqo.io/remote-tenant-csr";
    /// How a ForeignCluster was discovered (values in [`super::discovery_types`]).
    pub const DISCOVERY_TYPE: &str = "discovery.liqo.io/discovery-type";
    /// On a source object: replicate it to the cluster of [`REMOTE_ID`] (`true`); on a copy:
    /// `false`.
    pub const REPLICATION: &str = "liqo.io/replication";
    /// On a copy made by the replicator (value [`super::values::TRUE`]).
    pub const REPLICATED: &str = "liqo.io/replicated";
    /// On a source object: the cluster ID it is replicated to.
    pub const REMOTE_ID: &str = "liqo.io/remoteID";
    /// On a copy: the cluster ID of the cluster that holds the source.
    pub const ORIGIN_ID: &str = "liqo.io/originID";
    /// On a local object owned by a local component; the replicator drops it from copies.
    pub const OWNERSHIP: &str = "liqo.io/ownership";
    /// Marks the peering ClusterRoles with the set they belong to (values in
    /// [`crate::phase::RoleSet`]).
    pub const REMOTE_PEERING_PERMISSIONS: &str = "auth.liqo.io/remote-peering-permissions";
    /// The cluster identity ConfigMap's label (value [`super::values::CLUSTER_ID_CONFIGMAP_APP`]).
    pub const APP_NAME: &str = "app.kubernetes.io/name";
    /// On nodes: `virtual-node` on the nodes Liqo makes for remote clusters.
    pub const NODE_TYPE: &str = "liqo.io/type";
    /// On a virtual node: the cluster ID of the cluster it stands for.
    pub const REMOTE_CLUSTER_ID: &str = "liqo.io/remote-cluster-id";
    /// On a pod a provider runs for a consumer: the consumer's cluster ID.
    pub const OFFLOADED_ORIGIN: &str = "virtualkubelet.liqo.io/origin";
    /// On a consumer's local pod offloaded to a virtual node (value [`super::values::TRUE`]).
    pub const SHADOW_POD: &str = "liqo.io/shadowPod";
}

/// Label values with a fixed meaning.
pub mod values {
    /// The value of the boolean marker labels.
    pub const TRUE: &str = "true";
    /// The value of [`super::labels::REPLICATION`] on copies.
    pub const FALSE: &str = "false";
    /// [`super::labels::NODE_TYPE`] of a virtual node.
    pub const VIRTUAL_NODE: &str = "virtual-node";
    /// [`super::labels::APP_NAME`] of the cluster identity ConfigMap.
    pub const CLUSTER_ID_CONFIGMAP_APP: &str = "clusterid-configmap";
}

/// Values of [`labels::DISCOVERY_TYPE`].
pub mod discovery_types {
    /// Created by a user or `liqoctl peer`.
    pub const MANUAL: &str = "Manual";
    /// Created by the ResourceRequest controller for a consumer that peered with us.
    pub const INCOMING_PEERING: &str = "IncomingPeering";
}

/// Annotation keys.
pub mod annotations {
    /// On an identity Secret: when its certificate expires (unix seconds).
    pub const CERTIFICATE_EXPIRE_TIME: &str = "discovery.liqo.io/certificate-expire-time";
    /// Kubernetes' mark of the default StorageClass (`"true"`).
    pub const DEFAULT_STORAGE_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
    /// On a tenant namespace: the ID of the cluster it lives in. A peer holding an identity for
    /// that namespace reads it to check that the API server behind the identity is the
    /// cluster its ForeignCluster names.
    pub const HOST_CLUSTER_ID: &str = "discovery.liqo.io/host-cluster-id";
    /// On an identity Secret: the cluster ID the API server behind it was checked to be (its
    /// tenant namespace's [`HOST_CLUSTER_ID`]); set once, so the check survives restarts.
    pub const VERIFIED_CLUSTER_ID: &str = "discovery.liqo.io/verified-cluster-id";
    /// On a provider's record of an issued identity (`liqo-remote-certificate`): the time
    /// (unix milliseconds) of the newest proof of possession of the CSR's key it accepted; a
    /// repeated request needs a newer one (a replayed request is refused).
    pub const LAST_PROOF_TIME: &str = "auth.liqo.io/last-proof-time";
}

/// Finalizers.
pub mod finalizers {
    /// On a replicated source until its copy is gone; on a ForeignCluster while its reflector
    /// runs.
    pub const CRD_REPLICATOR: &str = "crdReplicator.liqo.io";
    /// On an accepted ResourceOffer while its virtual kubelet runs.
    pub const VIRTUAL_KUBELET: &str = "liqo.io/virtualkubelet";
    /// On a ResourceOffer while its virtual node exists.
    pub const VIRTUAL_NODE: &str = "liqo.io/node";
}

/// Fixed object names and the prefixes of names built per remote cluster.
pub mod objects {
    /// The namespace Liqo runs in unless configured otherwise.
    pub const LIQO_NAMESPACE: &str = "liqo";
    /// The cluster identity ConfigMap (keys [`super::keys::CLUSTER_ID`],
    /// [`super::keys::CLUSTER_NAME`]).
    pub const CLUSTER_ID_CONFIGMAP: &str = "liqo-clusterid-configmap";
    /// The local auth token Secret (key [`super::keys::TOKEN`]).
    pub const AUTH_TOKEN_SECRET: &str = "auth-token";
    /// A provider's record of the certificate it signed for a consumer, in that consumer's
    /// tenant namespace (keys [`super::keys::CSR`], [`super::keys::CERTIFICATE`]); its presence
    /// refuses a second identity request.
    pub const REMOTE_CERTIFICATE_SECRET: &str = "liqo-remote-certificate";
    /// The auth service's Service.
    pub const AUTH_SERVICE: &str = "liqo-auth";
    /// The Service of `liqo-proxy` (in-band peering: the peer's API traffic enters through it).
    pub const PROXY_SERVICE: &str = "liqo-proxy";
    /// `generateName` of the consumer's identity Secret and of the provider's
    /// CertificateSigningRequest.
    pub const IDENTITY_GENERATE_NAME: &str = "liqo-identity-";
    /// Prefix of a remote token Secret (`remote-token-<cluster ID>`).
    pub const REMOTE_TOKEN_PREFIX: &str = "remote-token-";
    /// Prefix of a tenant namespace (`liqo-tenant-<UniqueName>`).
    pub const TENANT_NAMESPACE_PREFIX: &str = "liqo-tenant-";
    /// Prefix of a virtual node (`liqo-<cluster name>`).
    pub const VIRTUAL_NODE_PREFIX: &str = "liqo-";
    /// Prefix of a peering RoleBinding (`liqo-binding-<ClusterRole>`).
    pub const ROLE_BINDING_PREFIX: &str = "liqo-binding-";
    /// The Lease the controller-manager's replicas elect their leader on (`--leader-elect`).
    pub const MANAGER_LEADER_LEASE: &str = "liqo-controller-manager";
    /// The controller-manager's Deployment (the chart's); its image also holds `liqo-mover`.
    pub const CONTROLLER_MANAGER: &str = "liqo-controller-manager";
}

/// The network fabric's strings (network manager, gateway and route operators), as upstream
/// Liqo v0.5 spells them where it has them.
pub mod net {
    /// On a TunnelEndpoint: the remote cluster ID it leads to.
    pub const TEP_CLUSTER_ID_LABEL: &str = "clusterID";
    /// On the Secret holding the gateway's WireGuard public key (value [`WIREGUARD`]).
    pub const KEY_LABEL: &str = "net.liqo.io/key";
    /// [`KEY_LABEL`]'s value, and a NetworkConfig's and TunnelEndpoint's `backendType`.
    pub const WIREGUARD: &str = "wireguard";
    /// The Secret with the gateway's public key (key [`PUBLIC_KEY`]); readable by the
    /// network manager.
    pub const PUBLIC_KEY_SECRET: &str = "wireguard-pubkey";
    /// The Secret with the gateway's private key (key [`PRIVATE_KEY`]); only the gateway
    /// operator reads it.
    pub const PRIVATE_KEY_SECRET: &str = "wireguard-privkey";
    /// `backend_config` and Secret key: the WireGuard public key (base64).
    pub const PUBLIC_KEY: &str = "publicKey";
    /// Secret key: the WireGuard private key (base64).
    pub const PRIVATE_KEY: &str = "privateKey";
    /// `backend_config` key: the gateway's UDP port.
    pub const PORT: &str = "port";
    /// On the gateway's Service (value [`super::values::TRUE`]): where peers reach the gateway.
    pub const GATEWAY_SERVICE_LABEL: &str = "net.liqo.io/gateway";
    /// On the gateway's Service of type NodePort: the address of the node the gateway runs on.
    pub const GATEWAY_NODE_IP_ANNOTATION: &str = "net.liqo.io/gatewayNodeIP";
    /// The Lease the gateway operator holds (holderIdentity: the node its gateway runs on).
    pub const GATEWAY_LEASE: &str = "liqo-gateway";
    /// On the active gateway's pod (`"true"`) with active/standby replicas: the gateway
    /// Service selects it, so peers reach the active replica only.
    pub const GATEWAY_ACTIVE_LABEL: &str = "net.liqo.io/gateway-active";
    /// On a ForeignCluster while the network manager still holds IPAM ranges or objects for it.
    pub const NETWORK_MANAGER_FINALIZER: &str = "net.liqo.io/network-manager";
    /// On a TunnelEndpoint until its gateway dropped the peer.
    pub const GATEWAY_FINALIZER: &str = "net.liqo.io/gateway-operator";
    /// On a TunnelEndpoint until the overlay of every node dropped its ranges.
    pub const ROUTE_FINALIZER: &str = "net.liqo.io/route-operator";
    /// On a peer's NetworkConfig copy the network manager refused: why, naming the field.
    pub const REFUSED_ANNOTATION: &str = "net.liqo.io/refused";
    /// Next to [`REFUSED_ANNOTATION`]: a digest of the spec refused (the same spec is never
    /// tried again; a changed one is).
    pub const REFUSED_SPEC_ANNOTATION: &str = "net.liqo.io/refused-spec";
    /// On the private key Secret: a key rotation asked for (`liqoctl rotate-key` writes a new
    /// value; any value the gateway operator has not served yet asks for a new key).
    pub const ROTATE_KEY_ANNOTATION: &str = "net.liqo.io/rotate-key";
    /// On the private key Secret: the value of [`ROTATE_KEY_ANNOTATION`] the gateway operator
    /// last served (written with the new key).
    pub const KEY_ROTATED_ANNOTATION: &str = "net.liqo.io/key-rotated";
    /// On the public key Secret: since when (RFC 3339) the gateway runs that key (written by
    /// the gateway operator once the gateway reports it).
    pub const KEY_SINCE_ANNOTATION: &str = "net.liqo.io/key-since";
}

/// Keys of ConfigMap and Secret data.
pub mod keys {
    /// The cluster identity ConfigMap: the cluster ID (a UUIDv4 made at install).
    pub const CLUSTER_ID: &str = "CLUSTER_ID";
    /// The cluster identity ConfigMap: the cluster name.
    pub const CLUSTER_NAME: &str = "CLUSTER_NAME";
    /// The local and the remote token Secrets: the token.
    pub const TOKEN: &str = "token";
    /// The identity Secret: the private key of the consumer's identity.
    pub const PRIVATE_KEY: &str = "private-key";
    /// The identity Secret and the provider's record: the certificate signing request.
    pub const CSR: &str = "csr";
    /// The identity Secret and the provider's record: the signed certificate.
    pub const CERTIFICATE: &str = "certificate";
    /// The identity Secret: the provider's API server URL.
    pub const API_SERVER_URL: &str = "apiServerUrl";
    /// The identity Secret: the CA of the provider's API server.
    pub const API_SERVER_CA: &str = "apiServerCa";
    /// The identity Secret: the provider's tenant namespace for us.
    pub const NAMESPACE: &str = "namespace";
    /// The identity Secret: the proxy to reach the provider's API server (in-band peering).
    pub const PROXY_URL: &str = "proxyURL";
}

/// The auth service's protocol.
pub mod auth {
    /// `GET`: the cluster's identity ([`crate::identity::ClusterInfo`]).
    pub const IDS_PATH: &str = "/ids";
    /// `POST`: a consumer asks for a certificate
    /// ([`crate::identity::CertificateIdentityRequest`]).
    pub const CERTIFICATE_PATH: &str = "/identity/certificate";
    /// The signer of the CertificateSigningRequests for remote clusters' identities.
    pub const CSR_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
    /// The organization (`O`) in the subject of a remote cluster's certificate (its `CN` is
    /// the cluster ID, the user RoleBindings name).
    pub const CSR_ORGANIZATION: &str = "liqo.io";
}

// ---- namespace offloading ----

/// Namespace offloading: the consumer's NamespaceOffloading controller and the provider's
/// NamespaceMap controller (upstream `pkg/consts/namespace_mapping.go`).
pub mod offloading {
    /// On a local namespace whose pods the webhook mutates (`"true"`): set for the `Remote`
    /// and `LocalAndRemote` pod strategies, removed for `Local` and on unoffload.
    pub const SCHEDULING_ENABLED: &str = "liqo.io/scheduling-enabled";
    /// On a remote namespace and its RoleBinding: `<map namespace>/<map name>` of the
    /// NamespaceMap copy that asked for it (the provider deletes only what carries it).
    pub const MANAGED_BY_NAMESPACE_MAP: &str = "liqo.io/managed-by-namespace-map";
    /// On a remote namespace: the consumer's local namespace name.
    pub const ORIGINAL_NAME: &str = "liqo.io/original-name";
    /// On a NamespaceOffloading until its remote namespaces are released.
    pub const NAMESPACE_OFFLOADING_FINALIZER: &str =
        "namespaceoffloading-controller.liqo.io/finalizer";
    /// On the provider's NamespaceMap copy until its remote namespaces are deleted.
    pub const NAMESPACE_MAP_FINALIZER: &str = "namespacemap-controller.liqo.io/finalizer";
    /// On a virtual node until its NamespaceMaps are gone.
    pub const VIRTUAL_NODE_CONTROLLER_FINALIZER: &str = "virtualnode-controller.liqo.io/finalizer";
    /// The ClusterRole bound to the consumer in each remote namespace.
    pub const VIRTUAL_KUBELET_REMOTE_CLUSTER_ROLE: &str = "liqo-virtual-kubelet-remote";
}

// ---- end of namespace offloading ----

// ---- pod webhook and virtual node ----

/// The webhooks of the controller-manager (chart v0.5.4 `templates/webhooks`).
pub mod webhook {
    /// The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration (same name).
    pub const CONFIGURATION: &str = "liqo-webhook";
    /// The pod mutating webhook, in [`CONFIGURATION`].
    pub const POD_WEBHOOK: &str = "pod.mutate.liqo.io";
    /// The NamespaceOffloading validating webhook, in [`CONFIGURATION`].
    pub const NSOFF_WEBHOOK: &str = "nsoff.validate.liqo.io";
    /// The pod webhook's path.
    pub const POD_PATH: &str = "/mutate/pod";
    /// The NamespaceOffloading webhook's path.
    pub const NSOFF_PATH: &str = "/validate/namespace-offloading";
    /// The Secret (Liqo namespace) holding the webhook's CA and serving certificate.
    pub const CERTS_SECRET: &str = "liqo-webhook-certs";
}

/// The virtual node's labels and taint (upstream `liqoNodeProvider/setup.go`).
pub mod virtual_node {
    /// The taint key of every virtual node (`=true:NoExecute`), tolerated by offloaded pods.
    pub const NOT_ALLOWED_TAINT: &str = "virtual-node.liqo.io/not-allowed";
    /// Whether the provider offers storage (`true`/`false`).
    pub const STORAGE_AVAILABLE: &str = "storage.liqo.io/available";
    /// Kubernetes' hostname label.
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    /// The node role label (value [`ROLE_AGENT`]).
    pub const ROLE: &str = "kubernetes.io/role";
    /// The role of a virtual node.
    pub const ROLE_AGENT: &str = "agent";
    /// Kubernetes' OS label (value [`OS_LINUX`]).
    pub const OS: &str = "kubernetes.io/os";
    /// The OS label's value.
    pub const OS_LINUX: &str = "linux";
    /// `nodeInfo.operatingSystem` of a virtual node.
    pub const OPERATING_SYSTEM: &str = "Linux";
    /// Kubernetes' architecture label (value [`ARCH_AMD64`], also `nodeInfo.architecture`).
    pub const ARCH: &str = "kubernetes.io/arch";
    /// The architecture a virtual node declares.
    pub const ARCH_AMD64: &str = "amd64";
    /// Keeps the node out of external load balancers (`true`).
    pub const EXCLUDE_FROM_EXTERNAL_LB: &str =
        "node.kubernetes.io/exclude-from-external-load-balancers";
    /// The alpha spelling of [`EXCLUDE_FROM_EXTERNAL_LB`] (`true`).
    pub const EXCLUDE_BALANCER_ALPHA: &str =
        "alpha.service-controller.kubernetes.io/exclude-balancer";
}

// ---- end of pod webhook and virtual node ----

// ---- storage fabric ----

/// The storage fabric (§6 of the control-plane spec; upstream `pkg/consts/storage.go` and the
/// external-provisioner's annotations).
pub mod storage {
    /// The virtual StorageClass (the chart makes it).
    pub const CLASS: &str = "liqo";
    /// Its provisioner: the controller-manager's provisioner loop.
    pub const PROVISIONER: &str = "liqo.io/storage";
    /// Where the twin (real) claims of the claims bound on physical nodes live.
    pub const NAMESPACE: &str = "liqo-storage";
    /// Label on a twin claim and on a volume we provision: the namespace of the virtual claim
    /// it backs.
    pub const VIRTUAL_PVC_NAMESPACE: &str = "storage.liqo.io/virtual-pvc-namespace";
    /// Annotation on a twin claim and on a volume we provision: the name of the virtual claim
    /// it backs (an annotation: a claim's name may be longer than a label value).
    pub const VIRTUAL_PVC_NAME: &str = "storage.liqo.io/virtual-pvc-name";
    /// On a claim: the node its first consumer was scheduled on (the scheduler sets it).
    pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
    /// On a claim: the provisioner asked to provision it (the PV controller sets it).
    pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
    /// The beta spelling of [`STORAGE_PROVISIONER`].
    pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
    /// On a provisioned volume: its provisioner (the PV controller leaves its deletion to it).
    pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
    /// Event reason on a claim marked for deletion: the virtual kubelet deleted its copy on
    /// the provider.
    pub const REASON_COPY_DELETED: &str = "RemoteCopyDeleted";
    /// The hostPath of a volume whose data lives on a provider (never mounted: its pods run
    /// there).
    pub const PLACEHOLDER_PATH: &str = "/tmp/liqo-placeholder";
    /// The annotation prefixes Kubernetes keeps on claims for binding and provisioning: not
    /// carried to a copy (the copy's cluster sets its own).
    pub const BINDING_ANNOTATION_PREFIXES: [&str; 3] = [
        "volume.kubernetes.io/",
        "volume.beta.kubernetes.io/",
        "pv.kubernetes.io/",
    ];
}

// ---- end of storage fabric ----

// ---- virtual kubelet and pod reflection ----

/// The virtual kubelet's pod reflection and the provider's ShadowPod controller (upstream
/// `pkg/consts/{reflection,shadowpod}.go`).
pub mod reflection {
    /// On every remote object a virtual kubelet writes: the home (consumer) cluster's ID.
    pub const ORIGIN: &str = super::labels::OFFLOADED_ORIGIN;
    /// On every remote object a virtual kubelet writes: the provider's cluster ID.
    pub const DESTINATION: &str = "virtualkubelet.liqo.io/destination";
    /// The holder of the IPAM's endpoint mappings of the reflected EndpointSlices
    /// (`MapIp{ENDPOINT}`): the virtual kubelet takes and drops only its own holds.
    pub const IPAM_HOLDER: &str = "virtual-kubelet";
    /// The holder of the mapping of the home API server (API server support): never dropped
    /// by the EndpointSlices' releases or sweep.
    pub const IPAM_HOLDER_HOME_API: &str = "virtual-kubelet-home-api";
    /// The field manager of everything the virtual kubelet writes remotely.
    pub const FIELD_MANAGER: &str = "reflection.liqo.io";
    /// On a ShadowPod: the digest of what the virtual kubelet forged (labels, annotations and
    /// `spec.pod`), so that its store keeps the metadata only and still sees a change.
    pub const SHADOW_DIGEST: &str = "reflection.liqo.io/shadowpod-digest";
    /// On a pod the provider's ShadowPod controller made (value [`MANAGED_BY_SHADOWPOD`]).
    pub const MANAGED_BY: &str = "liqo.io/managed-by";
    /// The value of [`MANAGED_BY`] on pods made from ShadowPods.
    pub const MANAGED_BY_SHADOWPOD: &str = "shadowpod";
    /// Pod status reason: a pod on a virtual node in a namespace not offloaded there, never
    /// started (it stays Pending).
    pub const OFFLOADING_BACK_OFF: &str = "OffloadingBackOff";
    /// Pod status reason: a pod that ran remotely and whose namespace is no longer offloaded
    /// (Failed, so that its controller replaces it).
    pub const OFFLOADING_ABORTED: &str = "OffloadingAborted";
    /// On a local object: `true` keeps it (and its EndpointSlices, for a Service) from being
    /// reflected; a copy already made is deleted.
    pub const SKIP_REFLECTION: &str = "liqo.io/skip-reflection";
    /// On a local Service: `true` keeps its `nodePort`s in the remote copy (else the provider
    /// allocates its own).
    pub const FORCE_REMOTE_NODE_PORT: &str = "liqo.io/force-remote-node-port";
    /// The label Kubernetes reads for who manages an EndpointSlice.
    pub const ENDPOINTSLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
    /// [`ENDPOINTSLICE_MANAGED_BY`] on the EndpointSlices a virtual kubelet reflects.
    pub const ENDPOINTSLICE_MANAGER: &str = "endpointslice.reflection.liqo.io";
    /// On a reflected copy: the UID of the local object it copies (a local object re-created
    /// under the same name gets a fresh copy: some fields are immutable).
    pub const LOCAL_UID: &str = "reflection.liqo.io/local-uid";
    /// On a reflected EndpointSlice: its local addresses and what each was mapped to (JSON), so
    /// that the mappings are released even after a restart.
    pub const ENDPOINT_ADDRESSES: &str = "reflection.liqo.io/endpoint-addresses";
    /// The label naming an EndpointSlice's Service.
    pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
    /// The label a reflected ServiceAccount-token Secret gets (its ServiceAccount's name).
    pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
}

// ---- end of virtual kubelet and pod reflection ----

#[cfg(test)]
mod tests;
