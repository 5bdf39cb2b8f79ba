//! `\shell` and `\setshell`: a script's command line run by `sh -c`, as pgbench's
//! system() and popen() do. This module owns the command line (the words joined by
//! spaces, variables substituted), the child process (a process group of its own, waited
//! for off the client's thread and killed if the client is dropped first; its output
//! goes to connbench's stderr, never into its report on stdout), and reading the integer
//! `\setshell` stores from the first line the command printed. The executor
//! ([`super::executor`]) hands it a command's words and turns a failure into the
//! script's error, naming the command. A rare command: nothing here is on the hot path.

use crate::script::{ShellWord, Vars};

/// The words joined by spaces, each variable's value substituted as SQL text is;
/// `Err(v)` names variable `v`, which is not set.
pub(super) fn command_line(words: &[ShellWord], vars: &Vars) -> Result<String, usize> {
    let mut line = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        match w {
            ShellWord::Text(t) => line.push_str(t),
            ShellWord::Var(v) => {
                if !vars.push_sql(*v, &mut line) {
                    return Err(*v);
                }
            }
        }
    }
    Ok(line)
}

/// Runs `line` by `sh -c`. `\shell` (`capture` false) fails when the command does and
/// answers `None`; `\setshell` (`capture` true) answers the integer the command printed
/// first. `Err` says why not, for the command's error.
pub(super) async fn run(line: &str, capture: bool) -> Result<Option<i64>, String> {
    let (status, stdout) = match spawn_and_wait(line, capture).await {
        Ok(r) => r,
        Err(e) => return Err(format!("could not run sh: {e}")),
    };
    if !capture {
        if !status.success() {
            return Err(format!("the command failed ({status}); fix it or remove \\shell"));
        }
        return Ok(None);
    }
    first_integer(&stdout).map(Some)
}

/// `\setshell`'s integer: pgbench reads the first line (fgets into 64 bytes) and wants
/// an integer there.
fn first_integer(stdout: &[u8]) -> Result<i64, String> {
    let text = String::from_utf8_lossy(stdout);
    let first: String = text
        .split_inclusive('\n')
        .next()
        .unwrap_or("")
        .chars()
        .take(63)
        .collect();
    match first.trim().parse::<i64>() {
        Ok(v) => Ok(v),
        Err(_) if first.is_empty() => {
            Err("could not read result of shell command: it printed nothing".into())
        }
        Err(_) => Err(format!(
            "shell command must return an integer (not {:?}); make it print one number",
            first.trim_end()
        )),
    }
}

/// Runs `sh -c line` and waits for it on a blocking thread, so the worker's other
/// clients go on meanwhile; with `capture`, returns what it printed (else its output goes
/// to connbench's stderr). The child is killed if the client is dropped first (Ctrl-C,
/// the end of the run), so a command that never ends cannot hold connbench open.
async fn spawn_and_wait(line: &str, capture: bool) -> std::io::Result<(std::process::ExitStatus, Vec<u8>)> {
    use std::os::fd::AsFd;
    use std::process::{Command as Process, Stdio};

    /// Kills the child's process group (sh and whatever it started) unless the wait
    /// finished.
    struct KillOnDrop(Option<u32>);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if let Some(pid) = self.0 {
                // SAFETY: kill(2) takes any pid and touches no memory. The pid is our
                // child's, not yet waited for (the guard is disarmed as soon as the wait
                // ends), so it names no other process.
                unsafe {
                    libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
                }
            }
        }
    }

    let mut p = Process::new("sh");
    use std::os::unix::process::CommandExt;
    // A group of its own, so the whole command line can be killed, not only sh.
    p.arg("-c")
        .arg(line)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0);
    if capture {
        p.stdout(Stdio::piped());
    } else {
        let stdout = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        p.stdout(stdout);
    }
    let child = p.spawn()?;
    let mut guard = KillOnDrop(Some(child.id()));
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .map_err(std::io::Error::other)?;
    guard.0 = None;
    let out = waited?;
    Ok((out.status, out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setshell_reads_the_integer_on_the_first_line() {
        assert_eq!(first_integer(b" 42 \nnext\n"), Ok(42));
        assert_eq!(first_integer(b"-7"), Ok(-7));
        assert_eq!(
            first_integer(b""),
            Err("could not read result of shell command: it printed nothing".to_string())
        );
        assert_eq!(
            first_integer(b"4x2\n"),
            Err("shell command must return an integer (not \"4x2\"); make it print one number".to_string())
        );
    }
}
