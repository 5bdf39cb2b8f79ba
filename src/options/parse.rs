//! Every value parser of the options layer: one function per setting, which the CLI
//! uses as its clap value parser and a suite cell's setting goes through by name, so both
//! sources accept the same values and refuse the rest with the same message; and the
//! small values they produce (a connection policy's name, a weighted script, a seed).
//! Pure: nothing here connects or reads a cell.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::dataset::pgbench::TableChoice;
use crate::targets::SslMode;
use crate::units::parse_duration;
use crate::workload::{Builtin, QueryMode};

/// How clients get connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// One connection per client for the whole run (pgbench's default).
    Persistent,
    /// A new connection for every transaction, timed phase by phase (pgbench -C).
    PerTransaction,
    /// A client-side pool (pool_size, pool_max_lifetime, pool_idle_timeout).
    Pool,
}

impl Connection {
    pub const NAMES: [&'static str; 3] = ["persistent", "per-transaction", "pool"];
}

impl FromStr for Connection {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "persistent" => Ok(Connection::Persistent),
            "per-transaction" => Ok(Connection::PerTransaction),
            "pool" => Ok(Connection::Pool),
            _ => Err(format!(
                "invalid connection {s:?}: use persistent, per-transaction or pool"
            )),
        }
    }
}

/// --tables: auto, connbench or pgbench.
pub fn parse_tables(v: &str) -> Result<TableChoice, String> {
    v.parse()
}

/// What a transaction runs: a built-in workload or a script file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    Builtin(Builtin),
    File(PathBuf),
}

impl Workload {
    /// A built-in name (`tpcb-like`, ...) or else a file path.
    pub fn parse(v: &str) -> Workload {
        match Builtin::named(v) {
            Some(b) => Workload::Builtin(b),
            None => Workload::File(PathBuf::from(v)),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Workload::Builtin(b) => b.as_str().to_string(),
            Workload::File(p) => p.display().to_string(),
        }
    }

    /// Whether it runs on connbench's tables (and so needs their scale).
    pub fn reads_dataset(&self) -> bool {
        match self {
            Workload::Builtin(b) => b.needs_tables(),
            Workload::File(_) => true,
        }
    }
}

/// One script of a run and its weight, pgbench's `NAME@W`: each transaction a client
/// runs one script, drawn with probability weight / total weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted {
    pub workload: Workload,
    pub weight: u32,
}

impl Weighted {
    /// How a report names it: the name, with `@W` when scripts are mixed.
    pub fn name(&self, mixed: bool) -> String {
        if mixed {
            format!("{}@{}", self.workload.name(), self.weight)
        } else {
            self.workload.name()
        }
    }
}

/// A script weight after `@`: 0 to pgbench's limit (a 32-bit int).
fn parse_weight(flag: &str, v: &str, w: &str) -> Result<u32, String> {
    w.trim()
        .parse::<u32>()
        .ok()
        .filter(|&w| w <= i32::MAX as u32)
        .ok_or_else(|| {
            format!("invalid {flag} {v:?}: the weight after @ is a whole number from 0 to {} (e.g. {flag} NAME@2)", i32::MAX)
        })
}

/// The built-in script a name or a prefix of one names, as pgbench's -b takes them:
/// `se` is select-only, `t` tpcb-like; a prefix of several is refused, naming them.
pub fn find_builtin(name: &str) -> Result<Builtin, String> {
    let all = Builtin::ALL.map(Builtin::as_str).join(", ");
    if let Some(b) = Builtin::named(name) {
        return Ok(b);
    }
    let found: Vec<Builtin> = Builtin::ALL
        .into_iter()
        .filter(|b| !name.is_empty() && b.as_str().starts_with(name))
        .collect();
    match found[..] {
        [b] => Ok(b),
        [] => Err(format!(
            "no built-in script {name:?}: use one of {all} (or a prefix of one)"
        )),
        _ => Err(format!(
            "ambiguous built-in script {name:?}: it begins {}; give more of the name",
            found.iter().map(|b| b.as_str()).collect::<Vec<_>>().join(" and ")
        )),
    }
}

/// -b NAME[@W]: a built-in script (a prefix names it) and its weight (default 1).
pub fn parse_builtin_weighted(v: &str) -> Result<Weighted, String> {
    let (name, weight) = match v.rsplit_once('@') {
        Some((n, w)) => (n, parse_weight("-b", v, w)?),
        None => (v, 1),
    };
    let b = find_builtin(name).map_err(|e| format!("invalid -b {v:?}: {e}"))?;
    Ok(Weighted {
        workload: Workload::Builtin(b),
        weight,
    })
}

