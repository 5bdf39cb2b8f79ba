//! What a suite runs against, resolved once before its loop: the context a command
//! hands the runner (targets, store, sandbox, stop signal), each cell's endpoint through
//! its route and namespace, the datasets the cells ask for, the round trip each
//! distance's relays achieved, and the environment the results carry. The loop
//! (`runner`) then only turns knobs and measures.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context as _, Result};
use tokio::sync::watch;

use crate::connect::{self};
use crate::experiment::store::{Environment, Store};
use crate::experiment::suite::{Kind, Suite};
use crate::options::cell::Settings;
use crate::options::{self, route_spec, LoadOptions, NetPath};
use crate::proto::Endpoint;
use crate::route::{Route, RouteSpec, Verified};
use crate::targets::Target;

/// What a suite runs against and where results go.
pub struct Context {
    /// Names a suite may use for targets (sandbox targets, `--target NAME=conninfo`).
    pub targets: BTreeMap<String, String>,
    pub schema: String,
    pub store: Store,
    pub pgbouncer_version: Option<String>,
    /// The sandbox the suite runs against, if any: its servers' CPU is measured.
    pub sandbox: Option<crate::sandbox::SandboxInfo>,
    pub stop: watch::Receiver<bool>,
    /// The dataset's scale per target conninfo, looked up once per run, not before every
    /// repetition.
    pub scales: std::cell::RefCell<BTreeMap<String, crate::options::Dataset>>,
    /// Relays started for cells with a `path` or `distance`, per target and route; they
    /// live as long as the context, so every repetition of a cell takes the same route.
    pub routes: std::cell::RefCell<BTreeMap<(String, RouteSpec), std::rc::Rc<Route>>>,
    /// The sandbox itself, for the faults a cell injects (restarts); weak, so the
    /// command that started it still decides when it stops.
    pub sandbox_control: Option<std::rc::Weak<tokio::sync::Mutex<crate::sandbox::Sandbox>>>,
    /// The namespace and bridge of `netpath = "bridge"` cells, created at the first.
    pub bridge: std::cell::RefCell<Option<crate::net::netns::Bridge>>,
    /// The name `run --run NAME` gives the run in the store (checked free beforehand).
    pub run_name: Option<String>,
    /// The live view (`run --metrics-listen`'s endpoint): each counted repetition of a
    /// load cell feeds it.
    pub metrics: Option<std::rc::Rc<dyn super::sink::Sink>>,
    /// The traces cells replay (`workload = "trace:FILE"`), read once for the run.
    pub traces: super::replayed::Traces,
}

/// What a run resolves once, before its loop: each cell's endpoint, the round trip its
/// relays achieved (cells with a distance), and the environment the results carry.
pub struct Resolved {
    pub endpoints: Vec<Endpoint>,
    pub cell_rtt: Vec<Option<Verified>>,
    pub environment: Environment,
    /// The databases trace cells start each repetition from a copy of.
    pub restores: super::replayed::Restores,
}

/// Resolves `suite`'s cells before anything is measured: checks, endpoints, datasets,
/// distances, and the environment probe.
pub async fn resolve(suite: &Suite, ctx: &Context) -> Result<Resolved> {
    // Every cell must resolve before anything runs: a typo fails in a second, not after
    // an hour of measurements.
    check(suite, &ctx.schema)?;
    let endpoints: Vec<Endpoint> = suite
        .cells
        .iter()
        .map(|c| {
            ctx.endpoint(&c.settings)
                .with_context(|| format!("suite {}, cell {}", suite.name, c.name))
        })
        .collect::<Result<_>>()?;
    make_datasets(suite, ctx).await?;
    let restores = super::replayed::plan_restores(
        suite,
        &ctx.traces,
        |s| ctx.direct_endpoint(s),
        ctx.sandbox.as_ref(),
        ctx.store.location(),
    )?;
    super::replayed::prepare(
        suite,
        &ctx.traces,
        |s| ctx.direct_endpoint(s),
        |i| restores.described(i).map(String::from),
    )
    .await?;
    let cell_rtt = verify_distances(suite, ctx).await?;
    let environment = probe_environment(suite, ctx, &endpoints).await?;
    Ok(Resolved {
        endpoints,
        cell_rtt,
        environment,
        restores,
    })
}

