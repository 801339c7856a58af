//! What one look at a daemon's `/status` finds, pure: whether it runs a text (by digest) or
//! refused it ([`runs`]), whether the gateway has (or no longer has) a session with a peer
//! ([`gateway_look`]), whether an overlay agent runs a text ([`overlay_look`]). The operators
//! and the lab wait on these; they fetch the status themselves.

use liqo_types::{ClusterId, FieldError, reload::ReloadStatus};

/// How recent a handshake must be for a tunnel to count as connected (WireGuard rekeys every
/// 2 minutes while traffic flows, and a keepalive keeps it flowing).
pub const HANDSHAKE_FRESH_SECS: u64 = 180;

/// What one look at a daemon found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// Done.
    Ready,
    /// Not yet; why (reported if time runs out).
    NotYet(String),
    /// The daemon refused the text: it will not happen until the text changes.
    Refused(FieldError),
}

/// Whether the daemon whose reload state is `r` runs the text of digest `want`: refused if it
/// refused that text (with the field and the problem); not yet while it runs another or failed
/// to apply it (it retries; the failure is the reason given).
pub fn runs(r: &ReloadStatus, want: &str) -> Look {
    if let Some(refused) = r.refused.as_ref().filter(|x| x.digest == want) {
        return Look::Refused(liqo_types::field::bad(&refused.field, &refused.problem));
    }
    if r.applied.as_ref().is_some_and(|a| a.digest == want) {
        return Look::Ready;
    }
    match r.problem() {
        Some(p) => Look::NotYet(p),
        None => Look::NotYet(format!(
            "running {} instead of {want}",
            r.applied.as_ref().map_or("nothing", |a| a.digest.as_str())
        )),
    }
}

/// What to look for about a peer in the gateway's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A session with the peer (a handshake happened).
    Session,
    /// A session with a handshake at most [`HANDSHAKE_FRESH_SECS`] old.
    Fresh,
    /// No entry for the peer.
    Gone,
}

/// One look at a gateway's status: whether it runs `written` (if known) and has (or no longer
/// has) `peer`.
pub fn gateway_look(
    s: &liqo_gateway_api::status::Status,
    written: Option<&str>,
    peer: &ClusterId,
    want: Want,
) -> Look {
    if let Some(d) = written {
        match runs(&s.reload, d) {
            Look::Ready => {}
            other => return other,
        }
    }
    let entry = s.peers.iter().find(|p| p.id == peer.as_str());
    match (want, entry) {
        (Want::Session, Some(p)) if p.handshake_age_secs.is_some() => Look::Ready,
        (Want::Fresh, Some(p))
            if p.handshake_age_secs
                .is_some_and(|a| a <= HANDSHAKE_FRESH_SECS) =>
        {
            Look::Ready
        }
        (Want::Fresh, Some(p)) if p.handshake_age_secs.is_some() => Look::NotYet(format!(
            "the last handshake with {peer} was {} s ago",
            p.handshake_age_secs.unwrap_or_default()
        )),
        (Want::Session | Want::Fresh, Some(_)) => {
            Look::NotYet(format!("no handshake with {peer} yet"))
        }
        (Want::Session | Want::Fresh, None) => Look::NotYet(format!("no peer {peer}")),
        (Want::Gone, Some(_)) => Look::NotYet(format!("{peer} still listed")),
        (Want::Gone, None) => Look::Ready,
    }
}

/// One look at an overlay agent's status: whether it runs the text of digest `want`.
pub fn overlay_look(s: &liqo_overlay_api::status::Status, want: &str) -> Look {
    runs(&s.reload, want)
}

#[cfg(test)]
mod tests;
