//! The admission webhooks served by the controller-manager (issue 15; being written): the pod
//! mutation and the NamespaceOffloading validation over HTTPS, with a CA and serving
//! certificate it makes itself. Their decisions are `control::offloading::webhook`'s.
