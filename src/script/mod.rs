//! pgbench's script language (pgbench 15), parsed and evaluated; no I/O.
//!
//! A script's text becomes a [`Script`]: its [`Command`]s (SQL, in both the form simple
//! mode sends and the `$n` form of extended and prepared modes, and the meta-commands
//! `\set`, `\sleep`, `\if`/`\elif`/`\else`/`\endif`, `\gset`/`\aset`, `\shell`,
//! `\setshell`, `\startpipeline`/`\syncpipeline`/`\endpipeline`), and its variables by
//! index. The parts: [`lexer`] and [`parser`] (exprparse.y's expression grammar),
//! [`value`] (typed values and pgbench's coercions), [`eval`] (expressions to values),
//! [`prng`] (pgbench's random generator, hashes and permute), [`scan`] (the text cut
//! into SQL and meta-commands) and [`command`] (the script's commands). `workload::executor` runs a script on a session; this
//! module hands it the parsed script and evaluates for it.

pub mod command;
pub mod eval;
pub mod lexer;
pub mod parser;
pub mod prng;
pub mod scan;
pub mod value;

use std::collections::HashMap;

pub use command::{Command, Part, Results, ShellWord, SleepAmount, SqlCommand};
pub use eval::{Slot, Vars};
pub use parser::Expr;
pub use prng::Prng;
pub use value::{EvalError, Value};

/// A script problem found before the run, with its line.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("{script} line {line}: {why}")]
pub struct ScriptError {
    pub script: String,
    pub line: usize,
    pub why: String,
}

/// A parsed script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub name: String,
    pub commands: Vec<Command>,
    /// Each command as written (a SQL command's lines joined by spaces), for the
    /// per-command report.
    pub texts: Vec<String>,
    /// Variable names by index; the automatic ones first ([`AUTOMATIC`]).
    pub variables: Vec<String>,
    /// Index of each variable name.
    pub index: HashMap<String, usize>,
    /// Values given on the command line (`-D NAME=VALUE`), as written, by variable
    /// index: each client starts with them after the automatic variables, so `-D
    /// scale=N` wins.
    pub defined: Vec<(usize, String)>,
    /// What will fail when it runs, found when the script was read (a variable nothing
    /// sets, an unbalanced pipeline, ...): pgbench finds these only while running, and
    /// connbench runs the script as pgbench does, saying so first.
    pub warnings: Vec<ScriptError>,
    /// Its number among the run's scripts, from 0 (`debug()` says it, as pgbench's does).
    pub number: usize,
    /// The line each command starts on, for messages.
    pub lines: Vec<usize>,
    /// Errors after which a client goes on even without --continue-on-error, by
    /// SQLSTATE (PostgreSQL) or error number (MySQL): the errors sysbench rolls back and
    /// goes on from, for its workloads. Empty for pgbench's scripts and files.
    pub goes_on_after: &'static [&'static str],
}

/// The variables every client has before the script runs, at these indices.
pub const AUTOMATIC: [&str; 4] = ["scale", "client_id", "random_seed", "default_seed"];
pub const VAR_SCALE: usize = 0;
pub const VAR_CLIENT_ID: usize = 1;
pub const VAR_RANDOM_SEED: usize = 2;
pub const VAR_DEFAULT_SEED: usize = 3;

impl Script {
    /// Names the script's prepared statements after its number among the run's scripts
    /// (`connbench_S_C`, as pgbench's `PS_C`): a client prepares every script's
    /// statements on its one connection, so names by command alone would collide (the
    /// first SQL command of each script preparing the same name).
    pub fn number_statements(&mut self, script: usize) {
        self.number = script;
        for (at, c) in self.commands.iter_mut().enumerate() {
            if let Command::Sql(q) = c {
                q.statement_name = format!("connbench_{script}_{at}");
            }
        }
    }

    /// Parses a script in pgbench's syntax.
    pub fn parse(name: &str, text: &str) -> Result<Script, ScriptError> {
        Script::parse_with::<String>(name, text, &[])
    }

    /// Parses a script with variables given values beforehand (`-D NAME=VALUE`); a
    /// value is kept as written and read as pgbench reads it (an integer, a double, a
    /// boolean, NULL, or text for SQL).
    pub fn parse_with<V: std::fmt::Display>(
        name: &str,
        text: &str,
        defines: &[(String, V)],
    ) -> Result<Script, ScriptError> {
        let mut all = Script::parse_many(&[(name, text)], defines)?;
        Ok(all.remove(0))
    }

    /// Parses a run's scripts (name, text) with one set of variables among them, as a
    /// pgbench client's scripts share its variables: what one sets, another reads.
    pub fn parse_many<V: std::fmt::Display>(
        scripts: &[(&str, &str)],
        defines: &[(String, V)],
    ) -> Result<Vec<Script>, ScriptError> {
        let defines: Vec<(String, String)> =
            defines.iter().map(|(n, v)| (n.clone(), v.to_string())).collect();
        command::parse_many(scripts, &defines)
    }

