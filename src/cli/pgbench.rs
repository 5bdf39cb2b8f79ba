//! pgbench's spellings of `load`'s options that connbench's own flags do not already
//! take, flattened into `LoadArgs` so `pgbench OPTIONS DB` reads the same as `connbench
//! load DB OPTIONS`. Each value goes through its parser in `crate::options`; options
//! connbench cannot honour are taken by name only to be refused with the reason
//! ([`PgbenchArgs::refused`]), never silently ignored.

use clap::{Arg, ArgAction, ArgMatches, Args};

use crate::load::log::LogSettings;
use crate::options::{self, Weighted, Workload};
use crate::workload::Builtin;

/// pgbench's options of a run, and its `-i` options, which belong to `connbench init`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "pgbench's options")]
pub struct PgbenchArgs {
    /// Accepted and does nothing: connbench never vacuums before a run (pgbench -n says
    /// not to). Repeatable, as pgbench's getopt takes it (pgbench's own tests pass `-n -v
    /// -n`).
    #[arg(short = 'n', long = "no-vacuum", overrides_with = "no_vacuum")]
    pub no_vacuum: bool,
    /// Accepted, but connbench does not vacuum (pgbench -v vacuums the four tables
    /// first): a note says so; run VACUUM ANALYZE yourself beforehand.
    #[arg(short = 'v', long = "vacuum-all", overrides_with = "vacuum_all")]
    pub vacuum_all: bool,
    /// Print connbench's version and exit, as pgbench -V prints its own.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// Print a built-in script (a prefix names it, as -b) on pgbench's tables, and exit.
    #[arg(long, value_name = "NAME")]
    pub show_script: Option<String>,
    /// Progress lines (-P) say the time as a Unix epoch timestamp, not seconds since the
    /// start.
    #[arg(long, requires = "progress")]
    pub progress_timestamp: bool,
    /// Write each measured transaction to a log file in pgbench 15's format, one file per
    /// worker thread in the current directory (pgbench_log.PID, pgbench_log.PID.1, ...):
    /// client_id transaction_no time script_no time_epoch time_us [schedule_lag]
    /// [retries]; time is the latency in µs, or failed (serialization or deadlock with
    /// --failures-detailed) or skipped; time_epoch time_us is when it ended. Warm-up
    /// transactions are not measured, so not logged, and transaction_no counts from the
    /// measurement's start.
    #[arg(short = 'l', long = "log")]
    pub log: bool,
    /// The log files' prefix, a path: PREFIX.PID, PREFIX.PID.1, ... [default: pgbench_log].
    #[arg(long, value_name = "PREFIX", requires = "log")]
    pub log_prefix: Option<String>,
    /// Log only this fraction of transactions (e.g. 0.01), drawn at random.
    #[arg(long, value_name = "FRACTION", requires = "log", conflicts_with = "aggregate_interval",
          value_parser = options::parse_sampling_rate)]
    pub sampling_rate: Option<f64>,
    /// Log one line per this many seconds instead of one per transaction (-T a multiple
    /// of it), pgbench 15's 15 columns: interval_start num_transactions sum_latency
    /// sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag skipped
    /// retried retries serialization_failures deadlock_failures (µs; 0 where the option
    /// is off). The last, partial interval is written too.
    #[arg(long, value_name = "SECONDS", requires = "log", value_parser = options::parse_aggregate_interval)]
    pub aggregate_interval: Option<u64>,
    /// Try a transaction that failed with a serialization failure (40001) or a deadlock
    /// (40P01) up to this many times in all, with the same random values; 0 is no limit,
    /// allowed with -T or -L only.
    #[arg(long, value_name = "NUM", default_value = "1", allow_hyphen_values = true,
          value_parser = options::parse_max_tries)]
    pub max_tries: u32,
    /// Report failures by type (serialization, deadlock, other) in the text report and
    /// the log (they are always in --json).
    #[arg(long)]
    pub failures_detailed: bool,
    /// Print every failed try's error on stderr as it happens, not only the first.
    #[arg(long)]
    pub verbose_errors: bool,

    /// Stop every client when one aborts, as pgbench 16's --exit-on-abort does; the report
    /// covers what ran until then, and connbench exits 1. Without it the other clients run
    /// on.
    #[arg(long)]
    pub exit_on_abort: bool,
    /// Count an SQL error's transaction failed (by SQLSTATE) and go on, as pgbench 19's
    /// --continue-on-error does. Without it the error aborts its client, as in pgbench. A
    /// serialization failure or deadlock never aborts (see --max-tries), a script's own
    /// error (\set, \gset, \shell, a pipeline out of turn) always does, and a lost
    /// connection is counted and the client reconnects.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Trace every command each client runs on stderr, as pgbench -d does: "client N
    /// executing script", "executing \set ...", "sending SQL" (simple mode: as sent,
    /// variables substituted; extended: the $n form; prepared: the statement's name) and
    /// "receiving". Slow: for finding what a script does, not for measuring.
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,
    /// Refused: pgbench -i is `connbench init`.
    #[arg(short = 'i', long = "initialize", hide = true)]
    pub initialize: bool,
    #[arg(short = 'I', long = "init-steps", hide = true)]
    pub init_steps: Option<String>,
    #[arg(short = 'F', long = "fillfactor", hide = true)]
    pub fillfactor: Option<String>,
    #[arg(short = 'q', long = "quiet", hide = true)]
    pub quiet: bool,
    #[arg(long, hide = true)]
    pub foreign_keys: bool,
    #[arg(long, hide = true)]
    pub index_tablespace: Option<String>,
    #[arg(long, hide = true)]
    pub partition_method: Option<String>,
    #[arg(long, hide = true, allow_hyphen_values = true)]
    pub partitions: Option<String>,
    #[arg(long, hide = true)]
    pub tablespace: Option<String>,
    #[arg(long, hide = true)]
    pub unlogged_tables: bool,
    /// The server's host name or socket directory, over the target's (pgbench's -h; help
    /// is --help or -?).
    #[arg(short = 'h', long = "host", value_name = "HOST")]
    pub host: Option<String>,
    /// The server's port, over the target's.
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port: Option<String>,
    /// The user to connect as, over the target's.
    #[arg(short = 'U', long = "username", value_name = "USER")]
    pub username: Option<String>,
}

