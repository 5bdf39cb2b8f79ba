//! The server's size: the sandbox's database servers (and, apart, PgBouncer) under a CPU
//! quota of a decimal number of cores, so the curve of throughput against the server's
//! cores can be drawn on one machine (`--server-cpus`, `--pooler-cpus`, the `server_cpus`
//! axis).
//!
//! What it owns: for a sandbox in `/tmp/cb-XXXXXX`, a cgroup `connbench-cb-XXXXXX` with two
//! children, `server` (PostgreSQL's postmaster and so every backend it forks, and MariaDB
//! when the sandbox runs it) and `pooler` (PgBouncer). On cgroup v1 they are made in the
//! `cpu` hierarchy (`cpu.cfs_quota_us` over `cpu.cfs_period_us`) and again in `cpuacct`
//! when that is mounted apart (it holds the CPU counters); on cgroup v2 once, under the
//! mount's root or `CONNBENCH_CGROUP_PARENT` (a delegated subtree), with `cpu.max`. A
//! quota is a ceiling on CPU time per period, so it can be changed at any moment without
//! restarting anything ([`Cgroups::set_cpus`]), and the group's counters give the
//! server's CPU exactly, forks and exits included.
//!
//! A server joins its group at spawn, before `exec`: the child writes its own pid into
//! `cgroup.procs` while still root and only then drops to the servers' user (a process
//! moved later leaves the children it already forked outside). The groups are removed
//! when the sandbox stops, by the sandbox's watchdog after a SIGKILL of connbench, and, as
//! a last resort, by the next sandbox start, which removes every empty `connbench-*` group
//! whose sandbox directory is gone ([`sweep`]).
//!
//! Why no crate: this is a handful of files written with plain text (`mkdir`, a number,
//! `rmdir`), and the crates that wrap cgroups either cover one version only or bring a
//! process manager along.

use std::ffi::CString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The CFS period the quota is a share of: 10 ms, not the kernel's default 100 ms. A
/// server held to half a core over 100 ms runs 50 ms and then stalls for 50 (a p99 of
/// 68 ms at 0.5 core in the lab, and 100 ms turns of suite cells landing wholly in a
/// stall or not); over 10 ms the stalls are 5 ms, nearer a slower CPU than a frozen one,
/// for a little more scheduler work.
const PERIOD_US: u64 = 10_000;

/// The smallest quota the kernel accepts is 1 ms per period: a tenth of a core.
pub const MIN_CPUS: f64 = 0.1;

/// Prefix of every cgroup connbench makes (what [`sweep`] looks for).
const PREFIX: &str = "connbench-";

/// Where the CPU controller lives on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// cgroup v1: the `cpu` hierarchy and the `cpuacct` one (the same directory when
    /// they are mounted together).
    V1 { cpu: PathBuf, cpuacct: PathBuf },
    /// cgroup v2: the directory groups are made under (the mount point, or a delegated
    /// subtree).
    V2 { base: PathBuf },
}

/// Which quota a sandbox's servers run under, in cores; `None` is the whole machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cpus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooler: Option<f64>,
}

impl Cpus {
    pub fn any(&self) -> bool {
        self.server.is_some() || self.pooler.is_some()
    }
}

/// Parses a number of cores (`0.5`, `2`): what `--server-cpus` and `server_cpus = [...]`
/// take.
pub fn parse_cpus(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (MIN_CPUS..=4096.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of cores from {MIN_CPUS} up (e.g. 0.5, 1, 2)"
        )),
    }
}

/// One of a sandbox's groups (`server` or `pooler`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    /// The quota in cores; `None` for none.
    pub cpus: Option<f64>,
    /// The directory whose quota file limits the group (v1: in `cpu`).
    pub quota_dir: PathBuf,
    /// The directory whose counters give the group's CPU time (v1: in `cpuacct`), what
    /// `--server-cgroup` would take.
    pub cpu_dir: PathBuf,
    /// Every directory a member's pid is written to (one per hierarchy).
    pub dirs: Vec<PathBuf>,
}

