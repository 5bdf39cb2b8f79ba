//! What one request executed: the statement each of its executions ran, in order, for
//! `trace`'s statement table and shapes and for `replay`'s counts alike.
//!
//! A request is not one statement. An extended-protocol group the client pipelines
//! (psycopg 3's pipeline mode, JDBC's batches, asyncpg's `executemany`) holds a Parse,
//! Bind and Execute per statement before its one Sync: five INSERTs and an UPDATE are six
//! executions of two statements in one request. Counting a request as one call of its
//! first statement counted 966 INSERTs where an application made 4,870. Each Execute runs
//! the statement its portal was bound to; a Parse names the statement it prepares (the
//! unnamed one too, which the next Parse replaces).
//!
//! After an error the server skips the group's remaining messages up to its Sync, so
//! only the executions up to the failing one ran ([`Executions::ran`]): the statements
//! before it each completed (one command tag each), the failing one is the next.

use std::collections::HashMap;

use crate::event::{Op, Outcome, Request, Step};

/// The most statement names a session's map keeps: an application names few; a client
/// naming one per call is kept to this.
pub const MAX_NAMES: usize = 10_000;

/// What a request executed and prepared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Executions {
    /// Per execution, in order, its statement's SQL (`None` when the trace does not hold
    /// it: a statement prepared before the recording, a FunctionCall).
    pub sqls: Vec<Option<String>>,
    /// The first statement the request prepared (its Parse or COM_STMT_PREPARE).
    pub parsed: Option<String>,
    /// It executed a statement prepared by an earlier request.
    pub prepared: bool,
}

impl Executions {
    /// What `op` executed; `names` holds the session's prepared statements' SQL by name
    /// (PostgreSQL) or recorded id (MySQL), kept up to date by this call (a Parse here
    /// names one; MySQL's are named by their answers, [`note_prepared`]).
    pub fn of(op: &Op, names: &mut HashMap<String, String>) -> Executions {
        match op {
            Op::Query(s) | Op::ComQuery(s) => Executions {
                sqls: vec![s.sql.clone()],
                ..Executions::default()
            },
            Op::ComStmtPrepare(s) => Executions {
                parsed: s.sql.clone(),
                ..Executions::default()
            },
            Op::ComStmtExecute { statement_id, .. } => Executions {
                sqls: vec![names.get(&statement_id.to_string()).cloned()],
                prepared: true,
                ..Executions::default()
            },
            Op::FunctionCall { .. } => Executions {
                sqls: vec![None],
                ..Executions::default()
            },
            Op::Extended { steps } => group(steps, names),
            _ => Executions::default(),
        }
    }

    /// How many of the executions ran, by the request's outcome and its command tags
    /// (one a completed statement): all of them, or those up to the one that failed.
    pub fn ran(&self, r: &Request) -> usize {
        ran(self.sqls.len(), r.outcome == Outcome::Error, r.tags.len())
    }
}

/// Of `executions`, how many ran: all unless the request `failed`, then the `completed`
/// ones and the one that failed.
pub fn ran(executions: usize, failed: bool, completed: usize) -> usize {
    if failed {
        executions.min(completed + 1)
    } else {
        executions
    }
}

/// Remembers what a MySQL COM_STMT_PREPARE prepared, once its answer names the id.
pub fn note_prepared(r: &Request, names: &mut HashMap<String, String>) {
    if let (Op::ComStmtPrepare(s), Some(p)) = (&r.op, &r.prepared) {
        if let Some(sql) = &s.sql {
            remember(names, p.statement_id.to_string(), sql.clone());
        }
    }
}

fn remember(names: &mut HashMap<String, String>, name: String, sql: String) {
    if names.len() < MAX_NAMES || names.contains_key(&name) {
        names.insert(name, sql);
    }
}

/// An extended group's executions: each Execute runs what its portal was bound to.
fn group(steps: &[Step], names: &mut HashMap<String, String>) -> Executions {
    let mut out = Executions::default();
    // Portals live until the Sync (unnamed) or the transaction's end; a group binds
    // the ones it executes.
    let mut portals: HashMap<&str, Option<String>> = HashMap::new();
    let mut parsed_here = false;
    let mut bound_named = false;
    for step in steps {
        match step {
            Step::Parse { statement, sql, .. } => {
                parsed_here = true;
                if let Some(text) = &sql.sql {
                    remember(names, statement.clone(), text.clone());
                    out.parsed.get_or_insert_with(|| text.clone());
                } else {
                    names.remove(statement);
                }
            }
            Step::Bind {
                portal, statement, ..
            } => {
                bound_named |= !statement.is_empty();
                portals.insert(portal, names.get(statement).cloned());
            }
            Step::Execute { portal, .. } => {
                out.sqls.push(portals.get(portal.as_str()).cloned().flatten());
            }
            _ => {}
        }
    }
    out.prepared = !parsed_here && bound_named;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Sql;

    fn parse(name: &str, sql: &str) -> Step {
        Step::Parse {
            statement: name.into(),
            sql: Sql {
                sql: Some(sql.into()),
                literals: None,
            },
            param_types: vec![],
        }
    }

    fn bind(statement: &str) -> Step {
        Step::Bind {
            portal: String::new(),
            statement: statement.into(),
            params: Some(vec![]),
            result_formats: vec![],
        }
    }

    fn execute() -> Step {
        Step::Execute {
            portal: String::new(),
            max_rows: 0,
        }
    }

    /// psycopg 3's pipeline: five INSERTs (the first parsed, the rest bound to the
    /// statement it named) and an UPDATE on the unnamed statement, one Sync: six
    /// executions of two statements; an error at the third leaves three that ran.
    #[test]
    fn a_pipelined_group_is_an_execution_per_execute() {
        let insert = "INSERT INTO t VALUES ($1)";
        let update = "UPDATE u SET n = n + $1";
        let mut steps = vec![parse("_pg3_0", insert), bind("_pg3_0"), execute()];
        for _ in 0..4 {
            steps.extend([bind("_pg3_0"), execute()]);
        }
        steps.extend([parse("", update), bind(""), execute()]);
        let mut names = HashMap::new();
        let e = Executions::of(&Op::Extended { steps }, &mut names);
        let mut want = vec![Some(insert.to_string()); 5];
        want.push(Some(update.into()));
        assert_eq!(e.sqls, want);
        assert_eq!(e.parsed.as_deref(), Some(insert));
        assert!(!e.prepared);
        assert_eq!(ran(6, false, 6), 6);
        assert_eq!(
            ran(6, true, 2),
            3,
            "two completed, the third failed, three skipped"
        );

        // The next group binds the named statement alone: prepared, one execution.
        let again = Executions::of(
            &Op::Extended {
                steps: vec![bind("_pg3_0"), execute()],
            },
            &mut names,
        );
        assert_eq!(
            (again.sqls, again.prepared),
            (vec![Some(insert.to_string())], true)
        );
    }
}