impl PgbenchArgs {
    /// The transaction log's settings, with -l.
    pub fn log(&self) -> Option<LogSettings> {
        self.log.then(|| LogSettings {
            prefix: self
                .log_prefix
                .clone()
                .unwrap_or_else(|| LogSettings::DEFAULT_PREFIX.to_string()),
            sampling_rate: self.sampling_rate,
            aggregate_interval_s: self.aggregate_interval,
            failures_detailed: self.failures_detailed,
        })
    }

    /// The target's keys -h, -p and -U give, in libpq's names; they override the
    /// target's own, as the options of pgbench's command line do its PG* variables.
    pub fn target_keys(&self) -> Vec<(&'static str, String)> {
        [
            ("host", &self.host),
            ("port", &self.port),
            ("user", &self.username),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }

    /// The first option given that connbench cannot honour: its name and why.
    pub fn refused(&self) -> Option<(&'static str, &'static str)> {
        let init = "is an option of pgbench -i; connbench's tables are made by `connbench init` \
                    (see `connbench init --help`), and `load` runs on them or on pgbench -i's";
        let given = [
            (
                self.initialize,
                "-i/--initialize",
                "connbench's `load` never creates tables: run `connbench init \
              TARGET -s N` (or pgbench -i) first",
            ),
            (self.init_steps.is_some(), "-I/--init-steps", init),
            (self.fillfactor.is_some(), "-F/--fillfactor", init),
            (self.quiet, "-q/--quiet", init),
            (self.foreign_keys, "--foreign-keys", init),
            (self.index_tablespace.is_some(), "--index-tablespace", init),
            (self.partition_method.is_some(), "--partition-method", init),
            (self.partitions.is_some(), "--partitions", init),
            (self.tablespace.is_some(), "--tablespace", init),
            (self.unlogged_tables, "--unlogged-tables", init),
        ];
        given
            .into_iter()
            .find(|(on, ..)| *on)
            .map(|(_, name, why)| (name, why))
    }
}

/// The scripts a run mixes, in the order given, as pgbench numbers them: `-b NAME[@W]`,
/// `-f FILE[@W]`, `-S` (select-only) and `-N` (simple-update), each repeatable. Parsed by
/// hand from clap's matches because the order across the four flags is pgbench's script
/// number (the log's `script_no`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptArgs {
    /// The scripts in command-line order; empty: tpcb-like.
    pub scripts: Vec<Weighted>,
    /// `-b list`: print the built-in scripts and exit.
    pub list: bool,
}

