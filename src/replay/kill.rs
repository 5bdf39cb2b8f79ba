//! MySQL's `KILL QUERY <id>` (and `KILL [CONNECTION] <id>`) replayed against the
//! replayed connection, not the recorded one. An application that stops a slow query on
//! MySQL or MariaDB (a client-side timeout, an admin endpoint) sends `KILL QUERY` with the
//! victim's connection id on a connection of its own: an ordinary COM_QUERY. Replayed as
//! recorded, its id names a connection of the recording's server, so it fails with 1094
//! (unknown thread id) and the slow query runs its whole length again, or it stops
//! whatever connection holds that id on the target.
//!
//! This module finds such statements ([`parse`]), names the replayed session whose
//! recorded connection id (the handshake's, `backend_pid` in the trace) the KILL named
//! and that was open at its time (as a PostgreSQL cancel's target is found,
//! [`super::cancel::plan`]), and at send time writes the id that session's connection
//! has now ([`wire`]): its own, or with `--pool` the pooled one it holds then. A KILL
//! whose session holds none then is not sent (it would stop an unrelated connection) and
//! is counted as not replayed, with the reason, beside the PostgreSQL cancels.

use super::cancel::{self, Keys};
use super::mysql::Command;
use crate::proto::mysql::codec::COM_QUERY;

/// A recorded KILL: the replayed session it targets (or why none), and whether it stops
/// the query only (`KILL QUERY`) or the connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kill {
    pub target: Result<u64, &'static str>,
    pub query: bool,
    /// The recorded connection id it named.
    pub named: u32,
}

/// Not yet matched to a session: the schedule does once every session is read.
pub const UNRESOLVED: &str = "the KILL's target was not looked for";

/// `KILL [HARD | SOFT] [QUERY | CONNECTION] <id>`, MySQL's and MariaDB's syntax: whether it
/// stops the query only, and the id. `KILL QUERY ID <query id>` (MariaDB's, by query id)
/// and anything else is `None`.
pub fn parse(sql: &str) -> Option<(bool, u32)> {
    let mut words = sql.trim().trim_end_matches(';').split_whitespace().peekable();
    if !words.next()?.eq_ignore_ascii_case("kill") {
        return None;
    }
    if words
        .peek()
        .is_some_and(|w| w.eq_ignore_ascii_case("hard") || w.eq_ignore_ascii_case("soft"))
    {
        words.next();
    }
    let mut query = false;
    if let Some(w) = words.peek() {
        if w.eq_ignore_ascii_case("query") {
            query = true;
            words.next();
        } else if w.eq_ignore_ascii_case("connection") {
            words.next();
        }
    }
    let id = words.next()?.parse().ok()?;
    words.next().is_none().then_some((query, id))
}

/// A recorded KILL's target, by its time (since the trace's start) and the id it named:
/// the session open then with that recorded connection id.
pub fn target(at_ns: u64, named: u32, sessions: &[cancel::Target]) -> Result<u64, &'static str> {
    let recorded = [cancel::Recorded {
        at_ns,
        pid: Some(named),
    }];
    cancel::plan(&recorded, sessions)[0].target
}

/// What to send for `kill` now: the KILL with the id of the connection its target holds,
/// or why it cannot be sent.
pub fn wire(kill: &Kill, keys: &Keys) -> Result<Command, &'static str> {
    let id = keys
        .mysql_id(kill.target?)
        .ok_or("the target session held no connection at the KILL's time")?;
    let sql = if kill.query {
        format!("KILL QUERY {id}")
    } else {
        format!("KILL {id}")
    };
    Ok(Command {
        code: COM_QUERY,
        payload: sql.into_bytes(),
        statement_id: None,
        prepares: None,
        answered: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_statements_are_read_as_mysql_and_mariadb_write_them() {
        assert_eq!(parse("KILL QUERY 42"), Some((true, 42)));
        assert_eq!(parse("  kill query 42;"), Some((true, 42)));
        assert_eq!(parse("KILL 7"), Some((false, 7)));
        assert_eq!(parse("KILL CONNECTION 7"), Some((false, 7)));
        assert_eq!(parse("KILL HARD QUERY 9"), Some((true, 9)));
        assert_eq!(parse("KILL QUERY ID 9"), None, "MariaDB's by query id");
        assert_eq!(parse("KILL QUERY @id"), None);
        assert_eq!(parse("SELECT 1"), None);
        assert_eq!(parse("KILLQUERY 1"), None);
    }
}
