//! The bridge path (experiment 4): the client in a network namespace of its own, linked
//! by a veth pair to a Linux bridge on the host, its traffic to the server NATed, as a
//! container on a runtime's default bridge network is. Linux and root only.
//!
//! ```text
//! namespace cb-ID                      host
//! client ── vethC 10.213.N.2 ══ vethH ── bridge cbbID 10.213.N.1 ── DNAT ──> 127.0.0.1:PORT
//! ```
//!
//! The client connects to the bridge's address; a DNAT rule (nftables, table `cb_ID`)
//! sends it on to the server on the host's loopback (with `route_localnet` on the bridge,
//! which loopback destinations need), and a masquerade rule covers traffic leaving the
//! subnet, as a container runtime sets up. Measuring threads enter the namespace with
//! `setns`, so only they (and their sockets) live in it.
//!
//! Everything created is named with one id and removed afterwards: by `Drop`, and, should
//! connbench be killed, by a watchdog `sh` in its own process group that waits on a pipe
//! only connbench holds and tears down when it closes. Addresses are used only inside the
//! namespace and on the bridge connbench created.

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::{bail, Context, Result};

/// The subnets connbench's bridges take their /24 from.
pub const SUBNET: &str = "10.213.0.0/16";

/// A namespace, bridge, veth pair and NAT rules, removed on drop.
pub struct Bridge {
    pub id: String,
    pub namespace: String,
    pub gateway: Ipv4Addr,
    pub client: Ipv4Addr,
    bridge: String,
    table: String,
    ns: File,
    exposed: Vec<u16>,
    watchdog: Option<(Child, ChildStdin)>,
}

fn run(args: &[&str]) -> Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output().with_context(|| {
        format!(
            "netpath bridge: cannot run {}; install iproute2 and nftables",
            args[0]
        )
    })?;
    if !out.status.success() {
        bail!(
            "netpath bridge: `{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn nft(script: &str) -> Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("netpath bridge: cannot run nft; install nftables (apt-get install nftables)")?;
    child.stdin.take().unwrap().write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "netpath bridge: nft failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Whether this process may create namespaces and links.
pub fn check_supported() -> Result<()> {
    if !cfg!(target_os = "linux") {
        bail!("netpath = bridge needs Linux network namespaces");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "netpath = bridge needs root (it creates a network namespace, a bridge, a veth pair and NAT rules); \
             run as root, or leave the netpath axis out"
        );
    }
    Ok(())
}

/// An id and a subnet (third octet of 10.213.x.0/24) that nothing on the machine uses:
/// from `seed` on, the first candidate whose names are free (`taken` says whether any of
/// an id's namespace or links exists) and whose subnet is not in `used`. Two connbench
/// runs at once, or one left over after a crash, must never share a bridge or a route.
fn pick_names(
    seed: u32,
    taken: impl Fn(&str) -> bool,
    used: &std::collections::BTreeSet<u8>,
) -> Option<(String, u32)> {
    (0..256u32).find_map(|k| {
        let x = seed.wrapping_add(k.wrapping_mul(0x9e37_79b9));
        let id = format!("{:05x}", x & 0xf_ffff);
        let subnet = 16 + (x >> 12) % 224;
        (!taken(&id) && !used.contains(&(subnet as u8))).then_some((id, subnet))
    })
}

/// Whether a namespace or a link named with `id` exists.
fn name_taken(id: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/cb-{id}")).exists()
        || ["cbb", "cbh", "cbc"]
            .iter()
            .any(|p| std::path::Path::new(&format!("/sys/class/net/{p}{id}")).exists())
}

/// Third octets of the 10.213.x.0/24 subnets some interface of this namespace has.
fn subnets_in_use() -> std::collections::BTreeSet<u8> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.split_whitespace()
        .filter_map(|w| w.strip_prefix("10.213."))
        .filter_map(|rest| rest.split('.').next()?.parse().ok())
        .collect()
}

