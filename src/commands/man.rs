//! `connbench man`: the manual pages, generated from the clap definitions (clap_mangen):
//! connbench(1) on standard output, or with `--dir` that page and one per command
//! (connbench-load(1), connbench-runs-list(1), ...), which connbench(1) refers to.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;
use crate::exit::Exit;
use crate::setup::emit;

pub fn run_man(dir: Option<&Path>) -> Result<Exit> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Building sets each subcommand's display name (connbench-load), its page's name.
    cmd.build();
    match dir {
        None => {
            let mut roff = Vec::new();
            page(cmd).render(&mut roff)?;
            emit(&String::from_utf8_lossy(&roff));
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let written = write_pages(cmd, dir)?;
            eprintln!("wrote {written} manual pages into {}", dir.display());
        }
    }
    Ok(Exit::Success)
}

/// One command's page: titled in capitals as man pages are (CONNBENCH-LOAD), dated by
/// the build, with the version in the footer.
fn page(cmd: clap::Command) -> clap_mangen::Man {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    clap_mangen::Man::new(cmd)
        .title(name.to_uppercase())
        .date(env!("CONNBENCH_BUILD_DATE"))
        .source(format!("connbench {}", env!("CARGO_PKG_VERSION")))
        .manual("connbench manual")
}

/// Writes `cmd`'s page and its subcommands' (hidden ones left out) into `dir`; returns
/// how many.
fn write_pages(cmd: clap::Command, dir: &Path) -> Result<usize> {
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_pages(sub.clone(), dir)?;
    }
    let man = page(cmd);
    let path = dir.join(man.get_filename());
    man.generate_to(dir)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(written + 1)
}
