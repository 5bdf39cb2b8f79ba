//! What the machine did while connbench measured: CPU time by state for the whole
//! machine (above all the hypervisor's *steal*) and its context switches, and the CPU
//! time of each group of processes on the path: the server (a process and all its
//! descendants, or a cgroup), the pooler, and the threads connbench runs beside its
//! measuring clients (the in-process relays).
//!
//! Why the process tree and not a cgroup by default: the sandbox's servers run as
//! children of connbench, without root a cgroup cannot be made, and the kernel already
//! keeps what a tree needs. A process's `cutime`/`cstime` in `/proc/PID/stat` hold the CPU
//! of its children once it has reaped them, so a tree's total is, over every live
//! process in it, its own time plus its reaped children's. A PostgreSQL backend that
//! starts and exits inside the window (one per transaction under `-C`) is counted
//! through the postmaster's `cutime` after the postmaster reaps it, which it does at
//! once on SIGCHLD. Between two readings a process that exits while the tree is being
//! read can be missed or counted twice, one backend's CPU at most. A cgroup
//! (`--server-cgroup`, e.g. a container's) is read from its own counters instead.
//!
//! Why steal: on a shared virtual machine the hypervisor sometimes runs another tenant
//! on our physical core. The guest sees it only as "steal" in `/proc/stat`; its threads
//! simply run slower, and their CPU time per transaction grows, because the guest counts
//! stolen time as run time. On this project's 2-core VM whole runs fell to half their
//! throughput at 20-38% steal, while runs at 0-2% agreed within 5%. So a run reports the
//! steal of its window, and a suite retakes a repetition the hypervisor disturbed
//! (see `experiment::runner`): the figure then describes the path, not the neighbour.
//!
//! Everything here reads `/proc` and returns `None` where it cannot (another OS, a
//! container without `/proc/stat`): a figure that could not be read is absent, never 0.

use std::time::Duration;

/// Cumulative CPU time of the whole machine by state, in clock ticks (`/proc/stat`'s
/// first line: user nice system idle iowait irq softirq steal), its context switches, and
/// the packets of every network interface (`/proc/net/dev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineCpu {
    ticks: [u64; 8],
    /// Context switches since boot, every CPU (`ctxt`).
    context_switches: u64,
    /// Packets received and sent on every interface; `None` without `/proc/net/dev`.
    packets: Option<(u64, u64)>,
}

/// Packets received and sent so far, summed over every interface. A packet between two
/// processes of this machine crosses `lo` and counts once each way; a Unix socket
/// sends none.
fn packets(text: &str) -> Option<(u64, u64)> {
    let mut total = (0u64, 0u64);
    for line in text.lines().skip(2) {
        let (_, counters) = line.split_once(':')?;
        let f: Vec<u64> = counters
            .split_ascii_whitespace()
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        // Receive: bytes packets errs drop fifo frame compressed multicast; transmit: the same 8.
        total.0 += *f.get(1)?;
        total.1 += *f.get(9)?;
    }
    Some(total)
}

/// How the machine's CPUs were spent over a window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct MachineUse {
    /// CPUs the kernel counts.
    pub cores: usize,
    /// Cores busy on average over the window, by every process (user, system, interrupts).
    pub busy_cores: f64,
    /// Share of the machine's CPU time the hypervisor gave to someone else, in percent.
    pub steal_percent: f64,
    /// Context switches on every CPU during the window.
    pub context_switches: u64,
    /// Packets received and sent on every interface during the window (loopback
    /// included); null where `/proc/net/dev` cannot be read.
    pub packets_received: Option<u64>,
    pub packets_sent: Option<u64>,
}