/// Distances are measured before anything else: the results carry the round trip the
/// relays achieved beside the one requested (per cell; `None` without a distance).
async fn verify_distances(suite: &Suite, ctx: &Context) -> Result<Vec<Option<Verified>>> {
    let mut verified: BTreeMap<(String, RouteSpec), Verified> = BTreeMap::new();
    let mut cell_rtt: Vec<Option<Verified>> = vec![None; suite.cells.len()];
    for (i, c) in suite.cells.iter().enumerate() {
        let spec = route_spec(&c.settings)?;
        if spec.distance.is_zero() {
            continue;
        }
        let direct = ctx.direct_endpoint(&c.settings)?;
        let key = (direct.target.conninfo(), spec);
        if !verified.contains_key(&key) {
            let v = crate::setup::route::verify(&direct, &ctx.routed_endpoint(&c.settings)?, spec.distance)
                .await
                .with_context(|| {
                    format!(
                        "suite {}, cell {}: checking the emulated distance",
                        suite.name, c.name
                    )
                })?;
            if !v.within_tolerance() {
                eprintln!(
                    "warning: cell {}: requested round trip {:.2} ms, achieved {:.2} ms (tolerance max(0.2 ms, 3%)); \
                     the machine may be overloaded",
                    c.name, v.requested_ms, v.achieved_ms
                );
            }
            verified.insert(key.clone(), v);
        }
        cell_rtt[i] = verified.get(&key).copied();
    }
    Ok(cell_rtt)
}

/// The environment the results carry: the server's version, TLS and settings, probed
/// from the host on the baseline's target (and the other engine's, in a suite across
/// engines).
async fn probe_environment(suite: &Suite, ctx: &Context, endpoints: &[Endpoint]) -> Result<Environment> {
    // The environment probe runs from the host, on the baseline's target without its
    // route or namespace (a bridge address answers only from inside the namespace).
    let probe_endpoint = ctx.direct_endpoint(&suite.cells[suite.baseline].settings)?;
    let probe = connect::connect_once(&probe_endpoint, None).await;
    let (server_version, tls) = match &probe {
        Ok((tl, v)) => (
            v.clone(),
            tl.tls.as_ref().map(|t| format!("{} {}", t.version, t.cipher)),
        ),
        Err(e) => bail!(
            "suite {}: cannot connect to the baseline's target {}: {e}",
            suite.name,
            endpoints[suite.baseline].target.name()
        ),
    };
    let mut environment = Environment::here(server_version, ctx.pgbouncer_version.clone(), tls);
    environment.server_settings = server_settings(&probe_endpoint).await;
    // A suite across engines (the engines suite) states the other engine's server too:
    // its version and settings, each prefixed with the engine.
    let mut other_engine_seen = false;
    for c in &suite.cells {
        let ep = ctx.direct_endpoint(&c.settings)?;
        if ep.engine() == probe_endpoint.engine() || other_engine_seen {
            continue;
        }
        other_engine_seen = true;
        if let Ok((_, Some(version))) = connect::connect_once(&ep, None).await {
            environment
                .server_settings
                .push(format!("mysql: version={version}"));
        }
        for setting in server_settings(&ep).await {
            environment.server_settings.push(format!("mysql: {setting}"));
        }
    }
    Ok(environment)
}

/// A strike as it happened.
#[derive(Debug, Clone, Copy)]
pub struct Struck {
    pub started: std::time::Instant,
    /// When it took effect: a restart's stop signal, or the terminate query sent (after
    /// a login that a loaded machine can make slow).
    pub landed: std::time::Instant,
    /// How long it took (a restart: until the server accepted connections again).
    pub took: std::time::Duration,
    /// A restart's: when the server was measured down.
    pub down: Option<crate::sandbox::Downtime>,
    /// terminate-backends': how many backends it terminated.
    pub terminated: Option<usize>,
}

impl Context {
    /// Injects `fault` into the sandbox; returns when it began and what it measured of
    /// itself.
    pub async fn strike(&self, fault: options::FaultKind) -> Result<Struck> {
        let sb = self
            .sandbox_control
            .as_ref()
            .and_then(|w| w.upgrade())
            .with_context(|| {
                format!(
                    "fault {}: faults are injected into connbench's sandbox, and this suite runs without one",
                    fault.as_str()
                )
            })?;
        let started = std::time::Instant::now();
        // One strike at a time: a cell's repetitions run one after another.
        let mut sb = sb.lock().await;
        let (landed, down, terminated) = match fault {
            options::FaultKind::PgbouncerRestart => {
                let d = sb.restart_pgbouncer().await?;
                (d.signalled, Some(d), None)
            }
            options::FaultKind::PostgresRestart => {
                let d = sb.restart_postgres().await?;
                (d.signalled, Some(d), None)
            }
            options::FaultKind::TerminateBackends => {
                let (n, sent) = sb.terminate_backends().await?;
                (sent, None, Some(n))
            }
        };
        Ok(Struck {
            started,
            landed,
            took: started.elapsed(),
            down,
            terminated,
        })
    }

