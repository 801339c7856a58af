//! `liqoctl move volume <claim> -n <namespace> --node <node>`: moves the data of a claim of
//! class `liqo` to a node of this cluster (from a provider, or from another node), the way
//! [`control::storage::moving`] lays out: refused (naming why, nothing changed) unless the
//! claim is bound, of class `liqo`, mounted by no pod and the node is a physical node other
//! than its own; then the data is copied by two Jobs of `liqo-mover` (the controller-manager's
//! image) into a new claim on the node, both sides' manifests compared, and only when they are
//! equal the new volume is re-bound to a claim of the original name and the original deleted.
//!
//! A failure before the switch deletes what the move made (the original untouched); a move
//! killed then leaves its objects (labelled with the claim's UID), which the next try deletes
//! first. Killed during the switch (the new volume holds the verified data, `Retain`, and
//! records the claim it goes to): the next `move volume` of that claim finishes it.

mod io;
mod switch;

use std::time::{Duration, Instant};

use control::{
    identity::AuthToken,
    storage::{
        moving::{self, Image, Names, Refusal, Resume},
        provision::NodeKind,
    },
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Node, PersistentVolumeClaim, Pod},
};
use kube::{Api, Client, ResourceExt, api::ListParams};

use crate::client::ApiFailure;

/// Why a move failed.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// Refused; nothing was changed.
    #[error("refusing to move {claim} (nothing was changed)")]
    Refused {
        /// `namespace/name`.
        claim: String,
        /// Why.
        #[source]
        source: Refusal,
    },
    /// No such claim (and no move of it to finish).
    #[error(
        "claim {0} does not exist (-n/--namespace names the claim's namespace for move volume)"
    )]
    NotFound(String),
    /// The image could not be found.
    #[error(
        "cannot tell the mover's image: {0}; give it with --image (the controller-manager's \
         image of this Liqo version)"
    )]
    Image(String),
    /// The copy failed; what the move made was deleted, the original is untouched.
    #[error("{0}; the original claim, its volume and its data are untouched")]
    Copy(String),
    /// Something was not done in time, or a step after the copy failed (said in full).
    #[error("{0}")]
    Wait(String),
    /// Another claim holds the name a kept copy is for.
    #[error("{0}")]
    Conflict(String),
    /// The switch stopped half-way: the data is safe in the new volume.
    #[error(
        "the switch to the copy stopped; the copy was verified and is kept in volume {volume} \
         (Retain): run the same move volume again to finish"
    )]
    Switch {
        /// The volume holding the copy.
        volume: String,
        /// Why it stopped.
        #[source]
        source: Box<MoveError>,
    },
    /// A forged object was invalid (a bug).
    #[error(transparent)]
    Forge(#[from] moving::ForgeError),
    /// No random token.
    #[error(transparent)]
    Random(#[from] control::identity::RandomUnavailable),
    /// A call to the apiserver failed.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ApiFailure,
    },
}

pub(crate) fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> MoveError {
    let what = what.into();
    move |e| MoveError::Kube {
        what,
        source: e.into(),
    }
}

/// What a move asks.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The claim's namespace.
    pub namespace: &'a str,
    /// Its name.
    pub claim: &'a str,
    /// The target node.
    pub node: &'a str,
    /// Where Liqo is installed (its controller-manager's image runs the mover).
    pub liqo_namespace: &'a str,
    /// The image, instead of the controller-manager's.
    pub image: Option<&'a str>,
    /// How long the copy may take.
    pub timeout: Duration,
}

