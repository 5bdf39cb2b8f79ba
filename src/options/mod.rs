//! The options layer: the one place where what a user typed, on the command line or in a
//! suite file, becomes the plans the measurement loops run.
//!
//! As ripgrep goes from low-level to high-level arguments: each setting has one parser
//! here (`parse_rate`, `parse_length`, ...), which the CLI uses as its clap value parser
//! and a suite cell's settings go through by name, so both sources accept the same
//! values and refuse the rest with the same message. [`LoadOptions`] and
//! [`connect_settings`] gather the typed values; [`LoadOptions::check`] is the validation
//! across settings; [`LoadOptions::plan`] builds the `LoadPlan` load's threads run. Nothing
//! is silently corrected: a value out of range is an error naming the setting and the
//! value (exit 2), never a panic in a worker thread.
//!
//! The layer is split by job: [`parse`] holds every value parser, [`load`] the load
//! options and their plan, [`cell`] what a suite cell's other settings become, and
//! [`command`] the validated options of a command (what its handler reads instead of
//! raw flags). Their items are re-exported here, so callers write `crate::options::X`.

pub mod cell;
pub mod command;
pub mod load;
pub mod parse;

pub use cell::*;
pub use command::*;
pub use load::*;
pub use parse::*;

#[cfg(test)]
mod tests;
