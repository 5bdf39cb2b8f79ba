//! Repetitions of a trace that writes, each from the same data (issue 55): which cells
//! restore (a cell's `restore`, else `template` on connbench's sandbox when the trace
//! writes, `none` elsewhere), the database each restores (the server's: the sandbox's
//! PgBouncer names are its `connbench`), the copy taken before the first repetition, the
//! restore before each other one (the runner calls it before a repetition's clock
//! starts), and at the run's end, whatever ended it, the database put back once more
//! (left as the run found it) and the copy dropped. The copy and the restore themselves
//! are `dataset::snapshot`'s.

use std::time::Duration;

use anyhow::{Context as _, Result};

use super::check::trace_of;
use super::traces::{trace_for, Traces};
use crate::dataset::snapshot::{copy_name, Pooler, Snapshot};
use crate::experiment::suite::Suite;
use crate::options::cell::Settings;
use crate::options::{self, Restore};
use crate::proto::{Endpoint, Engine};
use crate::sandbox::SandboxInfo;
use crate::targets::Target;

/// The databases a run's trace cells restore, and each cell's.
#[derive(Default)]
pub struct Restores {
    /// Per cell, the database it restores (an index into `slots`).
    cells: Vec<Option<usize>>,
    slots: Vec<Slot>,
}

/// One database restored: how to reach it, its copy once taken, the restores' times.
struct Slot {
    admin: Endpoint,
    database: String,
    /// The sandbox's PgBouncer console and its names for the database.
    pooler: Option<(Endpoint, Vec<String>)>,
    /// "database connbench on connbench's sandbox", for the notes.
    described: String,
    taken: Option<Snapshot>,
    copied: Option<Duration>,
    restored: Vec<Duration>,
}

/// Where a cell's database is restored from: its server's admin connection, the
/// database, the sandbox's PgBouncer in front of it, and how the notes name it.
type Place = (Endpoint, String, Option<(Endpoint, Vec<String>)>, String);

/// The trace cells of `suite` that restore, and the database each restores: on a
/// sandbox of connbench's (`sandbox`, the run's own, or a running one a target points
/// at) a writing trace's cells by default, elsewhere only a cell that sets `restore =
/// "template"`; never one that sets `none`.
pub fn plan(
    suite: &Suite,
    traces: &Traces,
    direct: impl Fn(&Settings) -> Result<Endpoint>,
    sandbox: Option<&SandboxInfo>,
    store: &str,
) -> Result<Restores> {
    let mut r = Restores {
        cells: vec![None; suite.cells.len()],
        slots: Vec::new(),
    };
    for (i, c) in suite.cells.iter().enumerate() {
        let Some(file) = trace_of(&c.settings) else {
            continue;
        };
        let ep = direct(&c.settings)?;
        let own = sandbox
            .filter(|s| crate::sandbox::registry::serves(s, &ep.target))
            .cloned()
            .or_else(|| crate::sandbox::registry::owning(&ep.target));
        let restores = match options::restore(&c.settings)? {
            Some(Restore::Template) => true,
            Some(Restore::None) => false,
            None => own.is_some() && !trace_for(traces, file)?.writes.is_empty(),
        };
        if !restores {
            continue;
        }
        let (admin, database, pooler, described) = place(&ep, own.as_ref())
            .with_context(|| format!("suite {}, cell {}: restore", suite.name, c.name))?;
        refuse_store_inside(&admin, &database, store)
            .with_context(|| format!("suite {}, cell {}: restore", suite.name, c.name))?;
        let same = |s: &Slot| s.database == database && same_server(&s.admin.target, &admin.target);
        let slot = match r.slots.iter().position(same) {
            Some(k) => k,
            None => {
                r.slots.push(Slot {
                    admin,
                    database,
                    pooler,
                    described,
                    taken: None,
                    copied: None,
                    restored: Vec::new(),
                });
                r.slots.len() - 1
            }
        };
        r.cells[i] = Some(slot);
    }
    Ok(r)
}

fn same_server(a: &Target, b: &Target) -> bool {
    a.host == b.host && a.port == b.port && a.hostaddr == b.hostaddr
}