/// A sandbox's cgroups, as `sandbox.json` and `sandbox start --json` describe them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cgroups {
    pub server: Group,
    pub pooler: Group,
    /// The `connbench-*` directories (one per hierarchy), removed after their children.
    pub top: Vec<PathBuf>,
    /// cgroup v2 (`cpu.max`) rather than v1 (`cpu.cfs_quota_us`).
    pub v2: bool,
}

/// What to say when the quota cannot be set up, after what was tried.
const NEEDS: &str = "a CPU quota for the sandbox's servers needs root with a writable cgroup filesystem \
     (a container: --privileged, or /sys/fs/cgroup mounted read-write), or on cgroup v2 a delegated \
     subtree with the cpu controller named in CONNBENCH_CGROUP_PARENT";

impl Layout {
    /// Finds the CPU controller from `/proc/self/mountinfo`: a v1 `cpu` hierarchy if one is
    /// mounted (a hybrid machine's v2 mount then has no CPU controller), else a v2 mount
    /// whose `cgroup.controllers` lists `cpu`.
    pub fn detect() -> Result<Layout> {
        let text = fs::read_to_string("/proc/self/mountinfo")
            .context("cannot read /proc/self/mountinfo to find the cgroup filesystem")?;
        let parent = std::env::var_os("CONNBENCH_CGROUP_PARENT").map(PathBuf::from);
        Layout::from_mountinfo(&text, parent, |dir| {
            fs::read_to_string(dir.join("cgroup.controllers")).ok()
        })
        .ok_or_else(|| anyhow::anyhow!("no cgroup filesystem with the cpu controller is mounted; {NEEDS}"))
    }

    fn from_mountinfo(
        text: &str,
        parent: Option<PathBuf>,
        controllers: impl Fn(&Path) -> Option<String>,
    ) -> Option<Layout> {
        let mut v1_cpu = None;
        let mut v1_cpuacct = None;
        let mut v2 = None;
        for line in text.lines() {
            // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (Some(mount), Some(fstype)) = (left.get(4), right.first()) else {
                continue;
            };
            let mount = PathBuf::from(mount.replace("\\040", " "));
            match *fstype {
                "cgroup" => {
                    let opts = right.get(2).copied().unwrap_or("");
                    let has = |c: &str| opts.split(',').any(|o| o == c);
                    if has("cpu") {
                        v1_cpu = Some(mount.clone());
                    }
                    if has("cpuacct") {
                        v1_cpuacct = Some(mount);
                    }
                }
                "cgroup2" if v2.is_none() => v2 = Some(mount),
                _ => {}
            }
        }
        if let Some(cpu) = v1_cpu {
            let cpuacct = v1_cpuacct.unwrap_or_else(|| cpu.clone());
            return Some(Layout::V1 { cpu, cpuacct });
        }
        let base = parent.or(v2)?;
        controllers(&base)
            .is_some_and(|c| c.split_ascii_whitespace().any(|c| c == "cpu"))
            .then_some(Layout::V2 { base })
    }

    /// The directories groups are made under, one per hierarchy.
    fn roots(&self) -> Vec<PathBuf> {
        match self {
            Layout::V1 { cpu, cpuacct } if cpu == cpuacct => vec![cpu.clone()],
            Layout::V1 { cpu, cpuacct } => vec![cpu.clone(), cpuacct.clone()],
            Layout::V2 { base } => vec![base.clone()],
        }
    }
}

/// Whether a CPU quota can be set here, found without a sandbox: the cpu controller is
/// mounted and a group can be made (and is removed at once) under each root. The lab
/// asks this before a suite with a `server_cpus` axis, so a machine without the right
/// skips that suite with the reason instead of failing the lab.
pub fn check_supported() -> Result<()> {
    let layout = Layout::detect()?;
    for root in layout.roots() {
        let probe = root.join(format!("{PREFIX}probe-{}", std::process::id()));
        fs::create_dir(&probe)
            .map_err(|e| anyhow::anyhow!("cannot make a cgroup in {} ({e}); {NEEDS}", root.display()))?;
        let _ = fs::remove_dir(&probe);
    }
    Ok(())
}

