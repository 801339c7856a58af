//! Why handling one object of resource reflection failed (the key is retried).

use super::endpoints::EndpointError;

/// Why handling a key failed.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// An API request failed.
    #[error("{what}")]
    Kube {
        /// What was asked.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The provider refused the copy as invalid (a Warning Event on the local object says
    /// why).
    #[error("the provider refused {what}")]
    Refused {
        /// What was asked.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// An address could not be mapped or released.
    #[error("endpoint addresses")]
    Endpoint(#[source] EndpointError),
}
