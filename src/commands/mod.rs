//! Command handlers: one file per command, each turning its validated arguments into
//! plans, running them and printing the report. What they share is not here: setting up
//! a run (targets, routes, the server's size, the Ctrl-C channel, stdout) is `setup`'s,
//! the store's opening the store's and the metrics endpoint `live`'s.

pub mod connect;
pub mod init;
pub mod load;
pub mod suite;
pub mod runs;
pub mod sandbox;
pub mod relay;
pub mod record;
pub mod trace;
pub mod replay;
pub mod kubernetes;
pub mod completions;
pub mod man;