/// The cgroup name for a sandbox directory: `connbench-` and the directory's name.
fn name_for(sandbox_dir: &Path) -> String {
    let leaf = sandbox_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sandbox".into());
    format!("{PREFIX}{leaf}")
}

impl Cgroups {
    /// Where a sandbox's groups go (nothing is made yet).
    pub fn plan(layout: &Layout, sandbox_dir: &Path, cpus: Cpus) -> Cgroups {
        let name = name_for(sandbox_dir);
        let top: Vec<PathBuf> = layout.roots().iter().map(|r| r.join(&name)).collect();
        let group = |leaf: &str, cpus: Option<f64>| {
            let dirs: Vec<PathBuf> = top.iter().map(|t| t.join(leaf)).collect();
            let (quota_dir, cpu_dir) = match layout {
                Layout::V1 { cpu, cpuacct } => (cpu.join(&name).join(leaf), cpuacct.join(&name).join(leaf)),
                Layout::V2 { base } => (base.join(&name).join(leaf), base.join(&name).join(leaf)),
            };
            Group {
                cpus,
                quota_dir,
                cpu_dir,
                dirs,
            }
        };
        Cgroups {
            server: group("server", cpus.server),
            pooler: group("pooler", cpus.pooler),
            top,
            v2: matches!(layout, Layout::V2 { .. }),
        }
    }

    /// Every directory, children before their parent: the order they are removed in.
    pub fn dirs_to_remove(&self) -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = self.server.dirs.clone();
        all.extend(self.pooler.dirs.iter().cloned());
        all.extend(self.top.iter().cloned());
        all
    }

    /// Makes the groups and writes their quotas. A refusal (not root, a read-only
    /// cgroup filesystem) is one line naming what is needed; whatever was made before a
    /// failure is removed.
    pub fn create(&self, flag: &str) -> Result<()> {
        let made = (|| -> Result<()> {
            for top in &self.top {
                if self.v2 {
                    // The root hands the controller down on most machines already; a
                    // delegated subtree may need asking (a failure shows below).
                    if let Some(base) = top.parent() {
                        let _ = write(&base.join("cgroup.subtree_control"), "+cpu");
                    }
                }
                mkdir(top, flag)?;
                if self.v2 {
                    // Children get the cpu controller only if their parent hands it down.
                    write(&top.join("cgroup.subtree_control"), "+cpu")
                        .with_context(|| format!("{flag}: cannot enable the cpu controller; {NEEDS}"))?;
                }
            }
            for g in [&self.server, &self.pooler] {
                for d in &g.dirs {
                    mkdir(d, flag)?;
                }
                if !self.v2 {
                    write(&g.quota_dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                }
                set_quota(g, g.cpus, self.v2)?;
            }
            Ok(())
        })();
        if made.is_err() {
            let _ = self.remove(Duration::ZERO);
        }
        made
    }

    /// Makes the groups again if one is gone, just before a server joins them: until a
    /// server is in it a group is empty, and another connbench's [`sweep`] (an older one,
    /// or one that does not see this sandbox's directory) may have removed it.
    pub fn ensure(&self) -> Result<()> {
        if self.dirs_to_remove().iter().all(|d| d.is_dir()) {
            return Ok(());
        }
        self.create("the sandbox's CPU quota")
    }

    /// Changes a group's quota now (`None`: no limit); running servers feel it at their
    /// next period.
    pub fn set_cpus(&mut self, pooler: bool, cpus: Option<f64>) -> Result<()> {
        let v2 = self.v2;
        let g = if pooler {
            &mut self.pooler
        } else {
            &mut self.server
        };
        set_quota(g, cpus, v2)?;
        g.cpus = cpus;
        Ok(())
    }

    /// Removes the groups, retrying for up to `wait` while a member is still exiting
    /// (a cgroup with a process in it cannot be removed).
    pub fn remove(&self, wait: Duration) -> Result<()> {
        remove_dirs(&self.dirs_to_remove(), wait)
    }
}

