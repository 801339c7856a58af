//! What the controllers share below them, by concept: [`write`] (server-side apply, finalizers,
//! references, the clock), [`retry`] (the retry period and backoff), [`watch`] (kube-runtime
//! wiring: tracked reconcilers, trigger streams, the error policy) and [`get`] and [`lookup`] (a
//! peer's ForeignCluster, trust in a replicated copy, Events). No controller logic.

pub mod get;
pub mod lookup;
pub mod retry;
pub mod watch;
pub mod write;

pub use get::find_foreign_cluster;
pub use lookup::{event, foreign_cluster, publish, trusted};
pub use retry::{MAX_BACKOFF, RETRY, backoff};
pub use watch::{OFFER_THROTTLE, events, log, policy, throttled, tracked};
pub use write::{
    apply, apply_status, controller_ref, merge_params, not_found, now, set_finalizers,
    with_finalizer,
};