impl MachineCpu {
    /// Reads `/proc/stat` now.
    pub fn read() -> Option<MachineCpu> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let mut m = MachineCpu::parse(&text)?;
        m.packets = std::fs::read_to_string("/proc/net/dev")
            .ok()
            .and_then(|t| packets(&t));
        Some(m)
    }

    fn parse(text: &str) -> Option<MachineCpu> {
        let line = text.lines().next()?;
        let mut fields = line.split_ascii_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let mut ticks = [0u64; 8];
        for t in ticks.iter_mut() {
            // Kernels before 2.6.11 had no steal column; treat a missing one as absent.
            *t = fields.next()?.parse().ok()?;
        }
        let context_switches = text
            .lines()
            .find_map(|l| l.strip_prefix("ctxt "))
            .and_then(|v| v.trim().parse().ok())?;
        Some(MachineCpu {
            ticks,
            context_switches,
            packets: None,
        })
    }

    /// Nothing counted yet: the start of a sum of windows ([`MachineCpu::add`]).
    pub fn zero() -> MachineCpu {
        MachineCpu {
            ticks: [0; 8],
            context_switches: 0,
            packets: Some((0, 0)),
        }
    }

    /// Adds the window from `a` to `b` to this sum, so that `sum.since(&zero())` describes
    /// the windows together (a cell's turns).
    pub fn add(&mut self, a: &MachineCpu, b: &MachineCpu) {
        for (t, (x, y)) in self.ticks.iter_mut().zip(a.ticks.iter().zip(b.ticks)) {
            *t += y.saturating_sub(*x);
        }
        self.context_switches += b.context_switches.saturating_sub(a.context_switches);
        self.packets = match (self.packets, a.packets, b.packets) {
            (Some(s), Some(x), Some(y)) => {
                Some((s.0 + y.0.saturating_sub(x.0), s.1 + y.1.saturating_sub(x.1)))
            }
            _ => None,
        };
    }

    /// What happened between `earlier` and this reading; `None` when no time passed.
    pub fn since(&self, earlier: &MachineCpu) -> Option<MachineUse> {
        let d: Vec<u64> = self
            .ticks
            .iter()
            .zip(earlier.ticks)
            .map(|(a, b)| a.saturating_sub(b))
            .collect();
        let total: u64 = d.iter().sum();
        if total == 0 {
            return None;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // user + nice + system + irq + softirq; idle, iowait and steal are not work.
        let busy = d[0] + d[1] + d[2] + d[5] + d[6];
        Some(MachineUse {
            cores,
            busy_cores: busy as f64 / total as f64 * cores as f64,
            steal_percent: d[7] as f64 * 100.0 / total as f64,
            context_switches: self.context_switches.saturating_sub(earlier.context_switches),
            packets_received: self
                .packets
                .zip(earlier.packets)
                .map(|(a, b)| a.0.saturating_sub(b.0)),
            packets_sent: self
                .packets
                .zip(earlier.packets)
                .map(|(a, b)| a.1.saturating_sub(b.1)),
        })
    }
}

/// The calling thread's id, as `/proc/self/task/` names it.
pub fn current_thread_id() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// What the calling thread has used: CPU time (user, system) and context switches
/// (voluntary, involuntary).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub cpu: (Duration, Duration),
    pub switches: (u64, u64),
}

pub fn thread_usage() -> Usage {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_THREAD is Linux's.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv =
        |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Usage {
        cpu: (tv(ru.ru_utime), tv(ru.ru_stime)),
        switches: (ru.ru_nvcsw.max(0) as u64, ru.ru_nivcsw.max(0) as u64),
    }
}

/// User and system CPU time of one of this process's threads so far.
pub fn thread_cpu(tid: i32) -> Option<(Duration, Duration)> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: fields after it are counted
    // from the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    // utime and stime are fields 14 and 15, i.e. the 12th and 13th after the name.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let ticks = |t: u64| Duration::from_secs_f64(t as f64 / hz as f64);
    Some((ticks(utime), ticks(stime)))
}

/// Context switches (voluntary, involuntary) of several of this process's threads so
/// far; `None` when any cannot be read.
pub fn threads_switches(tids: &[i32]) -> Option<(u64, u64)> {
    tids.iter().try_fold((0, 0), |(v, n), &t| {
        let text = std::fs::read_to_string(format!("/proc/self/task/{t}/status")).ok()?;
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().parse().ok())
        };
        Some((
            v + field("voluntary_ctxt_switches:")?,
            n + field("nonvoluntary_ctxt_switches:")?,
        ))
    })
}

