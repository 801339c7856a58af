//! Ingresses: the spec as it is, but without an ingress class (neither
//! `spec.ingressClassName` nor the annotation `kubernetes.io/ingress.class`): the provider's
//! default class serves the copy. The status is the provider's.

use k8s_openapi::api::networking::v1::Ingress;
use liqo_types::FieldError;

use super::{Ctx, Inputs, Kind, Reflect, meta};

/// The annotation older controllers read the class from.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

impl Reflect for Ingress {
    const KIND: Kind = Kind::Ingress;

    fn forge(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        let mut metadata = meta::remote(&local.metadata, name, ctx, []);
        if let Some(a) = metadata.annotations.as_mut() {
            a.remove(CLASS_ANNOTATION);
        }
        metadata.annotations = metadata.annotations.filter(|a| !a.is_empty());
        let mut spec = local.spec.clone().unwrap_or_default();
        spec.ingress_class_name = None;
        Ok(Ingress {
            metadata,
            spec: Some(spec),
            status: None,
        })
    }

    fn exact() -> &'static [&'static [&'static str]] {
        // Not the class: the provider's admission may set its default.
        &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["spec", "rules"],
            &["spec", "tls"],
            &["spec", "defaultBackend"],
        ]
    }
}
