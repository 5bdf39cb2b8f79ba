//! What the machine did while connbench measured: CPU time by state for the whole
//! machine (above all the hypervisor's *steal*), and the CPU time of threads connbench
//! runs beside its measuring clients (the in-process relays).
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
/// first line: user nice system idle iowait irq softirq steal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineCpu {
    ticks: [u64; 8],
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
}

impl MachineCpu {
    /// Reads `/proc/stat` now.
    pub fn read() -> Option<MachineCpu> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        MachineCpu::parse(&text)
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
        Some(MachineCpu { ticks })
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
        })
    }
}

/// The calling thread's id, as `/proc/self/task/` names it.
pub fn current_thread_id() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
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

/// The summed CPU time of several threads; `None` when any cannot be read (a relay that
/// has stopped), so a total is never silently partial.
pub fn threads_cpu(tids: &[i32]) -> Option<(Duration, Duration)> {
    tids.iter()
        .try_fold((Duration::ZERO, Duration::ZERO), |(u, s), &t| {
            thread_cpu(t).map(|(tu, ts)| (u + tu, s + ts))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_and_busy_cores_come_from_the_differences() {
        let a = MachineCpu::parse("cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 1 2 3").unwrap();
        let b = MachineCpu::parse("cpu  160 0 90 1060 0 0 0 40 0 0\n").unwrap();
        let u = b.since(&a).unwrap();
        // 200 ticks passed: 100 busy, 60 idle, 40 stolen.
        assert!((u.steal_percent - 20.0).abs() < 1e-9);
        assert!((u.busy_cores - 0.5 * u.cores as f64).abs() < 1e-9);
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
