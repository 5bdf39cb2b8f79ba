//! When relayed bytes *arrived*: the kernel's receive timestamp of a plain socket.
//!
//! A delayed chunk leaves at its arrival plus the delay. Stamped with `Instant::now()`
//! after `read` returns, the arrival is late by however long the relay's thread took to
//! wake for it; after milliseconds idle that is 40-50 µs on this VM (a halted virtual CPU
//! woken by the host), measured with tcpdump's kernel timestamps on both sides of a 5 ms
//! relay: each direction left 44-53 µs after the requested 2.5 ms. The kernel stamps each
//! packet when it is queued on the socket (`SO_TIMESTAMPNS`), before any thread wakes, so
//! the relay reads that stamp with the bytes (`recvmsg`) and dates the chunk from it.
//!
//! The stamp is the wall clock; it is turned into an [`Instant`] by its age (wall clock
//! now minus the stamp), so a clock step cannot move it. When there is no stamp (a TLS
//! stream read through rustls, a kernel that gives none) the chunk is dated when read,
//! as before.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncReadExt, Interest};
use tokio::net::{tcp, unix};

/// One direction's reading half, by what it can tell of arrivals.
pub(super) enum Reader<'a> {
    Tcp(tcp::ReadHalf<'a>),
    Unix(unix::ReadHalf<'a>),
    /// A stream with no socket under it to ask (TLS): dated when read.
    Plain(Box<dyn AsyncRead + Unpin + 'a>),
}

/// The oldest stamp believed: an older one (a suspended VM, a clock stepped forward) is
/// taken as "now" rather than as a departure long overdue.
pub(super) const MAX_AGE: Duration = Duration::from_secs(1);

impl Reader<'_> {
    /// Asks the kernel to stamp arriving packets (a no-op for [`Reader::Plain`]).
    pub(super) fn stamp_arrivals(&self) {
        match self {
            Reader::Tcp(r) => stamp_arrivals(r.as_ref().as_raw_fd()),
            Reader::Unix(r) => stamp_arrivals(r.as_ref().as_raw_fd()),
            Reader::Plain(_) => {}
        }
    }

    /// Reads like `read`, ignoring arrivals (the undelayed path).
    pub(super) async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Reader::Tcp(r) => r.read(buf).await,
            Reader::Unix(r) => r.read(buf).await,
            Reader::Plain(r) => r.read(buf).await,
        }
    }

    /// Fills `buf` (the TLS sidecar's handshake reads), ignoring arrivals.
    pub(super) async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Reader::Tcp(r) => r.read_exact(buf).await.map(drop),
            Reader::Unix(r) => r.read_exact(buf).await.map(drop),
            Reader::Plain(r) => r.read_exact(buf).await.map(drop),
        }
    }

    /// Reads some bytes and when the last of them arrived (at most now); `None` when
    /// the kernel gave no stamp, or one older than `max_age` (see [`MAX_AGE`]).
    pub(super) async fn read_stamped(
        &mut self,
        buf: &mut [u8],
        max_age: Duration,
    ) -> io::Result<(usize, Option<Instant>)> {
        let (n, wall) = match self {
            Reader::Tcp(r) => {
                let s = r.as_ref();
                s.async_io(Interest::READABLE, || recv_stamped(s.as_raw_fd(), buf))
                    .await?
            }
            Reader::Unix(r) => {
                let s = r.as_ref();
                s.async_io(Interest::READABLE, || recv_stamped(s.as_raw_fd(), buf))
                    .await?
            }
            Reader::Plain(r) => (r.read(buf).await?, None),
        };
        let now = Instant::now();
        let age = wall.and_then(|w| SystemTime::now().duration_since(w).ok());
        let arrival = match age {
            Some(age) if age <= max_age => Some(now.checked_sub(age).unwrap_or(now)),
            _ => None,
        };
        Ok((n, arrival))
    }
}

/// Asks the kernel to stamp the packets arriving on socket `fd` (also before anything
/// reads them: a connection held for its handshake).
pub(super) fn stamp_arrivals(fd: i32) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt on a descriptor the caller holds, with a correctly sized int. A
    // failure only leaves chunks dated when read.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// How many bytes socket `fd` holds unread (`FIONREAD`); 0 when it cannot tell.
pub(super) fn queued(fd: i32) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD on a descriptor the caller holds writes one int.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

/// One `recvmsg` with room for a timestamp: the bytes read and the last packet's stamp.
fn recv_stamped(fd: i32, buf: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    // Room for one cmsg holding a timespec, u64-aligned as cmsghdr requires.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let n = loop {
        // SAFETY: fd is a socket the caller borrows; msg points at live buffers.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        // A signal (Ctrl-C's handler) is not the connection's error.
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut stamp = None;
    // SAFETY: walking the control buffer the kernel filled, with the libc macros, which
    // stop at msg_controllen; a timespec is read unaligned from the cmsg's data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                if ts.tv_sec > 0 {
                    stamp = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}
