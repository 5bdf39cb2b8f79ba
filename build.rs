//! Stamps the version `connbench --version` prints: the package version, the git commit
//! it was built from (short hash, `-dirty` when the work tree had changes) and the build
//! date, as `0.1.0 (3f2a9c1-dirty, built 2026-11-25)`.
//!
//! Git is asked only when the package directory has its own `.git` (a checkout or a
//! worktree), so a crate tarball unpacked inside some other repository does not take that
//! repository's commit. Without git, or when git fails, the commit is "unknown commit";
//! nothing here can fail the build. `CONNBENCH_COMMIT` overrides the commit (a container
//! build whose context has no `.git`), and `SOURCE_DATE_EPOCH` the date (reproducible
//! builds).

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CONNBENCH_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = match std::env::var("CONNBENCH_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            if dir.join(".git").exists() {
                watch_work_tree(dir);
            }
            commit(dir)
        }
    };
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    println!(
        "cargo:rustc-env=CONNBENCH_VERSION={} ({commit}, built {})",
        env!("CARGO_PKG_VERSION"),
        date(epoch)
    );
    println!("cargo:rustc-env=CONNBENCH_BUILD_DATE={}", date(epoch));
}

/// The commit `dir` holds: `3f2a9c1`, or `3f2a9c1-dirty` when `git status` lists any
/// change (untracked files included: a new module is part of the build before it is
/// added); "unknown commit" when `dir` has no `.git` of its own or git fails.
/// (tests/it/install.rs includes this file to test it.)
pub fn commit(dir: &Path) -> String {
    if !dir.join(".git").exists() {
        return "unknown commit".into();
    }
    git_commit(dir).unwrap_or_else(|| "unknown commit".into())
}

fn git_commit(dir: &Path) -> Option<String> {
    let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
    let hash = hash.trim();
    if hash.is_empty() {
        return None;
    }
    // --no-optional-locks: status must not rewrite the index, which is watched below.
    let status = git(dir, &["--no-optional-locks", "status", "--porcelain"])?;
    Some(if status.trim().is_empty() {
        hash.to_string()
    } else {
        format!("{hash}-dirty")
    })
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reruns this script when the commit or the binary's sources change: git's HEAD, the
/// branch it points at, the index, and what the binary is built from (a directory is
/// watched whole). A change to docs alone does not rebuild the crate (a rerun here
/// recompiles it, minutes in release), so `-dirty` speaks for the sources. Only paths
/// that exist are named: Cargo reruns on every build for a missing one.
fn watch_work_tree(dir: &Path) {
    let mut paths = Vec::new();
    for p in ["HEAD", "index", "packed-refs"] {
        paths.extend(git(dir, &["rev-parse", "--git-path", p]));
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        paths.extend(git(dir, &["rev-parse", "--git-path", branch.trim()]));
    }
    paths.extend(
        ["src", "suites", "Cargo.toml", "Cargo.lock"]
            .iter()
            .map(|p| p.to_string()),
    );
    for p in paths {
        let p = dir.join(p.trim());
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}

/// A Unix time as YYYY-MM-DD (UTC), by Howard Hinnant's days-to-civil algorithm.
pub fn date(epoch_s: i64) -> String {
    let z = epoch_s.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
