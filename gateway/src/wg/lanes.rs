//! The lanes of the data path: one per CPU the process may use (at most
//! [`crate::daemon::MAX_LANES`]), each a TUN queue and a UDP socket that carry what one CPU
//! sends and receives, and where each lane's threads live while lightly loaded.
//!
//! The mapping of CPUs to lanes is the kernel's: the TUN steering program returns the CPU and
//! the kernel takes it modulo the queues; the reuseport program takes it modulo the sockets
//! (`dataplane::steer`). So CPU `c` is carried by lane `c % lanes`, and [`homes`] puts each lane
//! on the first allowed CPU that maps to it. With a cpuset whose CPUs do not map one to one
//! (say {0, 2} for two lanes) some CPUs share a lane whose threads live on another CPU: those
//! still pay a cross-CPU wake-up, as without lanes.

use std::{fs::File, io, net::UdpSocket, os::fd::OwnedFd, sync::Mutex};

use nix::{
    sched::{CpuSet, sched_getaffinity},
    unistd::Pid,
};

use super::{
    half::{RxState, TxState},
    tuning::{SOCKET_BUFFER, TICK},
};

/// One queue pair of the data path: a TUN queue and a UDP socket of the port's reuseport group,
/// which carry what one CPU sent and received (`dataplane::steer`), and each half's state. Its
/// two threads live on that CPU while the gateway is lightly loaded (`wg::affinity`), so a packet
/// is read on the CPU that produced it.
pub(super) struct Lane {
    /// Its place among the lanes (the CPU number modulo their count).
    pub(super) index: usize,
    pub(super) tun: File,
    pub(super) udp: UdpSocket,
    /// The send half's buffers (whichever thread runs it holds them).
    pub(super) tx: Mutex<TxState>,
    /// The receive half's buffers.
    pub(super) rx: Mutex<RxState>,
}

impl Lane {
    pub(super) fn new(index: usize, tun: OwnedFd, udp: UdpSocket) -> io::Result<Lane> {
        udp.set_read_timeout(Some(TICK))?;
        // Bursts of a fast sender must not overflow the socket while we decrypt.
        use nix::sys::socket::{setsockopt, sockopt};
        for (name, r) in [
            (
                "SO_RCVBUFFORCE",
                setsockopt(&udp, sockopt::RcvBufForce, &SOCKET_BUFFER),
            ),
            (
                "SO_SNDBUFFORCE",
                setsockopt(&udp, sockopt::SndBufForce, &SOCKET_BUFFER),
            ),
        ] {
            // Said once, for the first lane: the others get the same answer.
            if let Err(e) = r
                && index == 0
            {
                tracing::warn!(option = name, error = %e, "could not enlarge the UDP socket buffer");
            }
        }
        // Receive many datagrams per call, coalesced by the kernel.
        setsockopt(&udp, sockopt::UdpGroSegment, &true).map_err(io::Error::from)?;
        // Arrival times: how long a datagram waited for us tells a starved thread
        // (`wg::idleclass`). Without them that sign is missing, nothing else.
        if let Err(e) = setsockopt(&udp, sockopt::ReceiveTimestampns, &true)
            && index == 0
        {
            tracing::warn!(error = %e, "could not ask for receive timestamps (SO_TIMESTAMPNS)");
        }
        nix::fcntl::fcntl(
            &tun,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(io::Error::from)?;
        Ok(Lane {
            index,
            tun: File::from(tun),
            udp,
            tx: Mutex::default(),
            rx: Mutex::default(),
        })
    }
}

/// The CPUs the process's main thread may use (the data threads' own masks are ours to
/// change), in order; none when the mask cannot be read.
pub(super) fn allowed_cpus() -> Vec<usize> {
    let Ok(mask) = sched_getaffinity(Pid::this()) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&c| mask.is_set(c).unwrap_or(false))
        .collect()
}

/// Each of `lanes` lanes' home among the `allowed` CPUs: the first whose number modulo `lanes`
/// is the lane's (the steering's choice of lane for that CPU). None for every lane when there
/// is at most one CPU (nothing to gain), and for a lane no allowed CPU maps to.
pub(super) fn homes(allowed: &[usize], lanes: usize) -> Vec<Option<usize>> {
    let lanes = lanes.max(1);
    (0..lanes)
        .map(|lane| {
            if allowed.len() < 2 {
                return None;
            }
            allowed.iter().copied().find(|c| c % lanes == lane)
        })
        .collect()
}

/// How many lanes a gateway whose process may use these CPUs gets: one per CPU, at most
/// `max` (at least one).
pub fn lanes_for(allowed: usize, max: usize) -> usize {
    allowed.clamp(1, max.max(1))
}

/// How many CPUs the process may use now (one if that cannot be read).
pub fn cpus_allowed() -> usize {
    allowed_cpus().len().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_lives_on_the_cpus_it_carries() {
        // Two CPUs, two lanes: lane i on CPU i.
        assert_eq!(homes(&[0, 1], 2), vec![Some(0), Some(1)]);
        // A cpuset of CPUs 2 and 5: CPU 2 steers to lane 0, CPU 5 to lane 1.
        assert_eq!(homes(&[2, 5], 2), vec![Some(2), Some(5)]);
        // CPUs 0 and 2 both steer to lane 0; lane 1 carries nothing and is not pinned.
        assert_eq!(homes(&[0, 2], 2), vec![Some(0), None]);
        // One lane on four CPUs: the lowest (every gateway of a host picks the same).
        assert_eq!(homes(&[1, 2, 3, 4], 1), vec![Some(1)]);
        // One CPU (or none readable): nothing to gain by pinning.
        assert_eq!(homes(&[3], 1), vec![None]);
        assert_eq!(homes(&[], 2), vec![None, None]);
        assert_eq!(lanes_for(2, 16), 2);
        assert_eq!(lanes_for(64, 16), 16);
        assert_eq!(lanes_for(0, 16), 1);
        assert_eq!(lanes_for(8, 0), 1);
    }
}
