//! What every reflected copy carries and which local objects are never reflected, whatever
//! their kind: the local labels and annotations plus the reflection labels; the opt-out
//! annotation `liqo.io/skip-reflection=true` (any other value is refused, naming it); and the
//! copies another virtual kubelet made here (with bidirectional peering a copy reflected back
//! would fight its source).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use liqo_types::{FieldError, field::bad};

use super::{Ctx, Skip};
use crate::{consts::reflection as consts, shadowpod::consumer::reflection_labels};

/// The field path of annotation `key`, as errors name it.
pub fn annotation_field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// A boolean annotation: absent is `false`; only `true` and `false` are read, anything else is
/// refused naming the annotation and the value.
pub fn flag(meta: &ObjectMeta, key: &str) -> Result<bool, FieldError> {
    match meta.annotations.as_ref().and_then(|a| a.get(key)) {
        None => Ok(false),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(bad(
            annotation_field(key),
            format!("{v:?} is not \"true\" or \"false\""),
        )),
    }
}

/// Why no local object of any kind is reflected: opted out, a bad opt-out value, or a copy
/// reflected here by a virtual kubelet (ours or another cluster's).
pub fn skip(meta: &ObjectMeta) -> Option<Skip> {
    let labels = meta.labels.as_ref();
    if labels.is_some_and(|l| l.contains_key(consts::ORIGIN)) {
        return Some(Skip::Excluded("a reflected copy"));
    }
    match flag(meta, consts::SKIP_REFLECTION) {
        Ok(true) => Some(Skip::Excluded("opted out (liqo.io/skip-reflection=true)")),
        Ok(false) => None,
        Err(e) => Some(Skip::Refused(e)),
    }
}

/// The metadata of the copy of `local` named `name`: the local labels plus the reflection
/// labels (`extra` on top), the local annotations plus the local UID; nothing the API server
/// sets.
pub fn remote(
    local: &ObjectMeta,
    name: String,
    ctx: &Ctx<'_>,
    extra: impl IntoIterator<Item = (String, String)>,
) -> ObjectMeta {
    let mut labels: BTreeMap<String, String> = local.labels.clone().unwrap_or_default();
    labels.extend(reflection_labels(ctx.home, ctx.foreign));
    labels.extend(extra);
    let mut annotations = local.annotations.clone().unwrap_or_default();
    if let Some(uid) = &local.uid {
        annotations.insert(consts::LOCAL_UID.to_owned(), uid.clone());
    }
    let annotations = Some(annotations).filter(|a| !a.is_empty());
    ObjectMeta {
        name: Some(name),
        namespace: Some(ctx.remote_namespace.to_owned()),
        labels: Some(labels),
        annotations,
        ..ObjectMeta::default()
    }
}

/// The UID of the local object `copy` was made from, if it says.
pub fn local_uid(copy: &ObjectMeta) -> Option<&str> {
    copy.annotations
        .as_ref()?
        .get(consts::LOCAL_UID)
        .map(String::as_str)
}
