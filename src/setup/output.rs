//! stdout, where a closed pipe ends the program quietly; a report's file, never
//! overwritten.

use std::io::Write;

/// Writes to stdout; a closed pipe (`connbench ... | head`) ends the program quietly.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// Writes a new file; one that exists is left alone (a report never overwrites).
pub fn write_new(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .context("cannot create it (an existing file is never overwritten)")?;
    f.write_all(text.as_bytes())?;
    Ok(())
}