/// -f FILE[@W]: a script file and its weight (default 1); as in pgbench, the last `@`
/// starts the weight.
pub fn parse_file_weighted(v: &str) -> Result<Weighted, String> {
    let (path, weight) = match v.rsplit_once('@') {
        Some((p, w)) => (p, parse_weight("-f", v, w)?),
        None => (v, 1),
    };
    if path.is_empty() {
        return Err(format!(
            "invalid -f {v:?}: give a script file, e.g. -f bench.sql@2"
        ));
    }
    Ok(Weighted {
        workload: Workload::File(PathBuf::from(path)),
        weight,
    })
}

/// --sampling-rate: a fraction of transactions to log, above 0 and at most 1.
pub fn parse_sampling_rate(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!(
            "invalid sampling rate {v:?}: give a fraction above 0 and at most 1, e.g. 0.01 for 1%"
        )),
    }
}

/// --aggregate-interval: whole seconds, as pgbench takes it.
pub fn parse_aggregate_interval(v: &str) -> Result<u64, String> {
    whole("aggregate interval", v, 1, 86_400, " seconds")
}

/// Why `--max-tries 0` is refused without an end to the retrying (as pgbench refuses it).
pub const UNLIMITED_TRIES: &str =
    "--max-tries 0 retries without limit, which needs an end to the retrying: give -T \
     (a duration) or -L (a latency limit), or a number of tries (e.g. --max-tries 10)";

/// --max-tries: tries of a transaction in all; 0 is no limit.
pub fn parse_max_tries(v: &str) -> Result<u32, String> {
    whole("max tries", v, 0, 1_000_000, " (0 is no limit, with -T or -L)")
}

fn whole<T>(what: &str, v: &str, min: T, max: T, hint: &str) -> Result<T, String>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match v.trim().parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        Ok(_) => Err(format!("invalid {what} {v:?}: give {min} to {max}{hint}")),
        Err(_) => Err(format!(
            "invalid {what} {v:?}: give a whole number from {min} to {max}"
        )),
    }
}

/// Clients: 1 to 100,000.
pub fn parse_clients(v: &str) -> Result<usize, String> {
    whole("clients", v, 1, 100_000, "")
}

/// A suite cell's `scale`: connbench's tables at this scale, 1 to 10,000.
pub fn parse_scale(v: &str) -> Result<u32, String> {
    whole("scale", v, 1, 10_000, " (each unit is 100,000 accounts)")
}

/// Worker threads: 1 to 1,024.
pub fn parse_threads(v: &str) -> Result<usize, String> {
    whole("threads", v, 1, 1024, "")
}

/// Pool size: at least one connection.
pub fn parse_pool_size(v: &str) -> Result<usize, String> {
    whole(
        "pool_size",
        v,
        1,
        100_000,
        " (a pool needs at least one connection)",
    )
}

/// Transactions per client (`-t`): at least one.
pub fn parse_transactions(v: &str) -> Result<u64, String> {
    whole("transactions", v, 1, u64::MAX, "")
}

/// Measured connections per target: at least one.
pub fn parse_samples(v: &str) -> Result<usize, String> {
    whole("samples", v, 1, 10_000_000, "")
}

/// A target rate in transactions per second: positive and finite.
pub fn parse_rate(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "invalid rate {v:?}: give a positive number of transactions per second, e.g. 500"
        )),
    }
}

/// --connect-rate (a cell's `connect_rate`): connects a second for the connections opened
/// before the clock, a positive number as -R takes its rate (`2000`), or written with its
/// unit (`2000/s`). The message names the phase it paces, since a rate alone reads as -R's.
pub fn parse_connect_rate(v: &str) -> Result<f64, String> {
    let t = v.trim();
    let n = t.strip_suffix("/s").unwrap_or(t).trim();
    match n.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "invalid connect rate {v:?}: it paces the connect ramp (the connections opened before the \
             measurement); give a positive number of connects per second, e.g. 2000 or 2000/s"
        )),
    }
}