/// The summed CPU time of several threads; `None` when any cannot be read (a relay that
/// has stopped), so a total is never silently partial.
pub fn threads_cpu(tids: &[i32]) -> Option<(Duration, Duration)> {
    tids.iter()
        .try_fold((Duration::ZERO, Duration::ZERO), |(u, s), &t| {
            thread_cpu(t).map(|(tu, ts)| (u + tu, s + ts))
        })
}

/// CPU time, user and system.
pub type Cpu = (Duration, Duration);

/// Where a group of processes' CPU time is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A process and all its descendants, live or reaped (e.g. a postmaster).
    Tree(u32),
    /// A cgroup directory: v2 (`cpu.stat`) or v1's cpuacct (`cpuacct.stat`).
    Cgroup(std::path::PathBuf),
    /// Threads of this process (the relays).
    Threads(Vec<i32>),
}

impl Source {
    /// The group's CPU time so far; `None` when it cannot be read (the process is gone,
    /// the cgroup has no CPU counters), so a figure is absent rather than wrong.
    pub fn cpu(&self) -> Option<Cpu> {
        self.cpu_in(&std::cell::OnceCell::new())
    }

    /// The same, a tree summed from `procs` (scanned here if not yet), so that the
    /// groups read at one moment share one pass over `/proc`.
    pub fn cpu_in(&self, procs: &std::cell::OnceCell<Option<ProcTable>>) -> Option<Cpu> {
        match self {
            Source::Tree(pid) => procs.get_or_init(ProcTable::scan).as_ref()?.tree_cpu(*pid),
            Source::Cgroup(dir) => cgroup_cpu(dir),
            Source::Threads(tids) => threads_cpu(tids),
        }
    }

    /// Checks that the source can be read now, naming it when not.
    pub fn check(&self) -> Result<(), String> {
        match (self, self.cpu()) {
            (_, Some(_)) => Ok(()),
            (Source::Tree(pid), None) => Err(format!(
                "--server-pid {pid}: no such process in /proc; give the server's pid (PostgreSQL's postmaster \
                 or mariadbd): `head -1 $PGDATA/postmaster.pid` or `pidof mariadbd mysqld`"
            )),
            (Source::Cgroup(dir), None) => Err(format!(
                "--server-cgroup {}: neither cpu.stat (cgroup v2) nor cpuacct.stat (v1) can be read there",
                dir.display()
            )),
            (Source::Threads(_), None) => Err("the relays' threads cannot be read".into()),
        }
    }
}

fn clock_ticks() -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then_some(hz as f64)
}

/// Fields of `/proc/PID/stat` after the name: (ppid, utime + cutime, stime + cstime) in
/// ticks.
fn proc_stat(pid: u32) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((n(1)? as u32, n(11)? + n(13)?, n(12)? + n(14)?))
}

/// One pass over `/proc`: every process's parent and CPU ticks (its own and its reaped
/// children's). Several trees are summed from one pass: the slices driver reads the
/// server's and the pooler's between turns, while every arm waits, and a pass costs a
/// couple of milliseconds.
pub struct ProcTable {
    children: std::collections::BTreeMap<u32, Vec<u32>>,
    stats: std::collections::BTreeMap<u32, (u64, u64)>,
}

impl ProcTable {
    pub fn scan() -> Option<ProcTable> {
        let mut children: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        let mut stats = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((ppid, u, s)) = proc_stat(pid) {
                children.entry(ppid).or_default().push(pid);
                stats.insert(pid, (u, s));
            }
        }
        Some(ProcTable { children, stats })
    }

    /// The CPU time of `root` and all its descendants, live or reaped; `None` when
    /// `root` was not running at the scan.
    pub fn tree_cpu(&self, root: u32) -> Option<Cpu> {
        let (mut user, mut system) = *self.stats.get(&root)?;
        let mut todo = self.children.get(&root).cloned().unwrap_or_default();
        while let Some(pid) = todo.pop() {
            if let Some((u, s)) = self.stats.get(&pid) {
                user += u;
                system += s;
            }
            todo.extend(self.children.get(&pid).into_iter().flatten());
        }
        let hz = clock_ticks()?;
        let d = |t: u64| Duration::from_secs_f64(t as f64 / hz);
        Some((d(user), d(system)))
    }
}

