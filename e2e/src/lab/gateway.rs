//! The peering core's gateway sink in the lab: the gateway's config file (its fixed settings
//! plus the peer list the core decided), its process on a node, and its `/status`, read typed.
//! Every wait checks that the gateway runs the exact text written (`reload.applied.digest`), so
//! a stale status is never taken for the new state, and a refusal is the error at once (one look
//! is [`liqo_netops::files::gateway_look`], the operators' too).
//!
//! The file also carries the cluster's external CIDR and its endpoint mappings, as its IPAM
//! lists them when the file is written; [`endpoints`] maps and unmaps endpoints and rewrites it.

mod endpoints;

pub(crate) use endpoints::external;
pub use endpoints::{map_endpoint, unmap_endpoint};

use std::fs;

use dataplane::Netns;
use liqo_netops::files::{Want, gateway_look};
use liqo_peering::grpc::External;
use liqo_types::{Cidr, ClusterId, GatewayPeer, PublicKey};

use super::{
    Lab, LabError,
    cluster::gateway_node,
    daemons::{self, GATEWAY_PORT, Poll, wait_for},
    names, wan,
};
use crate::topology::Cluster;

/// How long a new peer may take to handshake.
const HANDSHAKE_SECS: u64 = 30;
/// How long a reload may take.
const RELOAD_SECS: u64 = 20;

/// `c`'s gateway configuration with these peers and its external CIDR's mappings.
pub(crate) fn config(
    lab: &Lab,
    c: &Cluster,
    peers: &[GatewayPeer],
    external: External,
) -> gateway::config::File {
    let files = lab.files(c);
    gateway::config::File {
        namespace: Some(names::netns(&lab.prefix, &[c.name.as_str(), "gw"]).to_string()),
        private_key_file: Some(files.private_key().display().to_string()),
        local_pod_cidr: Some(Cidr::new(c.pod_cidr).expect("validated topology")),
        listen_port: Some(GATEWAY_PORT),
        local_external_cidr: external.cidr,
        peers: peers.to_vec(),
        endpoints: external.endpoints,
        ..Default::default()
    }
}

/// The gateway of a lab cluster.
pub(crate) struct LabGateway {
    pub(crate) lab: Lab,
    pub(crate) cluster: Cluster,
    /// The digest of the text last written (or found when started).
    pub(crate) written: Option<String>,
}

impl LabGateway {
    fn node(&self) -> Result<Netns, LabError> {
        self.lab
            .node(&self.cluster, &gateway_node(&self.lab, &self.cluster)?)
    }

    async fn wait(&self, peer: &ClusterId, want: Want, secs: u64) -> Result<(), LabError> {
        let ns = self.node()?;
        let what = match want {
            Want::Session => format!("{}'s gateway to handshake with {peer}", self.cluster.name),
            Want::Gone => format!("{}'s gateway to drop {peer}", self.cluster.name),
            Want::Fresh => format!(
                "{}'s gateway to have a fresh handshake with {peer}",
                self.cluster.name
            ),
        };
        let written = self.written.as_deref();
        wait_for(secs, &what, || match daemons::gateway_status(&ns) {
            Ok(s) => daemons::poll(
                gateway_look(&s, written, peer, want),
                written.unwrap_or("?"),
            ),
            Err(e) => Poll::NotYet(liqo_types::chain(&e)),
        })
        .await
    }
}

impl liqo_peering::Gateway for LabGateway {
    type Error = LabError;

    async fn public_key(&mut self) -> Result<PublicKey, LabError> {
        let path = self.lab.files(&self.cluster).private_key();
        gateway::keys::PrivateKey::load_or_create(&path)
            .map(|k| k.public())
            .map_err(|e| LabError::build(format!("reading {}'s key", self.cluster.name), e))
    }

    async fn write(&mut self, peers: &[GatewayPeer]) -> Result<(), LabError> {
        let ext = external(&self.lab, &self.cluster).await?;
        let file = config(&self.lab, &self.cluster, peers, ext);
        let text = serde_saphyr::to_string(&file)
            .map_err(|e| LabError::build("encoding a gateway config", e))?;
        let path = self.lab.files(&self.cluster).gateway_config();
        self.written = Some(daemons::write_config(&path, &text)?);
        Ok(())
    }

    async fn wait_handshaken(&mut self, peer: &ClusterId) -> Result<(), LabError> {
        self.wait(peer, Want::Session, HANDSHAKE_SECS).await
    }

    async fn wait_gone(&mut self, peer: &ClusterId) -> Result<(), LabError> {
        self.wait(peer, Want::Gone, RELOAD_SECS).await
    }

    async fn stop(&mut self) -> Result<(), LabError> {
        daemons::stop_gateway(&self.lab, &self.cluster)
    }

    async fn start(&mut self, node: &str) -> Result<(), LabError> {
        let (lab, c) = (&self.lab, &self.cluster);
        let to = lab.node(c, node)?;
        // The public link follows the gateway: find it and bring it along.
        if !wan::is_in(&to).await? {
            let mut from = None;
            for n in &c.nodes {
                let ns = lab.node(c, n.name.as_str())?;
                if wan::is_in(&ns).await? {
                    from = Some(ns);
                    break;
                }
            }
            let from = from.ok_or_else(|| {
                LabError::build(
                    format!("starting the gateway of {} on {node}", c.name),
                    format!("no node of {} has {}", c.name, wan::WAN0),
                )
            })?;
            wan::relocate(lab, c, &from, &to).await?;
        }
        let files = lab.files(c);
        let text = fs::read_to_string(files.gateway_config()).map_err(|e| {
            LabError::build(format!("reading {}", files.gateway_config().display()), e)
        })?;
        let p = daemons::spawn_gateway(lab, c, node)?;
        super::state::write_atomic(&files.gateway_node(), node)?;
        self.written = Some(liqo_daemon::digest(&text));
        daemons::gateway_up(lab, c, &to, &p).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_text_fails_the_wait_at_once_naming_the_field() {
        let milan: ClusterId = "milan".parse().unwrap();
        let body = r#"{"publicKey":"k","listenPort":1,"noRoute":0,"peers":[],
            "reload":{"source":"g.yaml","applied":{"digest":"d1","count":1},
            "refused":{"digest":"d2","field":"peers[0].remotePodCIDR","problem":"overlaps"}}}"#;
        let s: gateway::status::Status = serde_json::from_str(body).unwrap();
        let look = gateway_look(&s, Some("d2"), &milan, Want::Session);
        let Poll::Failed(e) = daemons::poll(look, "d2") else {
            panic!("not failed")
        };
        let e = liqo_types::chain(&e);
        assert!(
            e.contains("configuration d2 was refused") && e.contains("peers[0].remotePodCIDR"),
            "{e}"
        );
        assert!(e.contains("overlaps"), "{e}");
        let look = gateway_look(&s, Some("d1"), &milan, Want::Gone);
        assert!(matches!(daemons::poll(look, "d1"), Poll::Ready(())));
    }
}
