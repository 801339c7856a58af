//! Watching a link: an AF_PACKET capture of its IPv4 UDP datagrams, both ways, handed to a
//! closure on a thread of its own until stopped (or dropped).

use std::{
    net::{Ipv4Addr, SocketAddrV4},
    os::fd::AsRawFd,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

use dataplane::Netns;

/// One captured datagram.
pub struct Datagram<'a> {
    /// Sent by the namespace (else received by it).
    pub outgoing: bool,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// The UDP payload. A UDP GSO batch on its way through a veth is one large datagram here.
    pub payload: &'a [u8],
}

/// A running capture.
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Capture {
    /// Captures the unfragmented IPv4 UDP datagrams `link` in `ns` sends and receives, passing
    /// each to `f`.
    pub fn start(
        ns: &Netns,
        link: &str,
        mut f: impl FnMut(&Datagram<'_>) + Send + 'static,
    ) -> Capture {
        use nix::sys::socket::{
            AddressFamily, LinkAddr, SockFlag, SockProtocol, SockType, recvfrom, setsockopt,
            socket, sockopt,
        };
        let link = link.to_owned();
        let (fd, index) = ns
            .run(move || {
                // Unbound, it sees every frame of the namespace; `link`'s are picked below.
                let fd = socket(
                    AddressFamily::Packet,
                    SockType::Datagram,
                    SockFlag::empty(),
                    SockProtocol::EthAll,
                )
                .expect("AF_PACKET socket");
                setsockopt(
                    &fd,
                    sockopt::ReceiveTimeout,
                    &nix::sys::time::TimeVal::new(0, 100_000),
                )
                .unwrap();
                let index = nix::net::if_::if_nametoindex(link.as_str()).expect("the link");
                (fd, index as usize)
            })
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut buf = vec![0u8; 65_600];
            while !stopped.load(Ordering::Relaxed) {
                let Ok((n, Some(from))) = recvfrom::<LinkAddr>(fd.as_raw_fd(), &mut buf) else {
                    continue; // a timeout: check `stop`
                };
                if from.ifindex() != index {
                    continue;
                }
                if let Some(d) = udp(&buf[..n], from.pkttype() == libc::PACKET_OUTGOING) {
                    f(&d);
                }
            }
        });
        Capture {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the capture and waits for its thread (a panic in the closure is raised here).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take()
            && let Err(panic) = t.join()
        {
            std::panic::resume_unwind(panic);
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // Dropped without `stop`: the test is already failing or done; a panic of the
            // closure was printed by the thread.
            drop(t.join());
        }
    }
}

/// The UDP datagram in IPv4 packet `p`, unless it is something else or a fragment.
fn udp(p: &[u8], outgoing: bool) -> Option<Datagram<'_>> {
    let ihl = usize::from(p.first()? & 0x0f) * 4;
    let fragment = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x3fff != 0;
    if p[0] >> 4 != 4 || p.get(9) != Some(&17) || fragment || p.len() < ihl + 8 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).clamp(ihl + 8, p.len());
    let addr = |at: usize, port_at: usize| {
        SocketAddrV4::new(
            Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]),
            u16::from_be_bytes([p[port_at], p[port_at + 1]]),
        )
    };
    Some(Datagram {
        outgoing,
        src: addr(12, ihl),
        dst: addr(16, ihl + 2),
        payload: &p[ihl + 8..total],
    })
}
