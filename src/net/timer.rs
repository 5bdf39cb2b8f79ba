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

    /// The timer's own lateness, apart from the machine's: each sleep on the timer is
    /// followed by a sleep of the same length in `std::thread::sleep` (the kernel's
    /// high-resolution `clock_nanosleep`, which has no tick), and the two latenesses are
    /// compared pair by pair. A busy machine delays both wake-ups alike (waiting for a
    /// core: medians of 1.5-2.9 ms for either were seen with two busy loops beside a
    /// build on the 2 cores), so the median of the differences is the timer's own share:
    /// about -40 µs for this timer, with the machine shared or its cores all busy, and
    /// +1.0 to +1.5 ms for tokio's 1 ms wheel (which fires on the tick after the
    /// deadline, and whose driver's `epoll_wait` timeout is whole milliseconds too). Any
    /// timer that wakes on a 1 ms tick is late by the distance to that tick, uniform over
    /// 0-1 ms, so its median difference is near 500 µs or more.
    #[tokio::test]
    async fn wakes_within_a_fraction_of_a_millisecond_of_what_the_kernel_allows() {
        let mut t = PreciseTimer::new().unwrap();
        let mut differences = Vec::new();
        for i in 0..101u64 {
            // 0.3 to 5 ms: below and above FINE, at every phase of a millisecond tick.
            let d = Duration::from_micros(300 + 97 * (i % 50));
            let deadline = Instant::now() + d;
            t.sleep_until(deadline).await.unwrap();
            let now = Instant::now();
            assert!(now >= deadline, "never early");
            let timer = (now - deadline).as_micros() as i64;
            let deadline = Instant::now() + d;
            std::thread::sleep(d);
            let kernel = (Instant::now() - deadline).as_micros() as i64;
            differences.push(timer - kernel);
        }
        differences.sort();
        let median = differences[differences.len() / 2];
        assert!(
            median < 250,
            "the timer wakes {median} µs later than a kernel sleep at the median; a 1 ms tick \
             puts that near 500 µs or more: {differences:?}"
        );
    }
}
