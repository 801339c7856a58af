//! The names of everything the bench creates for one prefix, and the cleanup that removes it.

use std::{
    fmt::Display,
    fs, io,
    path::{Path, PathBuf},
};

use dataplane::{IfName, Netns, NetnsName};

use e2e::lab::Prefix;

/// Where the WireGuard daemons put their UAPI sockets (shared by every namespace).
pub(crate) const WG_SOCKET_DIR: &str = "/var/run/wireguard";

/// One of the four namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    PodA,
    GwA,
    GwB,
    PodB,
}

impl Node {
    pub(crate) const ALL: [Node; 4] = [Node::PodA, Node::GwA, Node::GwB, Node::PodB];

    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Node::PodA => "podA",
            Node::GwA => "gwA",
            Node::GwB => "gwB",
            Node::PodB => "podB",
        }
    }

    /// The gateway on side A (`true`) or B.
    pub(crate) fn gw(side_a: bool) -> Node {
        if side_a { Node::GwA } else { Node::GwB }
    }
}

/// Every name the bench uses for one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub(crate) prefix: Prefix,
}

impl Names {
    fn parse<T: std::str::FromStr>(s: String) -> T
    where
        T::Err: std::fmt::Debug,
    {
        s.parse()
            .expect("a prefix is 1-10 of [a-z0-9], so every derived name is valid")
    }

    /// `<prefix>-bench-podA`, ...
    pub(crate) fn netns(&self, n: Node) -> NetnsName {
        Self::parse(format!("{}-bench-{}", self.prefix, n.suffix()))
    }

    /// The namespace our gateway creates and owns on side A or B.
    pub(crate) fn gateway_netns(&self, side_a: bool) -> NetnsName {
        Self::parse(format!("{}-ns", self.netns(Node::gw(side_a))))
    }

    /// The WireGuard interface of side A or B: distinct per side (and per prefix), because the
    /// UAPI sockets of every namespace share one directory.
    pub(crate) fn wg_if(&self, side_a: bool) -> IfName {
        Self::parse(format!(
            "{}-bwg{}",
            self.prefix,
            if side_a { 'A' } else { 'B' }
        ))
    }

    /// The UAPI socket of [`Names::wg_if`].
    pub(crate) fn socket(&self, side_a: bool) -> PathBuf {
        PathBuf::from(WG_SOCKET_DIR).join(format!("{}.sock", self.wg_if(side_a)))
    }

    /// Keys, configurations and logs of this run.
    pub(crate) fn run_dir(&self) -> PathBuf {
        PathBuf::from("/run/liqo-lab").join(format!("bench-{}", self.prefix))
    }

    pub(crate) fn lock(&self) -> PathBuf {
        PathBuf::from("/run/liqo-lab").join(format!("bench-{}.lock", self.prefix))
    }

    pub(crate) fn all_netns(&self) -> Vec<NetnsName> {
        let mut v: Vec<NetnsName> = Node::ALL.iter().map(|n| self.netns(*n)).collect();
        v.extend([self.gateway_netns(true), self.gateway_netns(false)]);
        v
    }
}

/// Kills every process in the bench's namespaces, deletes them, the UAPI sockets and the run
/// directory. Returns how many namespaces were deleted. Best effort: it never fails, it prints
/// what it could not do.
pub(crate) fn cleanup(names: &Names) -> usize {
    let mut deleted = 0;
    // Only processes inside our own namespaces: started by this bench (or by a previous run of
    // it that crashed).
    for name in &names.all_netns() {
        match Netns::purge(name) {
            Ok((_, true)) => deleted += 1,
            Ok((_, false)) => {}
            Err(e) => cleanup_failed(format_args!("purging namespace {name}"), &e),
        }
    }
    for side in [true, false] {
        remove_file(&names.socket(side));
    }
    let dir = names.run_dir();
    if let Err(e) = fs::remove_dir_all(&dir)
        && e.kind() != io::ErrorKind::NotFound
    {
        cleanup_failed(format_args!("removing {}", dir.display()), &e);
    }
    deleted
}

/// Prints a failed step of a best-effort cleanup, which goes on: the caller could do nothing
/// more about it.
pub(crate) fn cleanup_failed(what: impl Display, e: &(dyn std::error::Error + 'static)) {
    eprintln!("bench: cleanup: {what}: {}", liqo_types::chain(e));
}

/// Removes the file `path`; a missing one is fine.
pub(crate) fn remove_file(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        cleanup_failed(format_args!("removing {}", path.display()), &e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_kernel_limits_for_the_longest_prefix() {
        let n = Names {
            prefix: "abcdefghij".parse().unwrap(),
        };
        assert_eq!(n.netns(Node::PodA).as_str(), "abcdefghij-bench-podA");
        assert_eq!(n.gateway_netns(true).as_str(), "abcdefghij-bench-gwA-ns");
        // Distinct per side: the UAPI sockets of every namespace share one directory.
        assert_eq!(n.wg_if(true).as_str(), "abcdefghij-bwgA");
        assert_eq!(n.wg_if(false).as_str(), "abcdefghij-bwgB");
        assert_eq!(
            n.socket(false),
            PathBuf::from("/var/run/wireguard/abcdefghij-bwgB.sock")
        );
        assert_eq!(n.all_netns().len(), 6);
        assert!(
            n.all_netns()
                .iter()
                .all(|x| x.as_str().starts_with("abcdefghij-bench-"))
        );
    }
}
