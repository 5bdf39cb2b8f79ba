//! Workloads: what a transaction does. This folder holds the built-in scripts and the
//! query modes (here), the executor that runs a parsed script ([`crate::script`]) on a
//! [`crate::proto::Session`] ([`executor`]), the `\shell`/`\setshell` commands it hands
//! to `sh -c` (`shell`), and sysbench's OLTP scripts, generated for that executor
//! ([`sysbench`]).
//!
//! The built-in workloads are pgbench's own scripts, pointed at connbench's schema.
//! The tables they read are made by `dataset`, one stage up; the threads that
//! run clients of them are `load`'s.

pub mod executor;
mod shell;
pub mod sysbench;

pub use crate::script::{Script, ScriptError, VAR_CLIENT_ID, VAR_DEFAULT_SEED, VAR_RANDOM_SEED, VAR_SCALE};
pub use executor::{ClientSeat, CommandTimes, Executor, StepError};
pub use sysbench::Oltp;

/// How statements are sent, as pgbench's `-M`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueryMode {
    /// One Query message with the values in the SQL text.
    Simple,
    /// Parse, Bind, Describe, Execute, Sync for every statement.
    Extended,
    /// Parse once per connection, then Bind, Describe, Execute, Sync.
    Prepared,
}

impl QueryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QueryMode::Simple => "simple",
            QueryMode::Extended => "extended",
            QueryMode::Prepared => "prepared",
        }
    }

    pub const ALL: [QueryMode; 3] = [QueryMode::Simple, QueryMode::Extended, QueryMode::Prepared];
}

impl std::str::FromStr for QueryMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        QueryMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("invalid mode {s:?}: use simple, extended or prepared"))
    }
}

/// The built-in workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Builtin {
    /// pgbench's default: five statements in a transaction over all four tables.
    TpcbLike,
    /// tpcb-like without the tellers and branches updates (pgbench -N).
    SimpleUpdate,
    /// One primary-key SELECT on accounts (pgbench -S).
    SelectOnly,
    /// No statement: each transaction is a connection opened and closed.
    ConnectOnly,
    /// One of sysbench's OLTP scripts, on sysbench's tables (see [`crate::workload::sysbench`]).
    #[serde(untagged)]
    Sysbench(Oltp),
}

impl Builtin {
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::TpcbLike => "tpcb-like",
            Builtin::SimpleUpdate => "simple-update",
            Builtin::SelectOnly => "select-only",
            Builtin::ConnectOnly => "connect-only",
            Builtin::Sysbench(o) => o.as_str(),
        }
    }

    pub const ALL: [Builtin; 12] = [
        Builtin::TpcbLike,
        Builtin::SimpleUpdate,
        Builtin::SelectOnly,
        Builtin::ConnectOnly,
        Builtin::Sysbench(Oltp::PointSelect),
        Builtin::Sysbench(Oltp::ReadOnly),
        Builtin::Sysbench(Oltp::ReadWrite),
        Builtin::Sysbench(Oltp::WriteOnly),
        Builtin::Sysbench(Oltp::UpdateIndex),
        Builtin::Sysbench(Oltp::UpdateNonIndex),
        Builtin::Sysbench(Oltp::Insert),
        Builtin::Sysbench(Oltp::Delete),
    ];

    /// The built-in workload of this name, if it is one.
    pub fn named(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.as_str() == name)
    }

    /// The script text, with tables in `schema`.
    pub fn script(self, schema: &str) -> String {
        let head = "\\set aid random(1, 100000 * :scale)\n\
                    \\set bid random(1, 1 * :scale)\n\
                    \\set tid random(1, 10 * :scale)\n\
                    \\set delta random(-5000, 5000)\n";
        let s = schema;
        match self {
            Builtin::TpcbLike => format!(
                "{head}BEGIN;\n\
                 UPDATE {s}.accounts SET abalance = abalance + :delta WHERE aid = :aid;\n\
                 SELECT abalance FROM {s}.accounts WHERE aid = :aid;\n\
                 UPDATE {s}.tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n\
                 UPDATE {s}.branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n\
                 INSERT INTO {s}.history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n\
                 COMMIT;\n"
            ),
            Builtin::SimpleUpdate => format!(
                "{head}BEGIN;\n\
                 UPDATE {s}.accounts SET abalance = abalance + :delta WHERE aid = :aid;\n\
                 SELECT abalance FROM {s}.accounts WHERE aid = :aid;\n\
                 INSERT INTO {s}.history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n\
                 COMMIT;\n"
            ),
            Builtin::SelectOnly => format!(
                "\\set aid random(1, 100000 * :scale)\n\
                 SELECT abalance FROM {s}.accounts WHERE aid = :aid;\n"
            ),
            Builtin::ConnectOnly => String::new(),
            // With sysbench's defaults: one table of 10,000 rows, the simple protocol
            // (`--show-script`); a run generates it for the tables it finds.
            Builtin::Sysbench(o) => crate::workload::sysbench::script(
                o,
                &crate::workload::sysbench::SysbenchOptions::default(),
                1,
                10_000,
                QueryMode::Simple,
            ),
        }
    }

    /// Whether the workload reads connbench's tables (and so needs `connbench init`).
    pub fn needs_tables(self) -> bool {
        self != Builtin::ConnectOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Command;

    #[test]
    fn parses_the_builtin_scripts() {
        let s = Script::parse("tpcb-like", &Builtin::TpcbLike.script("connbench")).unwrap();
        assert_eq!(s.statements(), 7);
        assert_eq!(s.variables[..2], ["scale".to_string(), "client_id".to_string()]);
        let Command::Sql(update) = &s.commands[5] else {
            panic!()
        };
        assert_eq!(
            update.placeholder_sql,
            "UPDATE connbench.accounts SET abalance = abalance + $1 WHERE aid = $2;"
        );
        assert_eq!(update.params.len(), 2);
        let Command::Sql(insert) = &s.commands[9] else {
            panic!()
        };
        assert!(
            insert
                .placeholder_sql
                .contains("VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)"),
            "{}",
            insert.placeholder_sql
        );
        assert_eq!(
            Script::parse("s", &Builtin::SelectOnly.script("x"))
                .unwrap()
                .statements(),
            1
        );
        assert_eq!(
            Script::parse("c", &Builtin::ConnectOnly.script("x"))
                .unwrap()
                .statements(),
            0
        );
    }
}
