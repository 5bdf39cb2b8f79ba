//! The network path between a client and its server: the byte stream (`transport`: Unix,
//! TCP or TLS, with counters on the socket), the user-space hop that adds a sidecar or
//! distance (`relay`, paced by `timer`), and the bridge path's network namespace
//! (`netns`). It hands streams and relays to `proto`, `route` (a cell's choice of hops)
//! and the loops; it knows nothing of suites, statistics or reports.

pub mod transport;
pub mod timer;
pub mod relay;
pub mod netns;
