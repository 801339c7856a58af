//! Node selectors with Kubernetes' semantics (being written).