impl Bridge {
    /// Creates the namespace, the links and the NAT table.
    pub fn create() -> Result<Bridge> {
        check_supported()?;
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let used = subnets_in_use();
        let (id, subnet) = pick_names(pid ^ nanos, name_taken, &used).ok_or_else(|| {
            anyhow::anyhow!(
                "netpath bridge: no free name and 10.213.x.0/24 subnet after 256 tries (are many cb-* namespaces left over? `ip netns list`)"
            )
        })?;
        let gateway = Ipv4Addr::new(10, 213, subnet as u8, 1);
        let client = Ipv4Addr::new(10, 213, subnet as u8, 2);
        let namespace = format!("cb-{id}");
        let bridge = format!("cbb{id}");
        let (veth_host, veth_ns) = (format!("cbh{id}"), format!("cbc{id}"));
        let table = format!("cb_{id}");
        // The watchdog first: from here on, whatever exists is removed even if we die.
        let teardown = format!(
            "ip netns del {namespace} 2>/dev/null; ip link del {veth_host} 2>/dev/null; \
             ip link del {bridge} 2>/dev/null; nft delete table ip {table} 2>/dev/null"
        );
        let mut child = Command::new("sh")
            .args([
                "-c",
                &format!("trap '' INT TERM HUP; read _ ; {teardown}; exit 0"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("netpath bridge: cannot start the clean-up watchdog")?;
        let stdin = child.stdin.take().unwrap();
        let mut b = Bridge {
            id,
            namespace: namespace.clone(),
            gateway,
            client,
            bridge: bridge.clone(),
            table: table.clone(),
            ns: File::open("/dev/null")?,
            exposed: Vec::new(),
            watchdog: Some((child, stdin)),
        };
        let gw = format!("{gateway}/24");
        let cl = format!("{client}/24");
        let gws = gateway.to_string();
        for cmd in [
            vec!["ip", "netns", "add", &namespace],
            vec!["ip", "link", "add", &bridge, "type", "bridge"],
            vec!["ip", "addr", "add", &gw, "dev", &bridge],
            vec!["ip", "link", "set", &bridge, "up"],
            vec![
                "ip", "link", "add", &veth_host, "type", "veth", "peer", "name", &veth_ns,
            ],
            vec!["ip", "link", "set", &veth_host, "master", &bridge, "up"],
            vec!["ip", "link", "set", &veth_ns, "netns", &namespace],
            vec!["ip", "-n", &namespace, "addr", "add", &cl, "dev", &veth_ns],
            vec!["ip", "-n", &namespace, "link", "set", &veth_ns, "up"],
            vec!["ip", "-n", &namespace, "link", "set", "lo", "up"],
            vec!["ip", "-n", &namespace, "route", "add", "default", "via", &gws],
        ] {
            run(&cmd)?;
        }
        // Loopback destinations after DNAT are dropped as martians unless allowed.
        std::fs::write(format!("/proc/sys/net/ipv4/conf/{bridge}/route_localnet"), "1")
            .context("netpath bridge: cannot set route_localnet on the bridge")?;
        nft(&format!(
            "table ip {table} {{\n\
               chain pre {{ type nat hook prerouting priority -100; }}\n\
               chain post {{ type nat hook postrouting priority 100; ip saddr 10.213.{subnet}.0/24 oifname != \"{bridge}\" masquerade; }}\n\
             }}\n"
        ))?;
        b.ns = File::open(format!("/run/netns/{namespace}"))
            .with_context(|| format!("netpath bridge: cannot open namespace {namespace}"))?;
        Ok(b)
    }

    /// Forwards the bridge address's `port` to the server on the host's loopback.
    pub fn expose(&mut self, port: u16) -> Result<()> {
        if self.exposed.contains(&port) {
            return Ok(());
        }
        nft(&format!(
            "add rule ip {} pre iifname \"{}\" ip daddr {} tcp dport {port} dnat to 127.0.0.1:{port}\n",
            self.table, self.bridge, self.gateway
        ))?;
        self.exposed.push(port);
        Ok(())
    }

    /// The namespace, for [`enter`] on another thread.
    pub fn namespace_file(&self) -> Result<File> {
        Ok(self.ns.try_clone()?)
    }
}

/// Moves the calling thread (only it) into the namespace; sockets it opens from then on
/// live there.
pub fn enter(ns: &File) -> std::io::Result<()> {
    // SAFETY: setns on an open namespace descriptor affects only the calling thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Closing the pipe is the watchdog's signal: one teardown path for every ending.
        if let Some((mut child, stdin)) = self.watchdog.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_subnets_in_use_are_skipped() {
        let none = std::collections::BTreeSet::new();
        let (first, subnet) = pick_names(42, |_| false, &none).unwrap();
        // The first choice's names exist (a run left over): another id.
        let (second, _) = pick_names(42, |id| id == first, &none).unwrap();
        assert_ne!(first, second);
        // Its subnet is in use: another subnet.
        let used: std::collections::BTreeSet<u8> = [subnet as u8].into();
        let (_, other) = pick_names(42, |_| false, &used).unwrap();
        assert_ne!(other, subnet);
        assert!((16..240).contains(&other));
        // Nothing free: no answer rather than a clash.
        let all: std::collections::BTreeSet<u8> = (0..=255).collect();
        assert_eq!(pick_names(42, |_| false, &all), None);
    }
}
