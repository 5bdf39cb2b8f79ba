//! `connbench completions SHELL`: a completion script generated from the clap definitions
//! (clap_complete), so it names every command and flag of this very build.

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::exit::Exit;
use crate::setup::emit;

pub fn print_completions(shell: clap_complete::Shell) -> Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "connbench", &mut script);
    emit(&String::from_utf8_lossy(&script));
    Ok(Exit::Success)
}
