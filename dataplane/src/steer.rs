//! Per-CPU queues: packets stay on the CPU that produced them. A TUN device with one queue per
//! CPU whose queue is chosen by the sending CPU (a two-instruction eBPF steering program,
//! `TUNSETSTEERINGEBPF`), and a group of UDP sockets on one port whose socket is chosen by the
//! CPU that received the datagram (a classic-BPF `SO_ATTACH_REUSEPORT_CBPF` program). A reader
//! per queue that runs on that queue's CPU is woken on the CPU it already runs on: on a virtual
//! machine, waking a thread on another, halted vCPU costs tens of microseconds per packet.
//! Both can be undone (the kernel then picks by flow, which keeps a flow's packets in order
//! when the readers move between CPUs).
//!
//! The programs are built here as instruction arrays (no compiler, no object file); the kernel
//! verifies them. Nothing here decides how many queues there are or where readers run.

use std::{
    io,
    net::{SocketAddr, UdpSocket},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use nix::sys::socket::{
    AddressFamily, SockFlag, SockType, SockaddrIn, SockaddrIn6, bind, setsockopt, socket, sockopt,
};

/// What went wrong setting up steering.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel refused the eBPF steering program.
    #[error("loading the TUN steering program")]
    Load(#[source] io::Error),
    /// The kernel refused to attach a program.
    #[error("attaching the {what} steering program")]
    Attach {
        /// Which program.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A socket of the group could not be made or bound.
    #[error("binding UDP socket {index} of {count} to {addr}")]
    Bind {
        /// Its place in the group.
        index: usize,
        /// The group's size.
        count: usize,
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// `BPF_JMP | BPF_CALL`.
const CALL: u8 = 0x85;
/// `BPF_JMP | BPF_EXIT`.
const EXIT: u8 = 0x95;
/// `BPF_FUNC_get_smp_processor_id`.
const GET_SMP_PROCESSOR_ID: i32 = 8;
/// `BPF_PROG_TYPE_SOCKET_FILTER` (what a TUN steering program is).
const SOCKET_FILTER: u32 = 1;
/// `BPF_PROG_LOAD`.
const PROG_LOAD: libc::c_long = 5;

/// The TUN steering program: the queue is the number of the CPU running the sender (the
/// kernel takes it modulo the number of queues).
pub fn tun_program() -> [Insn; 2] {
    [
        Insn {
            code: CALL,
            regs: 0,
            off: 0,
            imm: GET_SMP_PROCESSOR_ID,
        },
        Insn {
            code: EXIT,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

/// `ld #cpu` (`BPF_LD | BPF_W | BPF_ABS` at `SKF_AD_OFF + SKF_AD_CPU`).
const LD_CPU: (u16, u32) = (0x20, (-0x1000i32 + 36) as u32);
/// `mod #k` (`BPF_ALU | BPF_MOD | BPF_K`).
const MOD_K: u16 = 0x94;
/// `ret a` (`BPF_RET | BPF_A`).
const RET_A: u16 = 0x16;
/// `ret #k` (`BPF_RET | BPF_K`).
const RET_K: u16 = 0x06;

const fn op(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The reuseport program for `count` sockets: the socket is the receiving CPU's number modulo
/// `count` (an index past the group would fall back to a hash).
pub fn reuseport_program(count: usize) -> Vec<libc::sock_filter> {
    vec![
        op(LD_CPU.0, LD_CPU.1),
        op(MOD_K, u32::try_from(count.max(1)).unwrap_or(u32::MAX)),
        op(RET_A, 0),
    ]
}

/// The start of `union bpf_attr` for `BPF_PROG_LOAD` (the kernel zero-fills the rest).
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
}

nix::ioctl_write_ptr_bad!(
    tunsetsteeringebpf,
    nix::request_code_read!(b'T', 224, std::mem::size_of::<libc::c_int>()),
    libc::c_int
);

/// The loaded TUN steering program ([`tun_program`]), attached to and detached from a device
/// as often as needed.
#[derive(Debug)]
pub struct TunSteering(OwnedFd);

impl TunSteering {
    /// Loads the program (the kernel verifies it).
    #[expect(unsafe_code, reason = "bpf(2) takes a raw pointer to union bpf_attr")]
    pub fn load() -> Result<TunSteering, Error> {
        let insns = tun_program();
        let license = c"GPL";
        let attr = ProgLoad {
            prog_type: SOCKET_FILTER,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 0,
            log_size: 0,
            log_buf: 0,
            kern_version: 0,
            prog_flags: 0,
        };
        // SAFETY: `attr` is a valid prefix of `union bpf_attr` for BPF_PROG_LOAD whose pointers
        // (instructions, license) outlive the call; its size is passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                PROG_LOAD,
                std::ptr::addr_of!(attr),
                std::mem::size_of::<ProgLoad>(),
            )
        };
        if fd < 0 {
            return Err(Error::Load(io::Error::last_os_error()));
        }
        let raw = libc::c_int::try_from(fd).map_err(|_| Error::Load(io::Error::other("bad fd")))?;
        // SAFETY: bpf(2) returned a new descriptor that nothing else owns.
        Ok(TunSteering(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Makes the queue of every packet of the multi-queue TUN device `tun` (any queue's
    /// descriptor) the one of the CPU that sends it.
    pub fn attach(&self, tun: &impl AsRawFd) -> Result<(), Error> {
        set_tun_steering(tun, self.0.as_raw_fd())
    }
}

/// Back to the kernel's choice of TUN queue (by flow).
pub fn unsteer_tun(tun: &impl AsRawFd) -> Result<(), Error> {
    set_tun_steering(tun, -1)
}

#[expect(
    unsafe_code,
    reason = "TUNSETSTEERINGEBPF reads an int through a pointer"
)]
fn set_tun_steering(tun: &impl AsRawFd, prog: libc::c_int) -> Result<(), Error> {
    // SAFETY: the ioctl reads one int (a program's descriptor, or -1) from the pointer.
    unsafe { tunsetsteeringebpf(tun.as_raw_fd(), &prog) }.map_err(|e| Error::Attach {
        what: "TUN",
        source: io::Error::from_raw_os_error(e as i32),
    })?;
    Ok(())
}

/// `count` UDP sockets bound to `addr` (port 0: the first one's port) in one reuseport group
/// (the kernel picks a socket by flow until [`steer_udp_by_cpu`]). With one socket, a plain
/// bound socket. A port someone holds already is refused (`EADDRINUSE`), as for one socket.
/// The sockets are blocking.
pub fn bind_udp_group(addr: SocketAddr, count: usize) -> Result<Vec<UdpSocket>, Error> {
    let count = count.max(1);
    let mut socks: Vec<UdpSocket> = Vec::with_capacity(count);
    let mut addr = addr;
    if count > 1 && addr.port() != 0 {
        // A group would silently share the port with another group's process (same user)
        // still holding it: a plain bind first fails as a single socket's would.
        let probe = UdpSocket::bind(addr).map_err(|source| Error::Bind {
            index: 0,
            count,
            addr,
            source,
        })?;
        drop(probe);
    }
    for index in 0..count {
        let fail = |addr, source| Error::Bind {
            index,
            count,
            addr,
            source,
        };
        let family = match addr {
            SocketAddr::V4(_) => AddressFamily::Inet,
            SocketAddr::V6(_) => AddressFamily::Inet6,
        };
        let fd = socket(family, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)
            .map_err(|e| fail(addr, e.into()))?;
        if count > 1 {
            setsockopt(&fd, sockopt::ReusePort, &true).map_err(|e| fail(addr, e.into()))?;
        }
        let bound = match addr {
            SocketAddr::V4(a) => bind(fd.as_raw_fd(), &SockaddrIn::from(a)),
            SocketAddr::V6(a) => bind(fd.as_raw_fd(), &SockaddrIn6::from(a)),
        };
        bound.map_err(|e| fail(addr, e.into()))?;
        let sock = UdpSocket::from(fd);
        if index == 0 {
            // Port 0 asked for any: the others join the port the first one got.
            addr = sock.local_addr().map_err(|e| fail(addr, e))?;
        }
        socks.push(sock);
    }
    Ok(socks)
}

/// Makes each datagram go to the socket of the group of `sock` (any of its `count` members,
/// in the order they joined) whose index is the receiving CPU's number modulo `count`.
pub fn steer_udp_by_cpu(sock: &UdpSocket, count: usize) -> Result<(), Error> {
    attach_cbpf(sock, &mut reuseport_program(count))
}

#[expect(
    unsafe_code,
    reason = "SO_ATTACH_REUSEPORT_CBPF takes a struct sock_fprog"
)]
fn attach_cbpf(sock: &UdpSocket, prog: &mut [libc::sock_filter]) -> Result<(), Error> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the size is the struct's.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            std::ptr::addr_of!(fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(Error::Attach {
            what: "reuseport",
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Back to the kernel's choice of socket in the group of `sock` (by flow): a program whose
/// answer is past every group, so the kernel falls back to its hash (detaching would need
/// Linux 5.3; this works wherever attaching does).
pub fn unsteer_udp(sock: &UdpSocket) -> Result<(), Error> {
    attach_cbpf(sock, &mut [op(RET_K, u32::MAX)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_shares_one_port_and_a_held_port_is_refused() {
        let socks = bind_udp_group("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let port = socks[0].local_addr().unwrap().port();
        assert!(socks.iter().all(|s| s.local_addr().unwrap().port() == port));
        // Steering by CPU and back is accepted by the kernel.
        steer_udp_by_cpu(&socks[1], 3).unwrap();
        unsteer_udp(&socks[0]).unwrap();
        unsteer_udp(&socks[0]).unwrap();
        // The port is held: a second group (or one socket) is refused, naming the address.
        let at = SocketAddr::from(([127, 0, 0, 1], port));
        let e = bind_udp_group(at, 2).unwrap_err();
        assert!(e.to_string().contains(&at.to_string()), "{e}");
        assert!(UdpSocket::bind(at).is_err());
        // Held by a plain socket: a group is refused too.
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = bind_udp_group(plain.local_addr().unwrap(), 2).unwrap_err();
        assert!(matches!(e, Error::Bind { index: 0, .. }), "{e}");
    }

    #[test]
    fn the_tun_program_returns_the_cpu_number() {
        let p = tun_program();
        assert_eq!(p[0].code, CALL);
        assert_eq!(p[0].imm, GET_SMP_PROCESSOR_ID);
        assert_eq!(p[1].code, EXIT);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn the_reuseport_program_takes_the_cpu_modulo_the_group() {
        let p = reuseport_program(3);
        let ops: Vec<(u16, u32)> = p.iter().map(|i| (i.code, i.k)).collect();
        assert_eq!(ops, vec![(0x20, 0xFFFF_F024), (0x94, 3), (0x16, 0)]);
        // A group of none is a group of one (a modulo by zero would be refused).
        assert_eq!(reuseport_program(0)[1].k, 1);
    }
}