/// Where a cell on `ep` restores its database: on the sandbox, PostgreSQL's own (through
/// its socket, a PgBouncer target's database being the server's `connbench`), with the
/// sandbox's PgBouncer paused meanwhile; elsewhere the target's server itself.
fn place(ep: &Endpoint, own: Option<&SandboxInfo>) -> Result<Place> {
    let t = &ep.target;
    match (ep.engine(), own) {
        (Engine::Postgres, Some(sb)) => {
            let database = match t.port == sb.pgbouncer_port {
                true => crate::sandbox::DATABASE.to_string(),
                false => t.dbname.clone(),
            };
            let mut admin = sb.target("unix")?.target()?;
            admin.dbname = "postgres".into();
            let aliases = sb.pgbouncer_aliases(&database);
            let pooler = match aliases.is_empty() {
                true => None,
                false => Some((Endpoint::new(sb.pgbouncer_admin()?)?, aliases)),
            };
            let described = format!("database {database} on connbench's sandbox");
            Ok((Endpoint::new(admin)?, database, pooler, described))
        }
        (Engine::Postgres, None) => {
            let mut admin = t.clone();
            admin.dbname = "postgres".into();
            admin.label = None;
            let described = format!("database {} on {}", t.dbname, admin.name());
            Ok((Endpoint::new(admin)?, t.dbname.clone(), None, described))
        }
        (Engine::Mysql, own) => {
            let on = match own {
                Some(_) => "connbench's sandbox".to_string(),
                None => t.name(),
            };
            Ok((
                ep.clone(),
                t.dbname.clone(),
                None,
                format!("database {} on {on}", t.dbname),
            ))
        }
    }
}

/// A restore would drop the run's own store with the database: refused.
fn refuse_store_inside(admin: &Endpoint, database: &str, store: &str) -> Result<()> {
    let Ok(s) = Target::parse(store) else {
        return Ok(());
    };
    if s.engine == admin.engine() && s.dbname == database && same_server(&s, &admin.target) {
        anyhow::bail!(
            "database {database} holds the run's store ({store}), which a restore would drop with it: \
             keep the store in another database (--store)"
        );
    }
    Ok(())
}

impl Restores {
    /// How a cell's repetitions start, for the notes: `None` when it restores nothing.
    pub fn described(&self, cell: usize) -> Option<&str> {
        let k = self.cells.get(cell).copied().flatten()?;
        Some(&self.slots[k].described)
    }

    /// Before a repetition of `cells` (its clock not started): the first copies each
    /// one's database, the others put it back from the copy.
    pub async fn before(&mut self, cells: impl IntoIterator<Item = usize>) -> Result<()> {
        let mut slots: Vec<usize> = cells
            .into_iter()
            .filter_map(|c| self.cells.get(c).copied().flatten())
            .collect();
        slots.dedup();
        for k in slots {
            let n = k + 1;
            let slot = &mut self.slots[k];
            match slot.taken.as_mut() {
                Some(s) => slot.restored.push(s.restore().await?),
                None => {
                    let started = std::time::Instant::now();
                    let pooler = slot.pooler.as_ref().map(|(admin, databases)| Pooler {
                        admin: admin.clone(),
                        databases: databases.clone(),
                    });
                    let s = Snapshot::take(slot.admin.clone(), &slot.database, copy_name(n), pooler).await?;
                    slot.copied = Some(started.elapsed());
                    slot.taken = Some(s);
                }
            }
        }
        Ok(())
    }

    /// At the run's end, whatever ended it: each database put back as the run found it,
    /// its copy dropped, and what the restores cost said. A failure is a warning naming
    /// what is left: the measurements are stored already.
    pub async fn finish(&mut self) {
        for slot in &mut self.slots {
            let Some(s) = slot.taken.as_mut() else {
                continue;
            };
            let back = s.restore().await;
            let dropped = match &back {
                Ok(_) => s.drop_copy().await,
                Err(_) => Err(anyhow::anyhow!("{} is kept", s.copy)),
            };
            match (back, dropped) {
                (Ok(_), Ok(())) => eprintln!("note: restore: {}", cost(slot)),
                (back, dropped) => eprintln!(
                    "warning: restore: {}: putting it back at the run's end: {}; connbench's copy {} is \
                     left on the server (drop it with DROP DATABASE {} once you have what you need)",
                    slot.described,
                    match (back, dropped) {
                        (Err(e), _) | (_, Err(e)) => format!("{e:#}"),
                        _ => String::new(),
                    },
                    s.copy,
                    s.copy
                ),
            }
        }
    }
}

/// What a database's restores cost: the copy, each restore (median and longest), none
/// of it inside a repetition's measured time.
fn cost(slot: &Slot) -> String {
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    let mut r = slot.restored.clone();
    r.sort();
    let each = match (r.get(r.len() / 2), r.last()) {
        (Some(m), Some(max)) => format!(
            "restored {} times before a repetition (median {}, longest {})",
            r.len(),
            ms(*m),
            ms(*max)
        ),
        _ => "never restored before a repetition".to_string(),
    };
    format!(
        "{}: copied in {} before the first repetition, {each}, outside the measured time; \
         put back as the run found it and the copy dropped",
        slot.described,
        slot.copied.map_or("?".into(), ms)
    )
}
