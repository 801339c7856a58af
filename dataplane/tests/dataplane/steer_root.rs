//! Per-CPU steering on the real kernel (needs root and two CPUs): with the program attached, a
//! packet sent to a multi-queue TUN device lands in the queue of the sending CPU; detached, the
//! kernel picks the queue by flow, whatever the CPU.

use crate::common;

use std::{
    fs::File,
    io::{ErrorKind, Read},
    net::UdpSocket,
    os::fd::OwnedFd,
};

use common::TestNs;
use dataplane::{
    IfName,
    addr::AddressSpec,
    steer::{TunSteering, unsteer_tun},
    tun::{self, TunOptions},
};
use nix::{sched::CpuSet, unistd::Pid};

fn n(s: &str) -> IfName {
    s.parse().unwrap()
}

/// Sends one datagram to 10.9.0.2 (routed to the TUN device) from a thread pinned to `cpu`.
fn send_from(t: &TestNs, cpu: usize) {
    t.ns.run(|| {
        let mut set = CpuSet::new();
        set.set(cpu).unwrap();
        nix::sched::sched_setaffinity(Pid::from_raw(0), &set).unwrap();
        // One flow throughout: the same source port every time.
        let s = UdpSocket::bind("10.9.0.1:40000").unwrap();
        s.send_to(b"steered", "10.9.0.2:9").unwrap();
    })
    .unwrap();
}

/// Which queues held one of our datagrams (IPv4 to 10.9.0.2; the kernel's own IPv6 chatter
/// is skipped), emptying them.
fn readable(queues: &mut [File]) -> Vec<usize> {
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    for (i, q) in queues.iter_mut().enumerate() {
        loop {
            match q.read(&mut buf) {
                Ok(n) if n >= 20 && buf[0] == 0x45 && buf[16..20] == [10, 9, 0, 2] => out.push(i),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading queue {i}: {e}"),
            }
        }
    }
    out
}

#[tokio::test]
async fn packets_take_the_queue_of_their_cpu_while_steered() {
    let mask = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| mask.is_set(c).unwrap_or(false))
        .take(2)
        .collect();
    assert_eq!(cpus.len(), 2, "this test needs two CPUs");
    let t = TestNs::new("steer").await;
    let fds: Vec<OwnedFd> = (0..2)
        .map(|_| {
            t.ns.run(|| {
                tun::create(
                    &n("tunq"),
                    TunOptions {
                        multi_queue: true,
                        vnet_hdr: false,
                        exclusive: false,
                    },
                )
            })
            .unwrap()
            .unwrap()
        })
        .collect();
    let nl = t.nl();
    nl.add_address(&AddressSpec {
        link: n("tunq"),
        addr: "10.9.0.1/24".parse().unwrap(),
    })
    .await
    .unwrap();
    nl.set_up(&n("tunq"), true).await.unwrap();
    let mut queues: Vec<File> = fds
        .into_iter()
        .map(|fd| {
            nix::fcntl::fcntl(
                &fd,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
            )
            .unwrap();
            File::from(fd)
        })
        .collect();
    readable(&mut queues); // whatever the kernel sent when the link came up

    let prog = TunSteering::load().expect("the kernel accepts the steering program");
    prog.attach(&queues[0]).unwrap();
    for cpu in [cpus[0], cpus[1], cpus[0], cpus[1]] {
        send_from(&t, cpu);
        assert_eq!(readable(&mut queues), vec![cpu % 2], "sent on CPU {cpu}");
    }

    unsteer_tun(&queues[1]).unwrap();
    let mut seen = Vec::new();
    for cpu in [cpus[0], cpus[1], cpus[0], cpus[1]] {
        send_from(&t, cpu);
        seen.extend(readable(&mut queues));
    }
    assert_eq!(seen.len(), 4, "every datagram arrived: {seen:?}");
    assert!(
        seen.iter().all(|q| *q == seen[0]),
        "detached, one flow takes one queue from any CPU: {seen:?}"
    );
}
