//! The server's CPU for a run: the quota of a sandbox's servers (a cgroup's, so it is set
//! live), set by a suite between its cells and by `replay --server-cpus` for its run,
//! which puts the sandbox's own back when it ends.

use anyhow::{bail, Context, Result};

use crate::proto::Endpoint;
use crate::sandbox::SandboxInfo;

/// Sets the CPU quota of the servers of the sandbox `info` describes to `cpus` (`None`:
/// no limit); running servers feel it at their next period. The one place a server is
/// sized.
pub fn size(info: &mut SandboxInfo, cpus: Option<f64>) -> Result<()> {
    let Some(c) = info.cgroups.as_mut() else {
        bail!(
            "cannot set the sandbox's server CPU quota to {cpus:?}: the sandbox was started without \
             one, so its servers are in no cgroup of connbench's; start it with --server-cpus"
        );
    };
    c.set_cpus(false, cpus)
}

/// `--server-cpus`: the quota a running sandbox's servers had, put back on drop.
pub struct Quota {
    info: SandboxInfo,
    was: Option<f64>,
}

impl Drop for Quota {
    fn drop(&mut self) {
        if let Err(e) = size(&mut self.info, self.was) {
            eprintln!("warning: cannot put the sandbox's servers back under their own CPU quota: {e:#}");
        }
    }
}

/// Sets the servers' quota of the sandbox that owns `direct` to `cpus` while the returned
/// guard lives (live: the quota is a cgroup's, as a suite's `server_cpus` sets it between
/// cells).
pub fn hold(cpus: Option<f64>, direct: &Endpoint) -> Result<Option<Quota>> {
    let Some(cpus) = cpus else { return Ok(None) };
    let name = direct.target.name();
    let Some(mut info) = super::targets::own_sandbox(&direct.target) else {
        bail!(
            "--server-cpus {cpus}: the quota is set on connbench's sandbox, and {name} is not a running \
             sandbox's target; on your own servers, replay on a server of each size"
        );
    };
    let Some(was) = info.cgroups.as_ref().map(|c| c.server.cpus) else {
        bail!(
            "--server-cpus {cpus}: the sandbox in {} was started without a CPU quota, so its servers are in \
             no cgroup of connbench's; start it with `connbench sandbox start --server-cpus N`",
            info.dir.display()
        );
    };
    size(&mut info, Some(cpus)).with_context(|| format!("--server-cpus {cpus}"))?;
    let own = was.map_or("none".to_string(), |c| format!("{c} cores"));
    eprintln!("replay: the sandbox's servers run under {cpus} cores while the replay lasts (their own quota: {own})");
    Ok(Some(Quota { info, was }))
}
