//! Sleeping until an instant with sub-millisecond accuracy.
//!
//! tokio's timer wheel has a 1 ms granularity and rounds up, so a paced client would start
//! up to a millisecond late, and under `-R` that lateness is charged to latency (which
//! runs from the intended start). [`PreciseTimer`] sleeps the coarse part on tokio's
//! timer and the last stretch on a Linux `timerfd` (a high-resolution kernel timer) that
//! the runtime's epoll waits on, so other tasks keep running meanwhile. One timer per
//! client is reused for every sleep.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// Below this much remaining time the kernel timer takes over from tokio's.
const FINE: Duration = Duration::from_millis(2);

/// A reusable high-resolution sleep.
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: timerfd_create returns a new descriptor or -1; we own it from here on.
        let raw =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns the descriptor, so it stays open until deregistered.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(PreciseTimer { fd })
    }

    /// Returns at `deadline` (a few tens of microseconds after it at worst: the kernel's
    /// timer slack), or at once when it has passed.
    pub async fn sleep_until(&mut self, deadline: Instant) -> io::Result<()> {
        let now = Instant::now();
        if deadline <= now {
            return Ok(());
        }
        if deadline - now > FINE {
            tokio::time::sleep_until((deadline - FINE).into()).await;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(());
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: remaining.as_secs() as libc::time_t,
                tv_nsec: remaining.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        if unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reading 8 bytes into an 8-byte buffer from our descriptor.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                guard.clear_ready();
                continue;
            }
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_within_a_fraction_of_a_millisecond() {
        let mut t = PreciseTimer::new().unwrap();
        let mut lateness = Vec::new();
        for i in 0..50u64 {
            let deadline = Instant::now() + Duration::from_micros(300 + 97 * i);
            t.sleep_until(deadline).await.unwrap();
            let now = Instant::now();
            assert!(now >= deadline, "never early");
            lateness.push((now - deadline).as_micros());
        }
        lateness.sort();
        // tokio's own timer rounds every deadline up to its next millisecond tick, so none
        // of its wake-ups is less than a few hundred µs late on average; the kernel timer
        // wakes within its 50 µs slack when the thread gets a core at once. On a busy
        // machine (every core taken by other work) the median wake-up also waits for a
        // core, so the bound is on the quickest tenth, which still shows the timer's
        // resolution: a millisecond tick could not put five of fifty under 300 µs.
        assert!(
            lateness[5] < 300,
            "10th percentile lateness {} µs: {lateness:?}",
            lateness[5]
        );
    }
}