    /// Sets the sandbox servers' CPU quota to the cell's `server_cpus` (live: the quota is
    /// a cgroup's); returns the quota the cell runs under, the sandbox's own when the cell
    /// sets none.
    pub async fn size_server(&self, settings: &Settings) -> Result<Option<f64>> {
        let cell = options::server_cpus(settings)?;
        let Some(sb) = self.sandbox_control.as_ref().and_then(|w| w.upgrade()) else {
            if let Some(cpus) = cell {
                bail!(
                    "server_cpus {cpus}: the quota is set on connbench's sandbox, and this suite runs without \
                     one; on your own instances, give each size its own target"
                );
            }
            return Ok(None);
        };
        let mut sb = sb.lock().await;
        let Some(now) = sb.info.cgroups.as_ref().map(|c| c.server.cpus) else {
            // No cgroup: set_cpus says why a quota cannot be set.
            if cell.is_some() {
                crate::setup::server::size(&mut sb.info, cell)?;
            }
            return Ok(None);
        };
        // A cell without its own size runs under the sandbox's starting quota, not under
        // whatever the previous cell left.
        let started = self
            .sandbox
            .as_ref()
            .and_then(|s| s.cgroups.as_ref())
            .and_then(|c| c.server.cpus);
        let want = cell.or(started);
        if now != want {
            crate::setup::server::size(&mut sb.info, want)?;
        }
        Ok(want)
    }

