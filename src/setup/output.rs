//! stdout, where a closed pipe ends the program quietly.

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
