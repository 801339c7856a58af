//! The key of pod reflection's queue: a local pod, by namespace and name.

use std::fmt;

/// A local pod: the key of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Its (local) namespace.
    pub namespace: String,
    /// Its name (the same remotely).
    pub name: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