/// One `-b` value: a script, or `list`.
#[derive(Debug, Clone, PartialEq)]
enum BuiltinArg {
    Script(Weighted),
    List,
}

fn parse_builtin_arg(v: &str) -> Result<BuiltinArg, String> {
    if v == "list" {
        return Ok(BuiltinArg::List);
    }
    options::parse_builtin_weighted(v).map(BuiltinArg::Script)
}

impl clap::FromArgMatches for ScriptArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut found: Vec<(usize, Option<Weighted>)> = Vec::new();
        if let (Some(values), Some(at)) = (m.get_many::<BuiltinArg>("builtin"), m.indices_of("builtin")) {
            found.extend(at.zip(values.map(|b| match b {
                BuiltinArg::Script(w) => Some(w.clone()),
                BuiltinArg::List => None,
            })));
        }
        if let (Some(values), Some(at)) = (m.get_many::<Weighted>("file"), m.indices_of("file")) {
            found.extend(at.zip(values.cloned().map(Some)));
        }
        for (id, b) in [
            ("select_only", Builtin::SelectOnly),
            ("skip_some_updates", Builtin::SimpleUpdate),
        ] {
            // Appended, not counted: a counted flag has one index however often it is
            // given, and each -S is a script of its own in its own place.
            if m.contains_id(id) {
                if let Some(at) = m.indices_of(id) {
                    found.extend(at.map(|i| {
                        (
                            i,
                            Some(Weighted {
                                workload: Workload::Builtin(b),
                                weight: 1,
                            }),
                        )
                    }));
                }
            }
        }
        found.sort_by_key(|(i, _)| *i);
        Ok(ScriptArgs {
            list: found.iter().any(|(_, w)| w.is_none()),
            scripts: found.into_iter().filter_map(|(_, w)| w).collect(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = ScriptArgs::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for ScriptArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.next_help_heading("Scripts (pgbench's: several are drawn by weight per transaction)")
            .arg(
                Arg::new("builtin")
                    .short('b')
                    .long("builtin")
                    .value_name("NAME[@W]")
                    .action(ArgAction::Append)
                    .value_parser(parse_builtin_arg)
                    .help(
                        "A built-in script, weighted W (default 1): tpcb-like, simple-update, select-only, \
                         connect-only, or a prefix of one (-b se); -b list lists them",
                    ),
            )
            .arg(
                Arg::new("file")
                    .short('f')
                    .long("file")
                    .value_name("FILE[@W]")
                    .action(ArgAction::Append)
                    .value_parser(options::parse_file_weighted)
                    .help(
                        "A script in pgbench's syntax, weighted W (default 1): SQL, \\set NAME EXPR with \
                         random(lo, hi) and random_exponential, random_gaussian or random_zipfian(lo, hi, \
                         parameter), \\sleep N [us|ms|s]",
                    ),
            )
            .arg(
                Arg::new("select_only")
                    .short('S')
                    .long("select-only")
                    .action(ArgAction::Append)
                    .num_args(0)
                    .value_parser(clap::value_parser!(bool))
                    .default_missing_value("true")
                    .help("Add select-only (-b select-only)"),
            )
            .arg(
                Arg::new("skip_some_updates")
                    .short('N')
                    .long("skip-some-updates")
                    .action(ArgAction::Append)
                    .num_args(0)
                    .value_parser(clap::value_parser!(bool))
                    .default_missing_value("true")
                    .help("Add simple-update: tpcb-like without the tellers' and branches' updates (-b simple-update)"),
            )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        ScriptArgs::augment_args(cmd)
    }
}
