//! The Kubernetes client of the global flags, as kubectl picks it: `--kubeconfig` (else
//! `$KUBECONFIG`, else `~/.kube/config`) with `--context` (else the current context); without
//! either flag, kube's inference (kubeconfig, then the in-cluster configuration).

use std::path::Path;

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file could not be read.
    #[error("reading the kubeconfig {path}")]
    Read {
        /// Its path.
        path: String,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No usable configuration (context, cluster, credentials).
    #[error("loading the Kubernetes configuration{}", context.as_ref().map(|c| format!(" (context {c:?})")).unwrap_or_default())]
    Config {
        /// The context asked for.
        context: Option<String>,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor an in-cluster configuration.
    #[error("no Kubernetes configuration found (give --kubeconfig or set KUBECONFIG)")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("building the Kubernetes client")]
    Build(#[source] kube::Error),
}

/// The client of these flags.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    Client::try_from(config(kubeconfig, context).await?).map_err(ClientError::Build)
}

/// The configuration of these flags (its `cluster_url` is the API server's address).
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Config, ClientError> {
    let opts = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config_err = |source| ClientError::Config {
        context: context.map(str::to_owned),
        source,
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| ClientError::Read {
                path: path.display().to_string(),
                source,
            })?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(config_err)?
        }
        (None, Some(_)) => Config::from_kubeconfig(&opts).await.map_err(config_err)?,
        (None, None) => Config::infer().await.map_err(ClientError::Infer)?,
    };
    Ok(config)
}

/// A failed apiserver call in one line: for a refused request the apiserver's message and
/// code (kube's own text repeats the whole Status twice), else kube's error and its causes.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ApiFailure(String);

impl From<kube::Error> for ApiFailure {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if !s.message.is_empty() => {
                Self(format!("{} (HTTP {} {})", s.message, s.code, s.reason))
            }
            e => Self(liqo_types::chain(&e)),
        }
    }
}
