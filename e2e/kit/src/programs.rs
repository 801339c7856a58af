//! The project's own programs: the names of Liqo's (what a cluster of the kit runs besides
//! Kubernetes's) and where the binaries are, for the tests and the lab that start them.

use std::path::PathBuf;

/// The IPAM's program (the controller-manager is given its address).
pub const IPAM: &str = "liqo-ipam";
/// The auth service's program (its Service is made for it).
pub(crate) const AUTH: &str = "liqo-auth";
/// The controller-manager's program.
pub(crate) const CONTROLLER_MANAGER: &str = "liqo-controller-manager";
/// The virtual kubelet's program (started by the controller-manager, one per peering).
pub(crate) const VIRTUAL_KUBELET: &str = "liqo-virtual-kubelet";
/// Every program of Liqo that runs with a cluster: the components ([`crate::liqo::COMPONENTS`],
/// a test checks they are all here) and the virtual kubelet. The teardown of a cluster
/// ([`crate::k8s::down`]) finds and stops them by these names.
pub(crate) const LIQO: [&str; 4] = [IPAM, AUTH, CONTROLLER_MANAGER, VIRTUAL_KUBELET];

/// A binary of the project that is not where [`bin`] looks.
#[derive(Debug, thiserror::Error)]
#[error("the {name} binary is not in {dirs:?}; build it (cargo build --bins) or set LIQO_BIN_DIR")]
pub struct BinNotFound {
    /// The binary's name.
    pub name: String,
    /// Where it was looked for, in order.
    pub dirs: Vec<PathBuf>,
}

/// Where the project's binary `name` is: `$LIQO_BIN_DIR`, else next to the running executable
/// (or one level up, for test executables in `target/*/deps`).
pub fn bin(name: &str) -> Result<PathBuf, BinNotFound> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("LIQO_BIN_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(d) = exe.parent()
    {
        dirs.push(d.to_owned());
        if let Some(up) = d.parent() {
            dirs.push(up.to_owned());
        }
    }
    match dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        Some(p) => Ok(p),
        None => Err(BinNotFound {
            name: name.into(),
            dirs,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_names_itself_and_where_it_was_looked_for() {
        let e = bin("no-such-liqo-binary").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("no-such-liqo-binary"), "{text}");
        assert!(text.contains("LIQO_BIN_DIR"), "{text}");
        assert!(!e.dirs.is_empty());
    }
}
