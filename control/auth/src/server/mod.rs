//! The auth service (in progress).
