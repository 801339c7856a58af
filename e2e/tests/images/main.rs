//! The container images (`chart/images/`): `chart/images/build.sh` builds every image the chart
//! runs from the debug binaries with no daemon and no registry; each archive loads into podman
//! under the chart's image name, runs its program (and the controller-manager's image the
//! virtual kubelet) printing the workspace's version with the container's security context as
//! the chart renders it, and runs as the user the chart says (non-root but for the data-plane
//! daemons); then the gateway's image runs each gateway of a two-cluster lab in its node's
//! namespace with exactly the privileges and mounts the chart gives the gateway container
//! (`liqo-lab` through `LIQO_LAB_GATEWAY_RUN`), and the lab's cross-cluster check passes through
//! it (`images_root`). Podman works in a storage of the test's own (`podman`), removed at the
//! end with every container and image, as is the lab; the chart's containers and the podman
//! flags of their privileges come from `helm template` (`chart`).
//!
//! Needs root, what `.ci/install` installs (mmdebstrap, buildah, podman, runc) and helm
//! (`$HELM`, or beside the Kubernetes binaries: `$LIQO_K8S_BIN`).

mod chart;
mod images_root;
mod podman;