/// Moves the claim as `r` asks, printing progress.
pub async fn move_volume(client: &Client, r: &Request<'_>) -> Result<(), MoveError> {
    let id = format!("{}/{}", r.namespace, r.claim);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), r.namespace);
    let claim = claims
        .get_opt(r.claim)
        .await
        .map_err(kube_err(format!("reading claim {id}")))?;
    let kept = switch::kept_for(client, r.namespace, r.claim).await?;
    let claim = match moving::resume(claim.as_ref(), kept.as_ref()) {
        Resume::NotFound => return Err(MoveError::NotFound(id)),
        Resume::Conflict(why) => return Err(MoveError::Conflict(why)),
        // Killed after the original was deleted, or bound already: the copy is what is left.
        Resume::Finish => return switch::finish(client, kept.as_ref().expect("kept")).await,
        Resume::WaitThenFinish => {
            let c = claim.as_ref().expect("claim");
            switch::gone(client, r.namespace, r.claim, c.metadata.uid.as_deref()).await?;
            return switch::finish(client, kept.as_ref().expect("kept")).await;
        }
        Resume::Discard | Resume::Start => claim.expect("claim"),
    };
    // This try's Jobs named apart from an earlier try's (see `Names::attempt`).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let names = Names::attempt(
        claim.metadata.uid.as_deref().unwrap_or_default(),
        &Names::attempt_mark(nanos),
    );
    // The pods of an earlier try of this move go with its leftovers.
    let pods: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), r.namespace)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing the pods of {}", r.namespace)))?
        .items
        .into_iter()
        .filter(|p| p.labels().get(moving::MOVE_OF) != Some(&names.uid))
        .collect();
    // Every pod there now: one made after this is looked for before the original goes.
    let seen = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let kind = node_kind(client, r.node).await?;
    moving::check(&claim, &pods, r.node, kind).map_err(|source| MoveError::Refused {
        claim: id.clone(),
        source,
    })?;
    // Killed before the original was deleted: the original is what counts (it may have
    // changed since); the kept copy goes, and the leftovers.
    if let Some(volume) = kept {
        switch::discard(client, &volume).await?;
    }
    io::clean(client, r.namespace, &names, true).await?;
    let image = image(client, r).await?;
    let from = control::storage::selected_node(&claim)
        .unwrap_or("?")
        .to_owned();
    println!("Moving {id} from {from} to {}", r.node);
    let t = Instant::now();
    let copied = match copy(client, &claim, &names, &image, r).await {
        Ok(c) => c,
        Err(e) => {
            return Err(match io::clean(client, r.namespace, &names, false).await {
                Ok(()) => e,
                Err(cleaning) => MoveError::Copy(format!(
                    "{e}; deleting what the move made also failed ({}: {cleaning}; the next \
                     move volume of the claim deletes it)",
                    names.selector()
                )),
            });
        }
    };
    let secs = t.elapsed().as_secs_f64();
    let gib = copied.bytes as f64 / f64::from(1u32 << 30);
    println!(
        "Copied and verified {} files, {} bytes in {secs:.1} s ({:.1} s per GiB): both sides' \
         manifests are sha256 {}",
        copied.files,
        copied.bytes,
        if gib > 0.0 { secs / gib } else { 0.0 },
        copied.digest
    );
    switch::switch(client, &claim, &names, r.node, &seen).await?;
    // The claim was made again (a new UID): what is left is found by this move's label only.
    io::clean(client, r.namespace, &names, false)
        .await
        .map_err(|e| MoveError::Wait(format!(
            "the move is done, but deleting its Jobs, Service and token Secret ({}) failed: {e}; \
             delete them by that label",
            names.selector()
        )))?;
    println!(
        "Moved {id} to {} in {:.1} s; the original volume is deleted with its claim",
        r.node,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The copy: the move's objects made, both Jobs done, the manifests equal.
async fn copy(
    client: &Client,
    claim: &PersistentVolumeClaim,
    names: &Names,
    image: &Image,
    r: &Request<'_>,
) -> Result<moving::Manifest, MoveError> {
    let deadline = r.timeout.as_secs().max(1);
    let token = AuthToken::generate()?;
    io::create(
        client,
        r.namespace,
        moving::token_secret(claim, names, token.expose())?,
    )
    .await?;
    io::create(
        client,
        r.namespace,
        moving::temp_claim(claim, r.node, names)?,
    )
    .await?;
    io::create(client, r.namespace, moving::service(claim, names)?).await?;
    let receiver = moving::receiver_job(claim, names, image, r.node, deadline)?;
    io::create(client, r.namespace, receiver).await?;
    io::create(
        client,
        r.namespace,
        moving::sender_job(claim, names, image, deadline)?,
    )
    .await?;
    println!(
        "Copying with Jobs {} (on {}) and {} (next to the data)",
        names.job("receive"),
        r.node,
        names.job("send")
    );
    let logs = io::wait_jobs(client, r.namespace, names, r.timeout).await?;
    let (Some(sent), Some(received)) = (moving::manifest(&logs.0), moving::manifest(&logs.1))
    else {
        return Err(MoveError::Copy(format!(
            "a Job printed no manifest; the sender said: {}; the receiver said: {}",
            io::last_lines(&logs.0),
            io::last_lines(&logs.1)
        )));
    };
    if sent != received {
        return Err(MoveError::Copy(format!(
            "the copy differs from the original: sent sha256 {} ({} files, {} bytes), received \
             sha256 {} ({} files, {} bytes)",
            sent.digest, sent.files, sent.bytes, received.digest, received.files, received.bytes
        )));
    }
    Ok(received)
}

async fn node_kind(client: &Client, node: &str) -> Result<NodeKind, MoveError> {
    let n = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .map_err(kube_err(format!("reading node {node}")))?;
    Ok(NodeKind::of(n.as_ref()))
}

/// The controller-manager's image (and pull policy), or the one given.
async fn image(client: &Client, r: &Request<'_>) -> Result<Image, MoveError> {
    if let Some(name) = r.image {
        return Ok(Image {
            name: name.to_owned(),
            pull_policy: None,
        });
    }
    let name = control::consts::objects::CONTROLLER_MANAGER;
    let d = Api::<Deployment>::namespaced(client.clone(), r.liqo_namespace)
        .get_opt(name)
        .await
        .map_err(kube_err(format!(
            "reading Deployment {}/{name}",
            r.liqo_namespace
        )))?
        .ok_or_else(|| MoveError::Image(format!("no Deployment {}/{name}", r.liqo_namespace)))?;
    let c = d
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .ok_or_else(|| MoveError::Image(format!("Deployment {name} has no container")))?;
    Ok(Image {
        name: c
            .image
            .ok_or_else(|| MoveError::Image(format!("Deployment {name} names no image")))?,
        pull_policy: c.image_pull_policy,
    })
}
