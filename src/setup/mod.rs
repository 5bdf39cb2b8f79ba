//! Setting up a run, shared by the command handlers and the suite runner: targets as
//! typed (a running sandbox's by name, else a conninfo), routes built and their distance
//! verified, the server's CPU sized for the run, a fresh sandbox's tables, the Ctrl-C
//! channel and stdout with a quiet broken pipe.

pub mod output;
pub mod route;
pub mod server;
pub mod signals;
pub mod tables;
pub mod targets;

pub use output::{emit, write_new};
pub use signals::stop_on_signals;
