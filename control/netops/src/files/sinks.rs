//! The peering core's gateway and overlay sinks as files and status, without Kubernetes: the
//! config files are rendered over base files (fixed settings) and written atomically, and every
//! wait looks at the daemon's status until it runs the exact text written (a refusal of it is
//! the error at once). How a status is fetched (a URL, a socket inside a network namespace)
//! and how the gateway process is started and stopped are the caller's: the lab gives its own.

use std::{
    collections::BTreeMap,
    fmt,
    future::Future,
    path::PathBuf,
    time::{Duration, Instant},
};

use control::network::routes::overlay_file;
use liqo_peering::{OverlayPlan, plan::NodeOverlay};
use liqo_types::{Cidr, ClusterId, EndpointMapping, FieldError, GatewayPeer, PublicKey};

use super::{FilesError, Look, Want, gateway_look, overlay_look, write_config};

/// How a [`GatewayHost`] failed: its own error, kept whole (the chain of causes).
pub type HostError = Box<dyn std::error::Error + Send + Sync>;

/// Why a sink failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A file.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// Encoding a config.
    #[error("encoding {what}")]
    Encode {
        /// Which config.
        what: String,
        /// The cause.
        #[source]
        source: serde_saphyr::ser::Error,
    },
    /// The daemon refused the text written.
    #[error("{what} refused its configuration {digest}")]
    Refused {
        /// Which daemon.
        what: String,
        /// The text's digest.
        digest: String,
        /// The field and the problem.
        #[source]
        field: FieldError,
    },
    /// Time ran out.
    #[error("waiting {secs} s for {what}: still {why}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        secs: u64,
        /// The last look's answer.
        why: String,
    },
    /// The key file.
    #[error("the gateway's key")]
    Key(#[source] liqo_gateway_api::keys::KeyFileError),
    /// The gateway's host failed (its IPAM, starting or stopping it).
    #[error("the gateway's host, {what}")]
    Host {
        /// What the host was doing.
        what: String,
        /// The host's error.
        #[source]
        source: HostError,
    },
    /// A plan names a node whose agent's config file is not known.
    #[error("no config file is known for the overlay agent on {0}")]
    UnknownNode(String),
}