/// Removes cgroup directories in the order given, each retried until `wait` has passed.
pub fn remove_dirs(dirs: &[PathBuf], wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    for d in dirs {
        loop {
            match fs::remove_dir(d) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => bail!(
                    "cannot remove cgroup {}: {e} (processes still in it: {})",
                    d.display(),
                    fs::read_to_string(d.join("cgroup.procs"))
                        .unwrap_or_default()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            }
        }
    }
    Ok(())
}

fn mkdir(dir: &Path, flag: &str) -> Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => bail!("{flag}: cannot create cgroup {}: {e}; {NEEDS}", dir.display()),
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).with_context(|| format!("cannot write {text:?} to {}", path.display()))
}

/// The text of the quota file for `cpus` cores.
fn quota_text(cpus: Option<f64>, v2: bool) -> String {
    let quota = cpus.map(|c| ((c * PERIOD_US as f64).round() as u64).max(1000));
    match (quota, v2) {
        (Some(q), true) => format!("{q} {PERIOD_US}"),
        (None, true) => format!("max {PERIOD_US}"),
        (Some(q), false) => q.to_string(),
        (None, false) => "-1".to_string(),
    }
}

fn set_quota(g: &Group, cpus: Option<f64>, v2: bool) -> Result<()> {
    let file = g.quota_dir.join(if v2 { "cpu.max" } else { "cpu.cfs_quota_us" });
    write(&file, &quota_text(cpus, v2))
}

/// What a server's child process needs to join its group before `exec`: the paths of
/// each hierarchy's `cgroup.procs`, ready to be opened without allocating.
#[derive(Debug, Clone)]
pub struct Join {
    procs: Vec<CString>,
}

impl Group {
    pub fn join(&self) -> Join {
        Join {
            procs: self
                .dirs
                .iter()
                .filter_map(|d| {
                    CString::new(d.join("cgroup.procs").into_os_string().into_encoded_bytes()).ok()
                })
                .collect(),
        }
    }
}

