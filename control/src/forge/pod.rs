//! The offloaded pod (§2.3 of the control-plane spec): the ShadowPod forged from a local pod on
//! a virtual node (what is copied, what is stripped), the local status forged from the remote
//! pod's (IPs given already remapped, restarts carried over), and the status of a pod the
//! virtual kubelet cannot offload (`OffloadingBackOff`, `OffloadingAborted`). Pure: no I/O.
