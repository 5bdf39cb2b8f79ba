//! How the program ends and what it is: the exit codes every command returns and the
//! version `--version` prints. A leaf: the commands, the flags and the trace header read
//! these, and it reads nothing of connbench's.

/// The version `--version` prints: the package's, the git commit (`-dirty` when the
/// tree had changes, or "unknown commit") and the build date, stamped by `build.rs`.
pub const VERSION: &str = env!("CONNBENCH_VERSION");

/// How the program ended (see `connbench --help` for the numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// The run finished, but a target failed every attempt, every transaction failed, or
    /// every repetition of a suite's cell failed.
    Failed = 1,
    /// Usage or set-up error.
    Usage = 2,
    /// Ctrl-C ended the run; what was measured was still reported.
    Interrupted = 130,
}
