//! Carrying out the network manager's actions for one ForeignCluster: the writes (server-side
//! apply, deletes, the copy's status and refusal annotation, Events) and the IPAM calls.

use control::{
    api::discovery::ForeignCluster,
    consts::{labels, net, values},
};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams},
    core::ApiResource,
    runtime::events::EventType,
};
use liqo_peering::{
    grpc::GrpcError,
    ipam::{self as steps, Ipam},
};
use liqo_types::ClusterId;
use serde_json::{Value, json};

use control::network::decide::{self, Action};

use super::{
    REFUSED_ANNOTATION, REFUSED_SPEC_ANNOTATION,
    io::{dyn_api, ipam_error},
    manager::{Manager, REASON_REFUSED, REASON_RELEASED_AFTER_GRACE},
};
use crate::{
    FIELD_MANAGER,
    context::Context,
    error::{Error, kube as kerr},
    kit::not_found,
    kit::{set_finalizers, with_finalizer},
};

fn reference(o: &DynamicObject, ar: &ApiResource) -> ObjectReference {
    ObjectReference {
        api_version: Some(ar.api_version.clone()),
        kind: Some(ar.kind.clone()),
        name: o.metadata.name.clone(),
        namespace: o.metadata.namespace.clone(),
        uid: o.metadata.uid.clone(),
        resource_version: o.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Carries out the actions for one ForeignCluster.
pub(super) struct Exec<'a> {
    pub(super) ctx: &'a Context,
    pub(super) m: &'a Manager,
    pub(super) fc: &'a ForeignCluster,
    pub(super) ns: &'a str,
    pub(super) name: &'a str,
    pub(super) nc_ar: &'a ApiResource,
    pub(super) tep_ar: &'a ApiResource,
    pub(super) copy: Option<&'a DynamicObject>,
    pub(super) ipam: ipam::service::client::Client,
    pub(super) peer: ClusterId,
}

impl Exec<'_> {
    pub(super) async fn run(mut self, actions: Vec<Action>) -> Result<(), Error> {
        let fcs: Api<ForeignCluster> = Api::all(self.ctx.client.clone());
        for action in actions {
            match action {
                Action::AddFinalizer | Action::RemoveFinalizer => {
                    let add = action == Action::AddFinalizer;
                    let list =
                        with_finalizer(self.fc.finalizers(), net::NETWORK_MANAGER_FINALIZER, add);
                    set_finalizers(
                        &fcs,
                        &self.fc.name_any(),
                        self.fc.resource_version().as_deref(),
                        list,
                    )
                    .await?;
                }
                Action::ApplyOwn(spec) => {
                    let object = json!({
                        "apiVersion": self.nc_ar.api_version, "kind": self.nc_ar.kind,
                        "metadata": {"name": self.name, "namespace": self.ns, "labels": {
                            labels::REPLICATION: values::TRUE,
                            labels::REMOTE_ID: self.peer.as_str(),
                        }},
                        "spec": spec,
                    });
                    self.apply(self.nc_ar, &object).await?;
                    tracing::info!(peer = %self.peer, "our NetworkConfig applied");
                }
                Action::Refuse(message) => self.refuse(message).await?,
                Action::ClearRefusal => self.annotate(None, None).await?,
                Action::Remap(announced) => {
                    match steps::decide(&mut self.ipam, &self.peer, announced).await {
                        Ok(seen) => {
                            tracing::info!(peer = %self.peer, pods = %seen.pods, external = %seen.external, "peer's ranges remapped");
                            self.copy_status(decide::copy_status(announced, seen))
                                .await?;
                        }
                        Err(GrpcError::Call {
                            code: tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition,
                            message,
                            ..
                        }) => {
                            self.refuse(ipam_refusal(&message)).await?;
                            // Refused: the rest (a refusal of an earlier spec cleared) is not
                            // for this spec.
                            return Ok(());
                        }
                        Err(e) => return Err(ipam_error(&self.peer)(e)),
                    }
                }
                Action::WriteCopyStatus(status) => self.copy_status(status).await?,
                Action::SetPeerView { here, there } => {
                    let view = steps::record(&mut self.ipam, &self.peer, here, there)
                        .await
                        .map_err(ipam_error(&self.peer))?;
                    tracing::info!(peer = %self.peer, ?view, "the peer's view of us recorded");
                }
                Action::ApplyTunnel(spec) => {
                    let object = json!({
                        "apiVersion": self.tep_ar.api_version, "kind": self.tep_ar.kind,
                        "metadata": {"name": self.name, "namespace": self.ns, "labels": {
                            net::TEP_CLUSTER_ID_LABEL: self.peer.as_str(),
                        }},
                        "spec": spec,
                    });
                    self.apply(self.tep_ar, &object).await?;
                    tracing::info!(peer = %self.peer, "TunnelEndpoint applied");
                }
                Action::DeleteOwn => self.delete(self.nc_ar, self.name).await?,
                Action::DeleteTunnel => self.delete(self.tep_ar, self.name).await?,
                Action::DeleteCopy => {
                    if let Some(c) = self.copy {
                        self.delete(self.nc_ar, &c.name_any()).await?;
                    }
                }
                Action::Release { forced } => {
                    Ipam::release(&mut self.ipam, &self.peer)
                        .await
                        .map_err(ipam_error(&self.peer))?;
                    tracing::info!(peer = %self.peer, forced = ?forced, "IPAM ranges released");
                    if let Some(why) = forced {
                        let fc_ref = self.fc.object_ref(&());
                        self.event(
                            &fc_ref,
                            EventType::Warning,
                            REASON_RELEASED_AFTER_GRACE,
                            why,
                        )
                        .await;
                    }
                }
            }
        }
        Ok(())
    }

    async fn apply(&self, ar: &ApiResource, object: &Value) -> Result<(), Error> {
        dyn_api(&self.ctx.client, self.ns, ar)
            .patch(
                self.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .map(drop)
            .map_err(kerr(format!("apply {} {}/{}", ar.kind, self.ns, self.name)))
    }

    async fn delete(&self, ar: &ApiResource, name: &str) -> Result<(), Error> {
        dyn_api(&self.ctx.client, self.ns, ar)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .or_else(not_found)
            .map_err(kerr(format!("delete {} {}/{name}", ar.kind, self.ns)))
    }

    async fn copy_status(
        &self,
        status: control::api::net::NetworkConfigStatus,
    ) -> Result<(), Error> {
        self.write_status(json!(status)).await
    }

    /// Server-side applies the copy's status (fields we wrote before and not now go).
    async fn write_status(&self, status: Value) -> Result<(), Error> {
        let Some(c) = self.copy else { return Ok(()) };
        let object = json!({
            "apiVersion": self.nc_ar.api_version, "kind": self.nc_ar.kind, "status": status,
        });
        let name = c.name_any();
        dyn_api(&self.ctx.client, self.ns, self.nc_ar)
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map(drop)
            .map_err(kerr(format!("status of NetworkConfig {}/{name}", self.ns)))
    }

    /// A Warning Event on the copy, its status unprocessed (an earlier decision withdrawn) with the
    /// refusal (the peer sees it: the status is reflected back), then the annotations (which mark
    /// it told, for this spec).
    async fn refuse(&self, message: String) -> Result<(), Error> {
        let Some(c) = self.copy else { return Ok(()) };
        tracing::warn!(peer = %self.peer, name = %c.name_any(), refusal = %message, "peer's NetworkConfig refused");
        let r = reference(c, self.nc_ar);
        self.event(&r, EventType::Warning, REASON_REFUSED, message.clone())
            .await;
        self.write_status(json!({"processed": false, "refused": message}))
            .await?;
        let spec = c.data.get("spec").cloned().unwrap_or(Value::Null);
        self.annotate(Some(message), Some(decide::spec_digest(&spec)))
            .await
    }

    async fn annotate(&self, message: Option<String>, digest: Option<String>) -> Result<(), Error> {
        let Some(c) = self.copy else { return Ok(()) };
        let name = c.name_any();
        let patch = json!({"metadata": {"annotations": {
            REFUSED_ANNOTATION: message,
            REFUSED_SPEC_ANNOTATION: digest,
        }}});
        dyn_api(&self.ctx.client, self.ns, self.nc_ar)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(kerr(format!("annotate NetworkConfig {}/{name}", self.ns)))
    }

    async fn event(&self, r: &ObjectReference, kind: EventType, reason: &str, note: String) {
        crate::kit::publish(&self.m.recorder, r, kind, reason, note).await;
    }
}

/// The IPAM's refusal of a peer's ranges, naming the spec's field (`pod_cidr: ...` is
/// `spec.podCIDR`; a change of announced ranges names both).
pub(crate) fn ipam_refusal(message: &str) -> String {
    // A change of announced ranges names the pod CIDR first, but concerns both.
    let field = if message.contains("already announced") {
        "spec.podCIDR, spec.externalCIDR"
    } else if message.starts_with("pod_cidr") {
        "spec.podCIDR"
    } else if message.starts_with("external_cidr") {
        "spec.externalCIDR"
    } else {
        "spec.podCIDR, spec.externalCIDR"
    };
    format!("{field}: liqo-ipam refused them: {message}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_ipam_refusal_names_the_spec_field() {
        assert_eq!(
            super::ipam_refusal("pod_cidr: \"x\" is not an IPv4 CIDR"),
            "spec.podCIDR: liqo-ipam refused them: pod_cidr: \"x\" is not an IPv4 CIDR"
        );
        assert!(super::ipam_refusal("external_cidr: bad").starts_with("spec.externalCIDR: "));
        assert!(
            super::ipam_refusal("pod_cidr: peer m already announced pod CIDR 10.0.0.0/16 and ...")
                .starts_with(
                    "spec.podCIDR, spec.externalCIDR: liqo-ipam refused them: pod_cidr: peer m"
                )
        );
    }
}
