//! The sink itself: [`LabGateway`] (the shared `FileGateway`) over [`LabHost`], the gateway
//! process on a node of a lab cluster, its status read inside that node, its external CIDR's
//! mappings asked of the cluster's IPAM ([`super::external`]).

use dataplane::Netns;
use liqo_netops::files::sinks::{FileGateway, GatewayHost, HostError};
use liqo_peering::grpc::External;
use liqo_types::{Cidr, EndpointMapping, GatewayPeer};

use super::external::external;
use crate::{
    lab::{
        Lab, LabError,
        cluster::gateway_node,
        daemons::{self, GATEWAY_PORT},
        names, state, wan,
    },
    topology::Cluster,
};

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

/// The gateway of a lab cluster: the shared sink over files and status
/// ([`liqo_netops::files::sinks::FileGateway`]) on the lab's host.
pub(crate) type LabGateway = FileGateway<LabHost>;

/// `c`'s gateway as the peering core drives it (nothing written yet).
pub(crate) fn lab_gateway(lab: &Lab, c: &Cluster) -> LabGateway {
    let files = lab.files(c);
    FileGateway {
        base: config(lab, c, &[], External::default()),
        config: files.gateway_config(),
        key_file: files.private_key(),
        host: LabHost {
            lab: lab.clone(),
            cluster: c.clone(),
        },
        handshake_secs: HANDSHAKE_SECS,
        reload_secs: RELOAD_SECS,
        written: None,
    }
}

/// Where a lab cluster's gateway runs: a process in one of its nodes' namespaces (the one
/// recorded in its `gateway-node` file), its status read inside it, its external CIDR's
/// mappings asked of the cluster's IPAM.
pub(crate) struct LabHost {
    lab: Lab,
    cluster: Cluster,
}

impl LabHost {
    /// The namespace of the node the gateway runs on.
    pub(crate) fn node(&self) -> Result<Netns, LabError> {
        self.lab
            .node(&self.cluster, &gateway_node(&self.lab, &self.cluster)?)
    }

    async fn start_on(&self, node: &str) -> Result<(), LabError> {
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
        let p = daemons::spawn_gateway(lab, c, node)?;
        state::write_atomic(&lab.files(c).gateway_node(), node)?;
        daemons::gateway_up(lab, c, &to, &p).await
    }
}

impl GatewayHost for LabHost {
    fn status(&mut self) -> Result<gateway::status::Status, HostError> {
        Ok(self.node().and_then(|ns| daemons::gateway_status(&ns))?)
    }

    async fn external(&mut self) -> Result<Option<(Cidr, Vec<EndpointMapping>)>, HostError> {
        let e = external(&self.lab, &self.cluster).await?;
        Ok(e.cidr.map(|cidr| (cidr, e.endpoints)))
    }

    async fn stop(&mut self) -> Result<(), HostError> {
        Ok(daemons::stop_gateway(&self.lab, &self.cluster)?)
    }

    async fn start(&mut self, node: &str) -> Result<(), HostError> {
        Ok(self.start_on(node).await?)
    }
}

#[cfg(test)]
mod tests {
    use liqo_netops::files::{Want, gateway_look};
    use liqo_types::ClusterId;

    use crate::lab::daemons::{self, Poll};

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