fn cgroup_cpu(dir: &std::path::Path) -> Option<Cpu> {
    let field = |text: &str, key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
    };
    if let Ok(text) = std::fs::read_to_string(dir.join("cpu.stat")) {
        if let (Some(u), Some(s)) = (field(&text, "user_usec"), field(&text, "system_usec")) {
            return Some((Duration::from_micros(u), Duration::from_micros(s)));
        }
    }
    let text = std::fs::read_to_string(dir.join("cpuacct.stat")).ok()?;
    let hz = clock_ticks()?;
    let d = |t: u64| Duration::from_secs_f64(t as f64 / hz);
    Some((d(field(&text, "user")?), d(field(&text, "system")?)))
}

/// Whose CPU a run reads besides its own clients': the groups of processes on the path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Accounting {
    /// The database server (the sandbox's postmaster, `--server-pid`, `--server-cgroup`).
    pub server: Option<Source>,
    /// Why the server's CPU is not measured, when `server` is `None` (said in the output
    /// and kept in JSON beside the null).
    pub server_not_measured: Option<String>,
    /// A pooler on the path (the sandbox's PgBouncer).
    pub pooler: Option<Source>,
    /// The route's relay threads.
    pub relays: Vec<i32>,
}

/// `b - a`, per part.
pub fn cpu_between(a: Cpu, b: Cpu) -> Cpu {
    (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_and_busy_cores_come_from_the_differences() {
        let a = MachineCpu::parse("cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 1 2 3\nctxt 500\n").unwrap();
        let b = MachineCpu::parse("cpu  160 0 90 1060 0 0 0 40 0 0\nctxt 800\n").unwrap();
        let u = b.since(&a).unwrap();
        // 200 ticks passed: 100 busy, 60 idle, 40 stolen.
        assert!((u.steal_percent - 20.0).abs() < 1e-9);
        assert!((u.busy_cores - 0.5 * u.cores as f64).abs() < 1e-9);
        assert_eq!(u.context_switches, 300);
        assert_eq!(u.packets_sent, None, "no /proc/net/dev reading in this test");
        let dev = "Inter-|   Receive |  Transmit\n face |bytes packets ...\n    lo: 100 7 0 0 0 0 0 0 100 7 0 0 0 0 0 0\n  eth0: 5 2 0 0 0 0 0 0 9 3 0 0 0 0 0 0\n";
        assert_eq!(packets(dev), Some((9, 10)));
        assert_eq!(packets("x\ny\n lo: 1 2\n"), None);
        assert_eq!(b.since(&b), None);
        assert_eq!(MachineCpu::parse("intr 1 2 3"), None);
        assert_eq!(MachineCpu::parse("cpu 1 2 3"), None);
    }

    #[test]
    fn a_threads_cpu_is_read_and_grows() {
        let tid = current_thread_id();
        let before = thread_cpu(tid).expect("this thread's stat");
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = thread_cpu(tid).unwrap();
        assert!(after.0 + after.1 > before.0 + before.1, "{before:?} -> {after:?}");
        assert_eq!(thread_cpu(i32::MAX), None);
        assert_eq!(threads_cpu(&[tid, i32::MAX]), None);
    }
}

#[cfg(test)]
mod tree_tests {
    use super::*;

    #[test]
    fn a_trees_cpu_includes_children_that_exited_and_were_reaped() {
        // This test process is the root; a child burns CPU and exits; after reaping, the
        // root's tree has grown by about what the child used.
        let me = std::process::id();
        let tree_cpu = |pid| Source::Tree(pid).cpu();
        let before = tree_cpu(me).unwrap();
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let after = tree_cpu(me).unwrap();
        let grown = (after.0 + after.1).saturating_sub(before.0 + before.1);
        assert!(grown >= Duration::from_millis(50), "the tree grew by {grown:?}");
        assert_eq!(tree_cpu(u32::MAX), None);
        assert!(Source::Tree(u32::MAX)
            .check()
            .unwrap_err()
            .contains("--server-pid"));
        assert!(Source::Cgroup("/nonexistent".into()).check().is_err());
    }
}
