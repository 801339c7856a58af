//! Named namespaces on the real kernel (needs root).

use crate::common;

use std::{net::TcpStream, os::unix::fs::MetadataExt};

use common::TestNs;
use dataplane::{Netns, netns, sysctl};

fn my_netns_inode() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()
}

#[tokio::test]
async fn create_list_run_delete() {
    let t = TestNs::new("life").await;
    let name = t.name().clone();
    assert!(Netns::list().unwrap().contains(&name));
    assert!(matches!(
        Netns::create(&name),
        Err(netns::Error::AlreadyExists(_))
    ));

    let before = my_netns_inode();
    let inside = t.ns.run(my_netns_inode).unwrap();
    assert_ne!(inside, before, "run() must execute in the namespace");
    assert_eq!(my_netns_inode(), before, "the caller's thread never moves");

    // Network sysctls are per namespace.
    t.ns.run(|| sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    assert_eq!(
        t.ns.run(|| sysctl::get("net.ipv4.ip_forward"))
            .unwrap()
            .unwrap(),
        "1"
    );
    let other = TestNs::new("life2").await;
    assert_eq!(
        other
            .ns
            .run(|| sysctl::get("net.ipv4.ip_forward"))
            .unwrap()
            .unwrap(),
        "0"
    );

    // A spawned process runs inside too, and is found by pids().
    let mut child = t.ns.command("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    assert!(t.ns.pids().unwrap().contains(&pid));
    child.kill().unwrap();
    child.wait().unwrap();

    assert!(Netns::delete(&name).unwrap());
    assert!(!Netns::list().unwrap().contains(&name));
    assert!(
        !Netns::delete(&name).unwrap(),
        "deleting twice is not an error"
    );
    assert!(matches!(Netns::open(&name), Err(netns::Error::NotFound(_))));
}

#[tokio::test]
async fn stale_entry_is_detected_and_removed() {
    let t = TestNs::new("stale").await;
    let name: dataplane::NetnsName = format!("{}-x", t.name()).parse().unwrap();
    std::fs::write(Netns::path_of(&name), b"").unwrap();
    assert!(matches!(
        Netns::open(&name),
        Err(netns::Error::NotANamespace(_))
    ));
    assert!(Netns::delete(&name).unwrap());
    assert!(!Netns::path_of(&name).exists());
}

#[tokio::test]
async fn sockets_opened_inside_stay_inside() {
    let a = TestNs::new("sa").await;
    let b = TestNs::new("sb").await;
    common::wire(&a, "eth0", "10.9.0.1/24", &b, "eth0", "10.9.0.2/24").await;
    let seen = common::tcp_source_seen(&a, &b, "10.9.0.2:7000", "10.9.0.2:7000");
    assert_eq!(seen, "10.9.0.1");
    // From a third, unwired namespace the address is unreachable: the sockets really were inside
    // their namespaces. (Never probe from the root namespace: that would leave the sandbox.)
    let c = TestNs::new("sc").await;
    let e =
        c.ns.run(|| TcpStream::connect("10.9.0.2:7000"))
            .unwrap()
            .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH), "{e}");
}