impl Join {
    /// Writes the calling process's pid into each `cgroup.procs`. Called in the child
    /// between fork and exec, so it only makes system calls (no allocation, no lock).
    pub fn enter_self(&self) -> io::Result<()> {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mut buf = [0u8; 20];
        let text = crate::units::decimal(pid as u64, &mut buf);
        for p in &self.procs {
            // SAFETY: p is a NUL-terminated path; the fd is closed below.
            let fd = unsafe { libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: text points into buf, which outlives the call.
            let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
            let err = io::Error::last_os_error();
            unsafe { libc::close(fd) };
            if n < 0 {
                return Err(err);
            }
        }
        Ok(())
    }
}

/// Removes what a killed connbench left: every `connbench-*` group with no process in it
/// whose sandbox directory (`cb-XXXXXX` in /tmp, in TMPDIR, or one level below /tmp, where
/// tests put their TMPDIR) is gone, and that was made more than a minute ago (a start
/// under way makes its groups before its servers join them, and its directory may be
/// somewhere this does not look). Silent: this runs at every sandbox start, and a group
/// it cannot remove (not root) is simply left for one who can.
pub fn sweep() {
    sweep_older_than(Duration::from_secs(60));
}

/// [`sweep`], for groups made more than `age` ago (tests make a stale group and sweep at
/// once). Directories are also looked for one level below TMPDIR.
pub fn sweep_older_than(age: Duration) {
    let Ok(layout) = Layout::detect() else { return };
    let mut bases: Vec<PathBuf> = vec![PathBuf::from("/tmp")];
    if let Some(t) = std::env::var_os("TMPDIR") {
        bases.push(PathBuf::from(&t));
        if let Ok(entries) = fs::read_dir(&t) {
            bases.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    if let Ok(entries) = fs::read_dir("/tmp") {
        bases.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    let roots = layout.roots();
    for root in &roots {
        let Ok(entries) = fs::read_dir(root) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(leaf) = name.strip_prefix(PREFIX) else {
                continue;
            };
            if leaf.is_empty() || bases.iter().any(|b| b.join(leaf).exists()) {
                continue;
            }
            let top = e.path();
            let young = fs::metadata(&top)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|made| made < age);
            if young {
                continue;
            }
            let children: Vec<PathBuf> = fs::read_dir(&top)
                .map(|c| c.flatten().map(|c| c.path()).filter(|p| p.is_dir()).collect())
                .unwrap_or_default();
            let empty =
                |d: &Path| fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty());
            if empty(&top) && children.iter().all(|c| empty(c)) {
                let mut dirs = children;
                dirs.push(top);
                let _ = remove_dirs(&dirs, Duration::ZERO);
            }
        }
    }
}

/// The cgroups of a sandbox dir that exist now (tests and `sandbox status` look).
pub fn existing_for(sandbox_dir: &Path) -> Vec<PathBuf> {
    let Ok(layout) = Layout::detect() else {
        return Vec::new();
    };
    let name = name_for(sandbox_dir);
    layout
        .roots()
        .iter()
        .map(|r| r.join(&name))
        .filter(|d| d.exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_layout_comes_from_mountinfo() {
        // A hybrid machine (this project's): v1's cpu and cpuacct apart; v2 has no cpu.
        let l = Layout::from_mountinfo(HYBRID, None, |_| Some(String::new())).unwrap();
        assert_eq!(
            l,
            Layout::V1 {
                cpu: "/sys/fs/cgroup/cpu".into(),
                cpuacct: "/sys/fs/cgroup/cpuacct".into()
            }
        );
        let together = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let l = Layout::from_mountinfo(together, None, |_| None).unwrap();
        assert_eq!(l.roots(), vec![PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")]);
        // Pure v2: only when the cpu controller is available there.
        let v2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let l = Layout::from_mountinfo(v2, None, |_| Some("cpuset cpu io memory pids".into()));
        assert_eq!(
            l,
            Some(Layout::V2 {
                base: "/sys/fs/cgroup".into()
            })
        );
        assert_eq!(
            Layout::from_mountinfo(v2, None, |_| Some("memory pids".into())),
            None
        );
        let l = Layout::from_mountinfo(v2, Some("/sys/fs/cgroup/user.slice/x".into()), |_| {
            Some("cpu".into())
        });
        assert_eq!(
            l,
            Some(Layout::V2 {
                base: "/sys/fs/cgroup/user.slice/x".into()
            })
        );
        assert_eq!(Layout::from_mountinfo("", None, |_| Some("cpu".into())), None);
    }

    #[test]
    fn a_plan_names_the_groups_after_the_sandbox_directory() {
        let l = Layout::from_mountinfo(HYBRID, None, |_| None).unwrap();
        let c = Cgroups::plan(
            &l,
            Path::new("/tmp/cb-AbC123"),
            Cpus {
                server: Some(0.5),
                pooler: None,
            },
        );
        assert_eq!(
            c.server.quota_dir,
            PathBuf::from("/sys/fs/cgroup/cpu/connbench-cb-AbC123/server")
        );
        assert_eq!(
            c.server.cpu_dir,
            PathBuf::from("/sys/fs/cgroup/cpuacct/connbench-cb-AbC123/server")
        );
        assert_eq!(
            c.server.dirs.len(),
            2,
            "v1: the pid is written to cpu and cpuacct"
        );
        let order = c.dirs_to_remove();
        assert_eq!(order.len(), 6);
        assert!(order[..4]
            .iter()
            .all(|d| c.top.contains(&d.parent().unwrap().to_path_buf())));
        assert_eq!(&order[4..], &c.top[..], "the parents go last");
    }

    #[test]
    fn quotas_are_written_as_each_version_wants() {
        assert_eq!(quota_text(Some(0.5), false), "5000");
        assert_eq!(quota_text(Some(2.0), true), "20000 10000");
        assert_eq!(quota_text(None, true), "max 10000");
        assert_eq!(quota_text(None, false), "-1");
        assert_eq!(quota_text(Some(0.01), false), "1000", "the kernel's floor");
        assert!(parse_cpus("0.05").unwrap_err().contains("from 0.1 up"));
        assert_eq!(parse_cpus("0.25"), Ok(0.25));
        assert!(parse_cpus("0").unwrap_err().contains("number of cores"));
        assert!(parse_cpus("-1").is_err());
        assert!(parse_cpus("two").is_err());
        assert!(parse_cpus("NaN").is_err());
    }
}