/// Looks with `look` every 50 ms until it is ready, refused, or `secs` pass.
pub async fn wait_for(
    secs: u64,
    what: &str,
    digest: &str,
    mut look: impl FnMut() -> Look,
) -> Result<(), SinkError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match look() {
            Look::Ready => return Ok(()),
            Look::Refused(field) => {
                return Err(SinkError::Refused {
                    what: what.into(),
                    digest: digest.into(),
                    field,
                });
            }
            Look::NotYet(why) if Instant::now() >= deadline => {
                return Err(SinkError::Timeout {
                    what: what.into(),
                    secs,
                    why,
                });
            }
            Look::NotYet(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A cluster's overlay agents: one config file per node (over one base), each agent's status
/// read with `status(node)` (or why it could not be: any error the caller's reader has).
pub struct FileOverlay<S> {
    /// The agents' fixed settings.
    pub base: liqo_overlay_api::config::File,
    /// Each node's config file.
    pub files: BTreeMap<String, PathBuf>,
    /// The status of a node's agent (or why it could not be read).
    pub status: S,
    /// How long the agents may take to apply a plan.
    pub secs: u64,
}

impl<S, E> FileOverlay<S>
where
    S: FnMut(&str) -> Result<liqo_overlay_api::status::Status, E> + Send,
    E: fmt::Display,
{
    fn text(&self, n: &NodeOverlay) -> Result<String, SinkError> {
        serde_saphyr::to_string(&overlay_file(&self.base, n)).map_err(|source| SinkError::Encode {
            what: format!("the overlay config of {}", n.node),
            source,
        })
    }

    fn path(&self, node: &str) -> Result<&PathBuf, SinkError> {
        self.files
            .get(node)
            .ok_or_else(|| SinkError::UnknownNode(node.into()))
    }
}

impl<S, E> liqo_peering::Overlay for FileOverlay<S>
where
    S: FnMut(&str) -> Result<liqo_overlay_api::status::Status, E> + Send,
    E: fmt::Display,
{
    type Error = SinkError;

    async fn write(&mut self, plan: &OverlayPlan) -> Result<(), SinkError> {
        for n in plan.per_node() {
            write_config(self.path(&n.node)?, &self.text(&n)?)?;
        }
        Ok(())
    }

    async fn wait_applied(&mut self, plan: &OverlayPlan) -> Result<(), SinkError> {
        for n in plan.per_node() {
            let want = super::digest(&self.text(&n)?);
            let (secs, status) = (self.secs, &mut self.status);
            wait_for(
                secs,
                &format!("the overlay agent on {}", n.node),
                &want,
                || match status(&n.node) {
                    Ok(s) => overlay_look(&s, &want),
                    Err(e) => Look::NotYet(e.to_string()),
                },
            )
            .await?;
        }
        Ok(())
    }
}

/// Where a gateway runs: its status, our external CIDR's mappings (the IPAM's), and its
/// process (a process in a node's namespace, a pod) are the caller's.
pub trait GatewayHost: Send {
    /// The gateway's status (or why it could not be read).
    fn status(&mut self) -> Result<liqo_gateway_api::status::Status, HostError>;
    /// Our external CIDR and its endpoint mappings as the IPAM lists them now (`None`: the
    /// base's are kept).
    fn external(
        &mut self,
    ) -> impl Future<Output = Result<Option<(Cidr, Vec<EndpointMapping>)>, HostError>> + Send;
    /// Stops it (it removes what it created); an error if it had to be killed.
    fn stop(&mut self) -> impl Future<Output = Result<(), HostError>> + Send;
    /// Starts it on `node` with its config file, and waits until it serves.
    fn start(&mut self, node: &str) -> impl Future<Output = Result<(), HostError>> + Send;
}

/// A gateway: its config file (over a base), its key file, and its host.
pub struct FileGateway<H> {
    /// Its fixed settings (no peers).
    pub base: liqo_gateway_api::config::File,
    /// Its config file.
    pub config: PathBuf,
    /// Its private key file (made, 0600, if missing).
    pub key_file: PathBuf,
    /// Where it runs.
    pub host: H,
    /// How long a new peer may take to handshake.
    pub handshake_secs: u64,
    /// How long a reload may take.
    pub reload_secs: u64,
    /// The digest of the text last written (or found when started).
    pub written: Option<String>,
}

impl<H: GatewayHost> FileGateway<H> {
    async fn wait(&mut self, peer: &ClusterId, want: Want, secs: u64) -> Result<(), SinkError> {
        let written = self.written.clone();
        let host = &mut self.host;
        let what = match want {
            Want::Gone => format!("the gateway to drop {peer}"),
            _ => format!("the gateway to handshake with {peer}"),
        };
        wait_for(
            secs,
            &what,
            written.as_deref().unwrap_or("?"),
            || match host.status() {
                Ok(s) => gateway_look(&s, written.as_deref(), peer, want),
                Err(e) => Look::NotYet(liqo_types::chain(e.as_ref())),
            },
        )
        .await
    }
}

impl<H: GatewayHost> liqo_peering::Gateway for FileGateway<H> {
    type Error = SinkError;

    async fn public_key(&mut self) -> Result<PublicKey, SinkError> {
        liqo_gateway_api::keys::PrivateKey::load_or_create(&self.key_file)
            .map(|k| k.public())
            .map_err(SinkError::Key)
    }

    async fn write(&mut self, peers: &[GatewayPeer]) -> Result<(), SinkError> {
        let mut file = liqo_gateway_api::config::File {
            peers: peers.to_vec(),
            ..self.base.clone()
        };
        let external = self
            .host
            .external()
            .await
            .map_err(|source| SinkError::Host {
                what: "listing our external CIDR and its endpoint mappings".into(),
                source,
            })?;
        if let Some((cidr, endpoints)) = external {
            file.local_external_cidr = Some(cidr);
            file.endpoints = endpoints;
        }
        let text = serde_saphyr::to_string(&file).map_err(|source| SinkError::Encode {
            what: "the gateway's config".into(),
            source,
        })?;
        self.written = Some(write_config(&self.config, &text)?);
        Ok(())
    }

    async fn wait_handshaken(&mut self, peer: &ClusterId) -> Result<(), SinkError> {
        self.wait(peer, Want::Session, self.handshake_secs).await
    }

    async fn wait_gone(&mut self, peer: &ClusterId) -> Result<(), SinkError> {
        self.wait(peer, Want::Gone, self.reload_secs).await
    }

    async fn stop(&mut self) -> Result<(), SinkError> {
        self.host.stop().await.map_err(|source| SinkError::Host {
            what: "stopping the gateway".into(),
            source,
        })
    }

    async fn start(&mut self, node: &str) -> Result<(), SinkError> {
        let text = std::fs::read_to_string(&self.config).map_err(|source| FilesError::Read {
            path: self.config.clone(),
            source,
        })?;
        self.written = Some(super::digest(&text));
        self.host
            .start(node)
            .await
            .map_err(|source| SinkError::Host {
                what: format!("starting the gateway on {node}"),
                source,
            })
    }
}

#[cfg(test)]
mod tests;
