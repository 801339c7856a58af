//! TUN devices. The device is created in the namespace of the calling thread: call
//! [`create`] from [`crate::netns::Netns::run`] to create it elsewhere.

use std::{
    fs::OpenOptions,
    io,
    os::fd::{AsRawFd, OwnedFd},
};

use crate::names::IfName;

/// What went wrong creating a TUN device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `/dev/net/tun` could not be opened.
    #[error("opening /dev/net/tun")]
    Open(#[source] io::Error),
    /// The kernel refused the device.
    #[error("creating tun device {name}")]
    Create {
        /// The device.
        name: IfName,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// Options of a TUN device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunOptions {
    /// One queue per file descriptor (`IFF_MULTI_QUEUE`).
    pub multi_queue: bool,
    /// Prefix frames with a `virtio_net_hdr` (`IFF_VNET_HDR`) and let the kernel hand over
    /// TCP/IPv4 super-packets with partial checksums (`TUNSETOFFLOAD` with `TUN_F_CSUM` and
    /// `TUN_F_TSO4`); the reader segments them, and may write super-packets back.
    pub vnet_hdr: bool,
    /// Fail (`EBUSY`) if the device exists already (`IFF_TUN_EXCL`): a multi-queue device
    /// otherwise gains a queue, and a second process would silently read part of its packets.
    pub exclusive: bool,
}

/// `IFF_TUN_EXCL`.
const IFF_TUN_EXCL: libc::c_int = 0x8000;

/// `TUN_F_CSUM`: the reader handles partial checksums.
const TUN_F_CSUM: u64 = 0x01;
/// `TUN_F_TSO4`: the reader handles TCP/IPv4 segmentation.
const TUN_F_TSO4: u64 = 0x02;

nix::ioctl_write_int!(tunsetiff, b'T', 202);
nix::ioctl_write_int!(tunsetoffload, b'T', 208);

/// Creates (or attaches another queue to) the TUN device `name` and returns its descriptor.
/// Frames carry no packet-information header (`IFF_NO_PI`). The device lives as long as a
/// descriptor is open.
#[expect(
    unsafe_code,
    reason = "TUNSETIFF is an ioctl with a struct ifreq argument"
)]
pub fn create(name: &IfName, opts: TunOptions) -> Result<OwnedFd, Error> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(Error::Open)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.as_str().bytes()) {
        *dst = src as libc::c_char;
    }
    let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
    if opts.multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    if opts.vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    if opts.exclusive {
        flags |= IFF_TUN_EXCL;
    }
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: the fd is an open /dev/net/tun; `req` is a valid ifreq that outlives the call
    // (IfName guarantees the name fits in IFNAMSIZ with its terminating NUL).
    unsafe { tunsetiff(file.as_raw_fd(), std::ptr::addr_of_mut!(req) as u64) }.map_err(|e| {
        Error::Create {
            name: name.clone(),
            source: io::Error::from_raw_os_error(e as i32),
        }
    })?;
    if opts.vnet_hdr {
        // SAFETY: TUNSETOFFLOAD takes its flags by value; the fd is the TUN device just set up.
        unsafe { tunsetoffload(file.as_raw_fd(), TUN_F_CSUM | TUN_F_TSO4) }.map_err(|e| {
            Error::Create {
                name: name.clone(),
                source: io::Error::from_raw_os_error(e as i32),
            }
        })?;
    }
    Ok(file.into())
}