/// How long to measure: seconds as a bare number (pgbench's `-T 30`) or a duration
/// (`30s`, `2m`); positive, and short enough for a clock to hold.
pub fn parse_length(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let d = if !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'e' || b == b'E' || b == b'+')
    {
        t.parse::<f64>()
            .ok()
            .and_then(crate::units::positive_seconds)
            .ok_or_else(|| {
                format!("invalid duration {v:?}: give a positive length such as 30 (seconds), 30s or 2m")
            })?
    } else {
        parse_duration(t).map_err(|e| format!("invalid duration: {e}"))?
    };
    if d.is_zero() {
        return Err(format!(
            "invalid duration {v:?}: give a positive length such as 30s"
        ));
    }
    // A deadline is an Instant plus this; a century is past anything a run needs and
    // well inside what the clock can add.
    if d > Duration::from_secs(100 * 365 * 86_400) {
        return Err(format!("invalid duration {v:?}: too long (at most 100 years)"));
    }
    Ok(d)
}

/// A pause or a warm-up: zero or more.
pub fn parse_pause(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d > Duration::from_secs(365 * 86_400) {
        return Err(format!("{v:?} is too long (at most a year)"));
    }
    Ok(d)
}

/// A period (the per-interval series, progress): positive.
pub fn parse_period(v: &str) -> Result<Duration, String> {
    let d = parse_pause(v)?;
    if d.is_zero() {
        return Err(format!("{v:?} is no period: give a length such as 1s or 1m"));
    }
    Ok(d)
}

/// Progress every N seconds (`-P 5`) or a duration (`-P 500ms`).
pub fn parse_progress(v: &str) -> Result<Duration, String> {
    parse_length(v).map_err(|e| e.replace("duration", "progress period"))
}

/// --random-seed as given: a seed, or `None` for one from the clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedArg(pub Option<u64>);

/// --random-seed: an unsigned integer, or pgbench's words: `time` for one from the clock,
/// `rand` for one from the kernel's random source (read now, so the report shows it).
pub fn parse_seed(v: &str) -> Result<SeedArg, String> {
    match v.trim() {
        "time" => Ok(SeedArg(None)),
        "rand" => {
            let mut b = [0u8; 8];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
                .map_err(|e| format!("--random-seed rand: cannot read /dev/urandom ({e}): give a number or \"time\""))?;
            Ok(SeedArg(Some(u64::from_le_bytes(b))))
        }
        s => s.parse::<u64>().map(|n| SeedArg(Some(n))).map_err(|_| {
            format!(
                "invalid random seed {v:?}: give an unsigned integer (0 to 18446744073709551615), \"time\" or \"rand\""
            )
        }),
    }
}

/// -D NAME=VALUE: a script variable's name and its value, as given (pgbench's values
/// are integers, doubles or strings; [`LoadOptions::script`] says which the script
/// engine takes).
pub fn parse_define(v: &str) -> Result<(String, String), String> {
    let (name, value) = v
        .split_once('=')
        .ok_or_else(|| format!("invalid -D {v:?}: write NAME=VALUE, e.g. -D scale=10"))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "invalid -D {v:?}: a variable name is letters, digits and '_'"
        ));
    }
    if name == "client_id" {
        return Err("invalid -D client_id: connbench numbers the clients itself".into());
    }
    Ok((name.to_string(), value.to_string()))
}

/// A latency limit (-L): milliseconds as a bare number, as pgbench takes it, or a
/// duration (50ms, 1s); positive.
pub fn parse_latency_limit(v: &str) -> Result<Duration, String> {
    let d = match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 && ms <= 3.6e6 => Duration::from_secs_f64(ms / 1e3),
        Ok(_) => {
            return Err(format!(
                "invalid latency limit {v:?}: give milliseconds above 0 (at most an hour), e.g. 50"
            ))
        }
        Err(_) => parse_duration(v).map_err(|_| {
            format!("invalid latency limit {v:?}: give milliseconds (e.g. 50) or a duration (50ms, 1s)")
        })?,
    };
    if d.is_zero() {
        return Err(format!("invalid latency limit {v:?}: it must be above 0"));
    }
    Ok(d)
}

/// A relative precision: a fraction between 0 and 1 (0.05 is ±5%).
pub fn parse_precision(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!(
            "invalid precision {v:?}: give a fraction between 0 and 1, e.g. 0.05 for ±5%"
        )),
    }
}

pub fn parse_mode(v: &str) -> Result<QueryMode, String> {
    v.parse()
}

pub fn parse_connection(v: &str) -> Result<Connection, String> {
    v.parse()
}

pub fn parse_sslmode(v: &str) -> Result<SslMode, String> {
    SslMode::parse(v).map_err(|e| e.to_string())
}
