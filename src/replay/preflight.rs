//! Before the replay: does the target have the relations the recording used? Each
//! distinct statement (one per fingerprint) that ran successfully when recorded is
//! parsed once on one connection, and nothing executes: on PostgreSQL, Parse and
//! Describe of the unnamed statement, then Sync, where every `42P01` (undefined_table)
//! names a missing relation; on MySQL, COM_STMT_PREPARE (closed again at once), where
//! every error 1146 (ER_NO_SUCH_TABLE) does. A relation the trace itself creates (a
//! recorded CREATE naming it) is not missing. So a replay against the wrong database fails with one line
//! per missing relation instead of thousands of errors.
//!
//! Other errors are not this check's business and are left to the replay: a simple Query
//! holding several statements cannot be parsed as one (42601), a parameter whose type
//! the text alone does not fix (42P18), and so on.

use std::collections::BTreeMap;

use crate::proto::postgres::{Frontend, Session};
use crate::proto::{mysql, ConnectError};

/// A relation missing on the target, and how many of the trace's statements use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub relation: String,
    pub statements: u64,
}

/// Parses each of `statements` on `s`; the relations missing, except those `creates`
/// (the trace's recorded CREATE statements) name.
pub async fn missing_relations(
    s: &mut Session,
    statements: &[String],
    creates: &[String],
) -> Result<Vec<Missing>, ConnectError> {
    let mut missing = Counts::new();
    for sql in statements {
        let wire = [
            Frontend::Parse {
                name: String::new(),
                sql: sql.clone(),
                param_types: Vec::new(),
            },
            Frontend::Describe {
                what: b'S',
                name: String::new(),
            },
            Frontend::Sync,
        ];
        s.send_raw(&wire).await?;
        let out = s.read_raw().await?;
        if let Some((code, message)) = out.error {
            if code == "42P01" {
                *missing.entry(relation_of(&message, '"')).or_default() += 1;
            }
        }
    }
    Ok(not_created(missing, creates))
}

type Counts = BTreeMap<String, u64>;

/// The MySQL pre-flight: each statement prepared and closed again.
pub async fn missing_tables(
    s: &mut mysql::Session,
    statements: &[String],
    creates: &[String],
) -> Result<Vec<Missing>, ConnectError> {
    use mysql::codec::{COM_STMT_CLOSE, COM_STMT_PREPARE};
    let mut missing = Counts::new();
    for sql in statements {
        s.send_command(COM_STMT_PREPARE, sql.as_bytes()).await?;
        let out = s.read_prepared().await?;
        if let Some(id) = out.statement_id {
            s.send_command(COM_STMT_CLOSE, &id.to_le_bytes()).await?;
        }
        if let Some((code, message)) = out.error {
            if code.starts_with("1146/") {
                *missing.entry(relation_of(&message, '\'')).or_default() += 1;
            }
        }
    }
    Ok(not_created(missing, creates))
}

fn not_created(missing: Counts, creates: &[String]) -> Vec<Missing> {
    missing
        .into_iter()
        .filter(|(r, _)| !created(r, creates))
        .map(|(relation, statements)| Missing { relation, statements })
        .collect()
}

/// The relation an undefined_table message names: its first part quoted with `quote`
/// (`relation "pgbench_accounts" does not exist`, `Table 'db.t' doesn't exist`), else
/// the message.
fn relation_of(message: &str, quote: char) -> String {
    let mut parts = message.split(quote);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(name), Some(_)) => name.to_string(),
        _ => message.to_string(),
    }
}

/// Whether a recorded CREATE names `relation` (its last dotted part, as a word, case
/// folded as PostgreSQL folds unquoted names).
fn created(relation: &str, creates: &[String]) -> bool {
    let name = relation.rsplit('.').next().unwrap_or(relation).to_lowercase();
    creates.iter().any(|sql| {
        let sql = sql.to_lowercase();
        let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
        sql.split(|c: char| !is_word(c)).any(|w| w == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations_are_read_from_the_message_and_a_recorded_create_counts() {
        assert_eq!(
            relation_of("relation \"pgbench_accounts\" does not exist", '"'),
            "pgbench_accounts"
        );
        assert_eq!(relation_of("relation \"s.t\" does not exist", '"'), "s.t");
        assert_eq!(relation_of("no quotes", '"'), "no quotes");
        assert_eq!(
            relation_of("Table 'sbtest.sbtest1' doesn't exist", '\''),
            "sbtest.sbtest1"
        );
        let creates = vec!["CREATE TEMP TABLE Scratch (a int)".to_string()];
        assert!(created("scratch", &creates));
        assert!(created("public.scratch", &creates));
        assert!(!created("scratch2", &creates));
        assert!(!created("pgbench_accounts", &creates));
    }
}