    /// How many SQL commands a transaction runs.
    pub fn statements(&self) -> usize {
        self.commands
            .iter()
            .filter(|c| matches!(c, Command::Sql(_)))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_scripts_prepare_statements_of_their_own() {
        // Two scripts whose first command is SQL: on one connection their statements
        // must not share a name (pgbench's TAP "custom scripts" case, -M prepared).
        let mut a = Script::parse("a", "SELECT 1;\n").unwrap();
        let mut b = Script::parse("b", "BEGIN;\nSELECT :scale;\nEND;\n").unwrap();
        a.number_statements(0);
        b.number_statements(1);
        let names = |s: &Script| -> Vec<String> {
            s.commands
                .iter()
                .filter_map(|c| match c {
                    Command::Sql(q) => Some(q.statement_name.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(names(&a), ["connbench_0_0"]);
        assert_eq!(names(&b), ["connbench_1_0", "connbench_1_1", "connbench_1_2"]);
    }

    fn err(text: &str) -> String {
        Script::parse("f.sql", text).unwrap_err().to_string()
    }

    #[test]
    fn builtin_shaped_scripts_parse() {
        let s = Script::parse(
            "t",
            "\\set aid random(1, 100000 * :scale)\nBEGIN;\nUPDATE a SET b = b + :aid WHERE aid = :aid;\nEND;\n",
        )
        .unwrap();
        assert_eq!(s.statements(), 3);
        let Command::Sql(q) = &s.commands[2] else { panic!() };
        assert_eq!(q.placeholder_sql, "UPDATE a SET b = b + $1 WHERE aid = $1;");
        assert_eq!(q.params, vec![s.index["aid"]]);
        assert_eq!(s.variables[..4], AUTOMATIC.map(String::from));
    }

    #[test]
    fn sql_keeps_casts_and_unknown_colons_and_spans_lines() {
        let s = Script::parse("t", "\\set id 5\nSELECT :id::text,\n  ':notavar' AS x\n  ;\n").unwrap();
        let Command::Sql(q) = &s.commands[1] else { panic!() };
        assert_eq!(q.placeholder_sql, "SELECT $1::text,\n  ':notavar' AS x\n  ;");
        assert_eq!(q.parts[1], Part::Var(s.index["id"]));
    }

    #[test]
    fn gset_and_aset_attach_to_the_query_and_make_its_names_variables() {
        let s = Script::parse(
            "t",
            "SELECT 1 AS a \\gset p_\n\\set x :p_a + 1\nSELECT 1 \\; SELECT 2 AS b \\aset\nSELECT :b, :p_zz, :other;\n",
        )
        .unwrap();
        assert_eq!(s.commands.len(), 4);
        let Command::Sql(q) = &s.commands[0] else { panic!() };
        assert_eq!(q.results, Results::Gset("p_".into()));
        let Command::Sql(q) = &s.commands[2] else { panic!() };
        assert_eq!(
            (q.results.clone(), q.statements),
            (Results::Aset(String::new()), 2)
        );
        assert_eq!(s.texts[2], "SELECT 1 ; SELECT 2 AS b \\aset");
        // \aset with no prefix may set any name, so every :name is a variable.
        let Command::Sql(q) = &s.commands[3] else { panic!() };
        assert_eq!(q.params.len(), 3);
    }

    #[test]
    fn conditionals_link_their_branches() {
        let s = Script::parse(
            "t",
            "\\if :scale = 1\nSELECT 1;\n\\elif false\n\\if true\n\\endif\n\\else\nSELECT 2;\n\\endif\n",
        )
        .unwrap();
        assert!(matches!(s.commands[0], Command::If { next: 2, .. }));
        assert!(matches!(s.commands[2], Command::Elif { next: 5, end: 7, .. }));
        assert!(matches!(s.commands[3], Command::If { next: 4, .. }));
        assert!(matches!(s.commands[5], Command::Else { end: 7 }));
    }

    #[test]
    fn sleep_takes_units_with_or_without_a_space() {
        let s = Script::parse(
            "t",
            "\\sleep 2ms\n\\sleep 20 us\n\\sleep 1\n\\set n 3\n\\sleep :n MS\n\\sleep -1 s\n",
        )
        .unwrap();
        let sleeps: Vec<_> = s
            .commands
            .iter()
            .filter_map(|c| match c {
                Command::Sleep { amount, unit_us } => Some((*amount, *unit_us)),
                _ => None,
            })
            .collect();
        assert_eq!(
            sleeps,
            vec![
                (SleepAmount::Literal(2), 1_000),
                (SleepAmount::Literal(20), 1),
                (SleepAmount::Literal(1), 1_000_000),
                (SleepAmount::Var(s.index["n"]), 1_000),
                (SleepAmount::Literal(-1), 1_000_000),
            ]
        );
    }

    #[test]
    fn defines_are_variables_kept_as_written() {
        let s = Script::parse_with(
            "t",
            "\\set x :d + 1\nSELECT :name;\n",
            &[("d".to_string(), "2.5"), ("name".to_string(), "hello")],
        )
        .unwrap();
        assert_eq!(
            s.defined,
            vec![
                (s.index["d"], "2.5".to_string()),
                (s.index["name"], "hello".to_string())
            ]
        );
        let s = Script::parse_with("t", "\\set x :n\n", &[("n".to_string(), 7i64)]).unwrap();
        assert_eq!(s.defined[0].1, "7");
    }

    #[test]
    fn script_errors_name_line_and_fix() {
        for (text, want) in [
            ("\\gset\n", "f.sql line 1: \\gset must follow an SQL command"),
            (
                "SELECT 1 \\gset a b\n",
                "f.sql line 1: \\gset: too many arguments",
            ),
            (
                "SELECT 1 \\gset\n\\aset\n",
                "f.sql line 2: \\aset must follow an SQL command",
            ),
            (
                "\\set x foo(1)\n",
                "f.sql line 1: \\set: unknown function \"foo\"",
            ),
            ("\\set x random(1)\n", "random() takes 2 arguments, not 1"),
            ("\\set x 1 +\n", "f.sql line 1: \\set: the expression ends"),
            ("\\set\n", "\\set needs a variable and an expression"),
            ("\\set x\n", "\\set x needs an expression"),
            (
                "\\sleep 5 hours\n",
                "unrecognized time unit \"hours\", must be us, ms or s",
            ),
            ("\\sleep\n", "\\sleep: missing argument"),
            ("\\sleep 1 2 3\n", "\\sleep: too many arguments"),
            ("\\sleep abc\n", "invalid sleep time \"abc\", must be an integer"),
            ("\\foo\n", "f.sql line 1: invalid command \\foo; pgbench's are"),
            (
                "\\if true\nSELECT 1;\n",
                "f.sql line 1: \\if without matching \\endif",
            ),
            ("\n\\endif\n", "f.sql line 2: \\endif without matching \\if"),
            ("\\else\n", "\\else without matching \\if"),
            ("\\elif true\n", "\\elif without matching \\if"),
            (
                "\\if true\n\\else\n\\else\n\\endif\n",
                "f.sql line 3: \\else after \\else",
            ),
            (
                "\\if true\n\\else\n\\elif false\n\\endif\n",
                "f.sql line 3: \\elif after \\else",
            ),
            ("\\if\n\\endif\n", "\\if needs a condition"),
            ("\\if true\n\\else x\n\\endif\n", "\\else takes no arguments"),
            ("\\shell\n", "\\shell needs a command"),
            ("\\setshell v\n", "\\setshell needs a variable and a command"),
            (
                format!("\\shell echo{}\n", " a".repeat(256)).as_str(),
                "too many arguments in command \"shell\": 257 words",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn what_pgbench_finds_only_while_running_is_a_warning_and_runs() {
        // pgbench reads these scripts and aborts the client when it gets there; so
        // does connbench, and says so before the run.
        for (text, want) in [
            (
                "\\set x :nope + 1\n",
                "f.sql line 1: \\set: variable :nope is never set, so the command fails when it runs",
            ),
            ("\\sleep :nope\n", "\\sleep: variable :nope is never set"),
            ("\\shell echo :nope\n", "\\shell: variable :nope is never set"),
            ("\\set 1x 1\n", "invalid variable name \"1x\""),
            ("\\setshell . echo 1\n", "\\setshell: invalid variable name \".\""),
            (
                "\\startpipeline\nSELECT 1;\n",
                "script ends with the pipeline open",
            ),
            ("\\endpipeline\n", "\\endpipeline: not in pipeline mode"),
            ("\\syncpipeline\n", "\\syncpipeline: not in pipeline mode"),
            ("\\startpipeline\n\\startpipeline\n", "already in pipeline mode"),
            (
                "\\startpipeline\nSELECT 1 \\gset\n\\endpipeline\n",
                "not allowed in pipeline mode",
            ),
        ] {
            let s = Script::parse("f.sql", text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let w: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
            assert!(w.iter().any(|w| w.contains(want)), "{text:?}: {w:?}");
        }
        let invalid = Script::parse("f.sql", "\\set . 1\n").unwrap();
        assert!(matches!(
            &invalid.commands[0],
            Command::Fails {
                key: "invalid-variable-name",
                ..
            }
        ));
        // Every occurrence of a variable is a parameter in pgbench's extended mode.
        let q = Script::parse("f.sql", "\\set i 0\nSELECT :i, :i, '::x', :nope;\n").unwrap();
        let Command::Sql(q) = &q.commands[1] else { panic!() };
        assert_eq!((q.occurrences, q.params.len()), (3, 1));
    }
}
