//! What the reflection of one object does, from the local object and the remote one of its
//! remote name: create the copy, apply it (it differs), delete it (the local object is gone or
//! excluded), warn (the remote name is not ours, or the local object is refused), or nothing.

use liqo_types::FieldError;
use serde_json::Value;

use super::{Ctx, Inputs, Reflect, Skip, meta};
use crate::consts::reflection as consts;
use crate::shadowpod::{
    consumer::is_reflected,
    reflection::{REASON_NOT_OURS, not_ours_note},
};

/// One thing to do about an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<K> {
    /// Nothing: the copy is as it should be, or there is nothing to reflect.
    Nothing,
    /// Not now: an input is missing (the caller retries later).
    Wait(&'static str),
    /// Create the copy (the remote name is free).
    Create(Box<K>),
    /// Apply the copy over ours (server-side apply, field manager `reflection.liqo.io`).
    Apply(Box<K>),
    /// Delete our copy (UID precondition).
    Delete {
        /// Its remote name.
        name: String,
        /// Its UID.
        uid: String,
    },
    /// A Warning Event on the local object; nothing remote changes.
    Warn {
        /// The Event's reason.
        reason: &'static str,
        /// Its note.
        note: String,
        /// The refused field, if a field is the cause.
        field: Option<FieldError>,
    },
}

fn delete_ours<K: Reflect>(remote: Option<&K>, ctx: &Ctx<'_>) -> Action<K> {
    match remote {
        Some(r) if ours(r, ctx) => Action::Delete {
            name: r.meta().name.clone().unwrap_or_default(),
            uid: r.meta().uid.clone().unwrap_or_default(),
        },
        _ => Action::Nothing,
    }
}

/// Whether `remote` is a copy of ours: our reflection labels, and a copy of this kind.
pub fn ours<K: Reflect>(remote: &K, ctx: &Ctx<'_>) -> bool {
    is_reflected(remote.meta().labels.as_ref(), ctx.home, ctx.foreign) && K::is_copy(remote)
}

fn refused<K>(e: FieldError) -> Action<K> {
    Action::Warn {
        reason: super::REASON_REFUSED,
        note: format!("not reflected: {e}; the remote copy, if any, is left as it was"),
        field: Some(e),
    }
}

/// What to do about the local object `local` (absent: gone) and the remote object `remote` of
/// its remote name (absent: none; of any owner).
pub fn decide<K: Reflect>(
    local: Option<&K>,
    remote: Option<&K>,
    ctx: &Ctx<'_>,
    inputs: &Inputs,
) -> Action<K> {
    let Some(local) = local else {
        return delete_ours(remote, ctx);
    };
    // A copy of an earlier local object of the same name (deleted, then made again): that
    // object is gone, so is its copy, whatever becomes of the new one.
    if let Some(r) = remote
        && ours(r, ctx)
        && let (Some(was), Some(is)) = (meta::local_uid(r.meta()), local.meta().uid.as_deref())
        && was != is
    {
        return delete_ours(remote, ctx);
    }
    let skip = meta::skip(local.meta()).or_else(|| K::skip(local, ctx, inputs));
    match skip {
        Some(Skip::Excluded(_)) if K::keeps_excluded_copy(local) => return Action::Nothing,
        Some(Skip::Excluded(_)) => return delete_ours(remote, ctx),
        Some(Skip::Wait(why)) => return Action::Wait(why),
        Some(Skip::Refused(e)) => return refused(e),
        None => {}
    }
    let name = local.meta().name.clone().unwrap_or_default();
    let remote_name = K::remote_name(&name, ctx);
    if let Some(r) = remote
        && !ours(r, ctx)
    {
        return Action::Warn {
            reason: REASON_NOT_OURS,
            note: not_ours_note(K::KIND.as_str(), ctx.remote_namespace, &remote_name),
            field: None,
        };
    }
    let desired = match K::forge(local, ctx, inputs) {
        Ok(d) => d,
        Err(e) => return refused(e),
    };
    match remote {
        None => Action::Create(Box::new(desired)),
        Some(r) if same(&desired, r) => Action::Nothing,
        Some(_) => Action::Apply(Box::new(desired)),
    }
}

/// Whether the copy `actual` holds what `desired` says: every field `desired` sets has the
/// same value in `actual` (which may hold more: the provider's defaults), and the paths of
/// [`Reflect::exact`] are equal.
pub fn same<K: Reflect>(desired: &K, actual: &K) -> bool {
    if !K::same_content(desired, actual) {
        return false;
    }
    let (Ok(d), Ok(a)) = (serde_json::to_value(desired), serde_json::to_value(actual)) else {
        // Both are plain API objects: serializing them does not fail; if it did, an apply
        // repairs whatever differs.
        return false;
    };
    // A copy without the local UID (made before it was recorded) gets it.
    let uid = |v: &Value| at(v, &["metadata", "annotations", consts::LOCAL_UID]).is_some();
    if uid(&d) && !uid(&a) {
        return false;
    }
    let (d, a) = (without_bookkeeping(d), without_bookkeeping(a));
    K::exact()
        .iter()
        .all(|path| empty_if_null(at(&d, path)) == empty_if_null(at(&a, path)))
        && subset(&d, &a)
}

/// `v` without the annotations reflection keeps for itself (the local UID, the mapped
/// addresses): they change only with what they describe, which is compared (the local UID's
/// presence is checked apart).
fn without_bookkeeping(mut v: Value) -> Value {
    if let Some(a) = v
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(consts::LOCAL_UID);
        a.remove(consts::ENDPOINT_ADDRESSES);
    }
    v
}

fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn empty_if_null(v: Option<&Value>) -> Option<&Value> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(Value::String(s)) if s.is_empty() => None,
        // The API server leaves out a false boolean: absent and false are the same.
        Some(Value::Bool(false)) => None,
        other => other,
    }
}

/// Whether every field of `d` is in `a` with the same value (arrays: same length, element by
/// element); a null, `false`, empty string, object or array in `d` matches an absent field.
pub(crate) fn subset(d: &Value, a: &Value) -> bool {
    match (d, a) {
        (Value::Object(dm), Value::Object(am)) => dm.iter().all(|(k, dv)| match am.get(k) {
            Some(av) => subset(dv, av),
            None => empty_if_null(Some(dv)).is_none(),
        }),
        (Value::Object(dm), Value::Null) => dm.values().all(|v| empty_if_null(Some(v)).is_none()),
        (Value::Array(da), Value::Array(aa)) => {
            da.len() == aa.len() && da.iter().zip(aa).all(|(d, a)| subset(d, a))
        }
        (Value::Array(da), Value::Null) => da.is_empty(),
        (Value::Null, _) => true,
        _ => d == a,
    }
}
