//! The ConfigMap store's errors.

/// Why the ConfigMap could not be read or written (a conflict is [`StoreError::Conflict`]).
#[derive(Debug, thiserror::Error)]
pub enum ConfigMapError {
    /// The store's thread or its runtime could not start.
    #[error("starting the thread of the ConfigMap store")]
    Thread(#[source] std::io::Error),
    /// No client: neither the in-cluster config nor `KUBECONFIG` gave one.
    #[error("making the Kubernetes client (in-cluster config or KUBECONFIG)")]
    Client(#[source] kube::Error),
    /// The store's thread is gone (it only stops when the store is dropped).
    #[error("the ConfigMap store's thread stopped")]
    Stopped,
    /// The API server refused the request, or could not be reached.
    #[error("{op} ConfigMap {configmap}")]
    Api {
        /// `reading`, `creating` or `replacing`.
        op: &'static str,
        /// The ConfigMap, `namespace/name`.
        configmap: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// No answer in time.
    #[error("{op} ConfigMap {configmap}: no answer within {secs}s")]
    Timeout {
        /// `reading`, `creating` or `replacing`.
        op: &'static str,
        /// The ConfigMap, `namespace/name`.
        configmap: String,
        /// How long it waited.
        secs: u64,
    },
    /// The ConfigMap does not hold a state (it is left as it is).
    #[error("ConfigMap {configmap} does not hold a valid IPAM state")]
    Invalid {
        /// The ConfigMap, `namespace/name`.
        configmap: String,
        /// What is wrong.
        #[source]
        source: InvalidContent,
    },
    /// The API server answered with an object without a resourceVersion.
    #[error("ConfigMap {configmap} came without a resourceVersion")]
    NoResourceVersion {
        /// The ConfigMap, `namespace/name`.
        configmap: String,
    },
    /// The state could not be encoded.
    #[error("encoding the IPAM state")]
    Encode(#[source] serde_json::Error),
    /// The state is larger than a ConfigMap holds.
    #[error("the IPAM state is {len} bytes, more than a ConfigMap holds ({max})")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The most a ConfigMap holds.
        max: usize,
    },
}

/// What is wrong with a ConfigMap's content.
#[derive(Debug, thiserror::Error)]
pub enum InvalidContent {
    /// The data key is missing.
    #[error("no data key {0}")]
    Missing(&'static str),
    /// The data is not a state.
    #[error("{key}")]
    Json {
        /// The data key.
        key: &'static str,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}