    /// The endpoint a cell's `target` names (a known name, else a conninfo string),
    /// through the relays of its route when it has one.
    pub fn endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let routed = self.routed_endpoint(settings)?;
        match options::netpath(settings)? {
            NetPath::Host => Ok(routed),
            NetPath::Bridge => {
                let mut t = routed.target;
                match &t.host {
                    crate::targets::Host::Tcp(h) if h == "127.0.0.1" || h == "localhost" => {}
                    _ => bail!(
                        "netpath = bridge needs a TCP target on this machine (127.0.0.1 or localhost), not {}; \
                         the client in its namespace reaches the host through the bridge",
                        t.name()
                    ),
                }
                let mut slot = self.bridge.borrow_mut();
                if slot.is_none() {
                    *slot = Some(crate::net::netns::Bridge::create()?);
                }
                let b = slot.as_mut().unwrap();
                b.expose(t.port)?;
                // Connect to the bridge's address but keep the host name, as libpq's
                // hostaddr does: TLS still verifies (and sends SNI for) the name the
                // server's certificate holds, not the bridge's private address.
                t.hostaddr = Some(b.gateway.into());
                Ok(Endpoint::new(t)?)
            }
        }
    }

    /// The endpoint through a cell's relays, reached from the host's network.
    pub fn routed_endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let direct = self.direct_endpoint(settings)?;
        let spec = route_spec(settings)?;
        if spec.is_direct() {
            return Ok(direct);
        }
        let routed = {
            let key = (direct.target.conninfo(), spec);
            let existing = self.routes.borrow().get(&key).cloned();
            let route = match existing {
                Some(r) => r,
                None => {
                    let r = std::rc::Rc::new(crate::setup::route::build(&direct.target, spec)?);
                    self.routes.borrow_mut().insert(key, r.clone());
                    r
                }
            };
            route.target.clone()
        };
        Ok(Endpoint::new(routed)?)
    }

    /// The threads of a cell's relays (none on a direct path), whose CPU is reported
    /// apart from the client's.
    pub fn relay_threads(&self, settings: &Settings) -> Result<Vec<i32>> {
        let direct = self.direct_endpoint(settings)?;
        let key = (direct.target.conninfo(), route_spec(settings)?);
        Ok(self
            .routes
            .borrow()
            .get(&key)
            .map(|r| r.relay_threads())
            .unwrap_or_default())
    }

    /// The network namespace a cell's client runs in: `None` for the host's.
    pub fn client_namespace(&self, settings: &Settings) -> Result<Option<std::sync::Arc<std::fs::File>>> {
        match options::netpath(settings)? {
            NetPath::Host => Ok(None),
            NetPath::Bridge => {
                let b = self.bridge.borrow();
                let b = b
                    .as_ref()
                    .ok_or_else(|| anyhow!("netpath bridge: the namespace was not created"))?;
                Ok(Some(std::sync::Arc::new(b.namespace_file()?)))
            }
        }
    }

    /// The endpoint of a cell's target without its route.
    pub fn direct_endpoint(&self, settings: &Settings) -> Result<Endpoint> {
        let name = settings
            .get("target")
            .ok_or_else(|| anyhow!("the cell has no target setting"))?;
        let mut t = match self.targets.get(name) {
            Some(conninfo) => {
                let mut t = Target::parse(conninfo)?;
                t.label = Some(name.to_string());
                t
            }
            None => Target::parse(name).with_context(|| {
                format!(
                    "target {:?} is neither a known name ({}) nor a valid conninfo",
                    crate::targets::redact(name),
                    self.targets.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?,
        };
        if let Some(mode) = options::sslmode(settings)? {
            t = t.with_sslmode(mode).context("setting sslmode")?;
        }
        Ok(Endpoint::new(t)?)
    }
}

/// Every check of a suite's cells that needs no server: each cell's settings through
/// the options layer, as a run would take them. `run --dry-run` stops after this.
pub fn check(suite: &Suite, schema: &str) -> Result<()> {
    for c in &suite.cells {
        let checked = (|| -> Result<()> {
            options::route_spec(&c.settings)?;
            options::netpath(&c.settings)?;
            options::sslmode(&c.settings)?;
            options::server_cpus(&c.settings)?;
            let fault = options::fault(&c.settings)?;
            // A trace cell's checks, and a figure only a replay measures refused elsewhere.
            super::replayed::check_cell(suite, &c.settings)?;
            if super::replayed::trace_of(&c.settings).is_some() {
                return Ok(());
            }
            match suite.kind {
                Kind::Load => {
                    if let (Some(f), Some(d)) = (fault, suite.duration) {
                        if f.at >= d {
                            bail!(
                                "fault_at {} is not inside the measurement ({}): strike before its end",
                                crate::units::format_duration(f.at),
                                crate::units::format_duration(d)
                            );
                        }
                    }
                    let o = LoadOptions::from_settings(&c.settings, suite.duration, suite.warmup, schema)?;
                    if suite.slice.is_some() {
                        // Turns stop a cell's clients between its turns; a clock that
                        // runs on meanwhile (a think time, a rate's schedule, a pool's
                        // timers, a fault's moment) would not measure what it says.
                        let clock = if !o.think.is_zero() {
                            Some("think")
                        } else if o.rate.is_some() {
                            Some("rate")
                        } else if o.pool.max_lifetime.is_some() || o.pool.idle_timeout.is_some() {
                            Some("pool_lifetime or pool_idle_timeout")
                        } else if fault.is_some() {
                            Some("fault")
                        } else {
                            None
                        };
                        if let Some(setting) = clock {
                            bail!(
                                "slices: cells take turns, and {setting} keeps time through the other cells' turns; \
                                 remove `slices` from the suite, or {setting} from the cell"
                            );
                        }
                    }
                    o.check().map(|_| ())
                }
                Kind::Connect if fault.is_some() => {
                    bail!("faults strike during load suites, not connect suites")
                }
                Kind::Connect => options::connect_settings(&c.settings).map(|_| ()),
            }
        })();
        checked.with_context(|| format!("suite {}, cell {}", suite.name, c.name))?;
    }
    Ok(())
}

/// The settings that shape noise and durability, as the server reports them; empty when
/// they cannot be read (a pooler that refuses the query, say), never guessed.
async fn server_settings(ep: &Endpoint) -> Vec<String> {
    const PG: &str = "SELECT name || '=' || setting || coalesce(unit, '') FROM pg_settings \
        WHERE name IN ('synchronous_commit', 'fsync', 'checkpoint_timeout', 'max_wal_size', \
        'autovacuum', 'shared_buffers') ORDER BY name";
    const MYSQL: &str = "SELECT CONCAT(LOWER(variable_name), '=', variable_value) \
        FROM information_schema.global_variables WHERE variable_name IN \
        ('INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'SYNC_BINLOG', 'LOG_BIN', 'INNODB_BUFFER_POOL_SIZE', \
        'INNODB_DOUBLEWRITE', 'THREAD_HANDLING') ORDER BY variable_name";
    let sql = match ep.engine() {
        crate::proto::Engine::Postgres => PG,
        crate::proto::Engine::Mysql => MYSQL,
    };
    let Ok((mut session, _)) = crate::proto::connect(ep, &Default::default()).await else {
        return Vec::new();
    };
    let settings = session.query_column(sql).await.unwrap_or_default();
    session.close().await;
    settings
}

/// The datasets of the cells that ask for a `scale`: connbench's tables at that scale in
/// a schema of their own on each cell's target, made once, before anything is measured
/// (and before a cell sets a CPU quota), and found again by later runs.
async fn make_datasets(suite: &Suite, ctx: &Context) -> Result<()> {
    let mut done = std::collections::BTreeSet::new();
    for c in &suite.cells {
        let Some(scale) = options::dataset_scale(&c.settings)? else {
            continue;
        };
        let direct = ctx.direct_endpoint(&c.settings)?;
        let schema = options::scaled_schema(&ctx.schema, scale);
        if !done.insert((direct.target.conninfo(), scale)) {
            continue;
        }
        let made = crate::dataset::pgbench::ensure(&direct, &schema, scale)
            .await
            .with_context(|| {
                format!(
                    "suite {}, cell {}: the tables at scale {scale}",
                    suite.name, c.name
                )
            })?;
        if let Some(r) = made {
            eprintln!(
                "{}: made connbench's tables at scale {scale} in schema {schema} on {} ({} rows, {:.1} s); \
                 a later run on this target reuses them (`connbench init TARGET --drop --schema {schema}` \
                 removes them)",
                suite.name,
                direct.target.name(),
                r.rows,
                r.elapsed.as_secs_f64()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_cpus_axis_makes_cells_compared_with_the_smallest_size_and_one_measurement_per_size() {
        let text = r#"
name = "size"
question = "How does throughput grow with the server's cores?"
kind = "load"
duration = "5s"
baseline = "server_cpus=0.5 target=unix"

[defaults]
clients = 8
workload = "select-only"

[axes]
server_cpus = [0.5, 1, 2]
target = ["unix", "tcp"]
"#;
        let s = Suite::parse(text, "size.toml").unwrap();
        let sizes: Vec<Option<f64>> = s
            .cells
            .iter()
            .map(|c| options::server_cpus(&c.settings).unwrap())
            .collect();
        assert_eq!(
            sizes,
            [Some(0.5), Some(0.5), Some(1.0), Some(1.0), Some(2.0), Some(2.0)]
        );
        // Each larger size against the same target at 0.5 core; 0.5 core's tcp against
        // the baseline.
        let versus: Vec<Option<usize>> = s.cells.iter().map(|c| c.versus).collect();
        assert_eq!(versus, [None, None, Some(0), Some(1), Some(0), Some(1)]);
        check(&s, "connbench").unwrap();
        // With slices, a round's cells of one size sit side by side (one measurement each).
        let sliced = Suite::parse(
            &text.replace(
                "kind = \"load\"",
                "kind = \"load\"\nslices = \"1s\"\nrepetitions = 6",
            ),
            "s",
        )
        .unwrap();
        check(&sliced, "connbench").unwrap();
        let plan = sliced.plan();
        for round in plan.chunks(sliced.cells.len()) {
            let sizes: Vec<&String> = round
                .iter()
                .map(|st| &sliced.cells[st.cell].settings["server_cpus"])
                .collect();
            let changes = sizes.windows(2).filter(|w| w[0] != w[1]).count();
            assert_eq!(changes, 2, "a size split in a round: {sizes:?}");
        }
        let added = sliced.round(9, &[0, 1, 2, 3, 4, 5]);
        let sizes: Vec<&String> = added
            .iter()
            .map(|st| &sliced.cells[st.cell].settings["server_cpus"])
            .collect();
        assert_eq!(sizes.windows(2).filter(|w| w[0] != w[1]).count(), 2, "{sizes:?}");
        let bad = Suite::parse(
            &text
                .replace("0.5, 1, 2", "0, 1")
                .replace("server_cpus=0.5", "server_cpus=0"),
            "b",
        );
        let e = match bad {
            Ok(s) => format!("{:#}", check(&s, "connbench").unwrap_err()),
            Err(e) => format!("{e:#}"),
        };
        assert!(e.contains("server_cpus") && e.contains("number of cores"), "{e}");
    }
}
