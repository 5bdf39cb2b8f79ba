//! TCP's handshake at a distance: when a relayed connection may carry its first bytes.
//!
//! The kernel completes a TCP handshake to the relay itself, at once, so a relay that
//! opened its upstream on accept and forwarded the client's first bytes with only the
//! one-way delay would let a new connection skip the round trip a real network makes it
//! pay. On a real path of round trip R the client's SYN reaches the server after R/2, the
//! SYN-ACK comes back after R (the client's `connect` returns and its first bytes may
//! leave), and the client's ACK reaches the server after 1.5 R: only then does the
//! server's `accept` return, and only then does a server that speaks first (MySQL's
//! greeting) send anything. So a PostgreSQL connect pays one round trip more than its
//! messages, and a MySQL connect pays the SYN's round trip and the greeting's.
//!
//! The relay emulates exactly that: it opens its upstream when the ACK would have arrived
//! (`server_accepts`), and dates the client's bytes no earlier than when its `connect`
//! would have returned (`client_sends`), so they reach the server no earlier than a real
//! network would deliver them. Each of the three legs has the direction's delay and
//! jitter, drawn as a data chunk's are.
//!
//! What it cannot do: the client's own `connect` still returns at once (the kernel
//! answered it), so a client that times its socket connect apart sees that phase short
//! and the next one long by the same amount; the sum is what a network gives. An
//! upstream that refuses is learnt at `server_accepts` (1.5 R) rather than at the
//! SYN-ACK's R. Slow start, delayed ACKs and loss are not emulated (docs/reference.md,
//! "The relay").

use std::time::{Duration, Instant};

use super::Shape;
use crate::rng::Rng;

/// When a relayed connection's first bytes may move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Handshake {
    /// The client's `connect` would have returned: its bytes leave no earlier.
    pub client_sends: Instant,
    /// The client's ACK would have reached the server: the upstream is opened then.
    pub server_accepts: Instant,
}

impl Handshake {
    /// The handshake of a connection accepted at `accepted`; `None` when the shape adds
    /// no delay (a sidecar's hop, or only a bandwidth cap).
    pub(super) fn at(shape: &Shape, seed: u64, accepted: Instant) -> Option<Handshake> {
        if shape.one_way.is_zero() && shape.jitter.is_zero() {
            return None;
        }
        let mut rng = Rng::new(seed.rotate_left(17) | 1);
        let syn = leg(shape, &mut rng);
        let syn_ack = leg(shape, &mut rng);
        let ack = leg(shape, &mut rng);
        Some(Handshake {
            client_sends: accepted + syn + syn_ack,
            server_accepts: accepted + syn + syn_ack + ack,
        })
    }

    /// How long the connection is held before the upstream opens: the oldest a stamp of
    /// the client's first bytes can be when they are read.
    pub(super) fn hold(&self, accepted: Instant) -> Duration {
        self.server_accepts.saturating_duration_since(accepted)
    }
}

/// One leg's one-way delay: the shape's, ± its jitter, never below zero (as a chunk's).
pub(super) fn leg(shape: &Shape, rng: &mut Rng) -> Duration {
    if shape.jitter.is_zero() {
        return shape.one_way;
    }
    let j = shape.jitter.as_secs_f64() * (2.0 * rng.unit() - 1.0);
    Duration::from_secs_f64((shape.one_way.as_secs_f64() + j).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_waits_one_and_a_half_round_trips_for_the_server() {
        let t0 = Instant::now();
        let h = Handshake::at(&Shape::rtt(Duration::from_millis(50)), 7, t0).unwrap();
        assert_eq!(h.client_sends - t0, Duration::from_millis(50));
        assert_eq!(h.server_accepts - t0, Duration::from_millis(75));
        assert_eq!(h.hold(t0), Duration::from_millis(75));
        assert!(Handshake::at(&Shape::rtt(Duration::ZERO), 7, t0).is_none());
    }

    #[test]
    fn jitter_moves_each_leg_within_its_band() {
        let t0 = Instant::now();
        let mut shape = Shape::rtt(Duration::from_millis(20));
        shape.jitter = Duration::from_millis(4);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for seed in 0..200 {
            let h = Handshake::at(&shape, seed, t0).unwrap();
            let d = h.server_accepts - t0;
            assert!(
                d >= Duration::from_millis(18) && d <= Duration::from_millis(42),
                "{d:?}"
            );
            assert!(h.client_sends <= h.server_accepts);
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(
            hi - lo > Duration::from_millis(4),
            "jitter drawn per connection: {lo:?}..{hi:?}"
        );
    }
}
