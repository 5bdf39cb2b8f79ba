//! The executor: runs a parsed script ([`crate::script`]) on a [`Session`].
//!
//! [`Executor::run`] runs one transaction: it evaluates meta-commands with the client's
//! variables and random generator, and sends each SQL command as libpq would in the
//! chosen [`QueryMode`]: values spliced into the text (simple), or `$n` placeholders
//! with text parameters (extended, prepared). It keeps the rows `\gset`/`\aset` store,
//! hands `\shell`/`\setshell` to `super::shell`, and sends a pipeline's statements
//! without waiting for their answers. The executor is engine-neutral: it holds a
//! `proto::Session` and never branches on the engine (a MySQL session refuses
//! pipelines itself).
//!
//! The hot path (the built-in scripts) allocates nothing per transaction: expressions
//! evaluate on the stack, and SQL text and parameters are written into buffers the
//! executor keeps.

use std::time::{Duration, Instant};

use super::shell;
use super::QueryMode;
use crate::proto::{ConnectError, ErrorKind, Phase, ResultSet, TransactionStatus};
use crate::proto::{Session, Statement};
use crate::rng::Rng;
use crate::script::command::atoi;
use crate::script::eval::eval;
use crate::script::{
    Command, EvalError, Part, Prng, Results, Script, ShellWord, SleepAmount, SqlCommand, Value, Vars,
};
use crate::script::{VAR_CLIENT_ID, VAR_DEFAULT_SEED, VAR_RANDOM_SEED, VAR_SCALE};

/// Who a client is, for its automatic variables and its random generators.
#[derive(Debug, Clone, Copy)]
pub struct ClientSeat {
    /// The dataset's scale (`:scale`).
    pub scale: i64,
    /// This client's id across the whole run (`:client_id`).
    pub client_id: usize,
    /// How many clients the run has in all: pgbench draws `:default_seed` after one
    /// seed per client.
    pub clients: usize,
    /// The run's seed (`--random-seed`, `:random_seed`).
    pub run_seed: u64,
}

/// What each command of one run of the script took (`-r`): `ns[i]` nanoseconds for
/// each command that ran ([`CommandTimes::SKIPPED`] for one a branch skipped), the
/// commands before `reached` considered; `failed` is the one that failed. Kept on the
/// executor and overwritten run by run, so timing allocates nothing; the client hands a
/// measured transaction's times to its worker's measurements.
#[derive(Debug, Clone, Default)]
pub struct CommandTimes {
    pub ns: Vec<u64>,
    pub reached: usize,
    pub failed: Option<usize>,
}

impl CommandTimes {
    /// The time of a command that did not run in this transaction.
    pub const SKIPPED: u64 = u64::MAX;
}

/// Why a transaction failed: the statement and the error.
#[derive(Debug)]
pub struct StepError {
    pub error: ConnectError,
    /// The command (as written) that failed.
    pub statement: Option<String>,
}

/// A client's variables, random generators and reusable buffers for one script.
#[derive(Debug)]
pub struct Executor {
    vars: Vars,
    prng: Prng,
    sql: String,
    params: Vec<String>,
    results: Vec<ResultSet>,
    client_id: usize,
    /// Whether the current connection has the script's statements prepared.
    pub prepared: bool,
    /// Which pooled connection the statements were prepared on.
    pub connection: u64,
    /// `load`'s generator for this client (arrival gaps under -R).
    pub rng: Rng,
    /// With `-r`: what each command of the last run took.
    pub times: Option<CommandTimes>,
    /// Set when the client must stop, as pgbench aborts a client: why. The
    /// transaction that ended so still counts (pgbench counts it too).
    pub aborted: Option<String>,
    /// pgbench's -d: trace each command on stderr.
    pub debug: bool,
}

/// A failure before or after a command of the script; `at` is its index.
struct Failure {
    at: usize,
    error: ConnectError,
}

fn script_error(key: &'static str, message: String) -> ConnectError {
    ConnectError::new(Phase::Query, ErrorKind::Script { key, message })
}

impl Executor {
    pub fn new(script: &Script, seat: ClientSeat) -> Executor {
        let mut vars = Vars::new(script.variables.len());
        vars.set(VAR_SCALE, Value::Int(seat.scale));
        vars.set(VAR_CLIENT_ID, Value::Int(seat.client_id as i64));
        vars.set(VAR_RANDOM_SEED, Value::Int(seat.run_seed as i64));
        vars.set(
            VAR_DEFAULT_SEED,
            Value::Int(Prng::default_seed(seat.run_seed, seat.clients)),
        );
        for (var, text) in &script.defined {
            // A define that is an integer as written is stored as one: it reads and
            // substitutes the same, and the hot path need not parse it each time.
            match text.parse::<i64>() {
                Ok(i) if i.to_string() == *text => vars.set(*var, Value::Int(i)),
                _ => vars.set_text(*var, text),
            }
        }
        let mixed = (seat.client_id as u64 + 1).wrapping_mul(0x5851_F42D_4C95_7F2D) ^ seat.run_seed;
        Executor {
            vars,
            prng: Prng::for_client(seat.run_seed, seat.client_id),
            sql: String::with_capacity(256),
            params: vec![String::new(); 8],
            results: Vec::new(),
            client_id: seat.client_id,
            prepared: false,
            connection: u64::MAX,
            rng: Rng::new(mixed),
            times: None,
            aborted: None,
            debug: false,
        }
    }

    /// The script's random state (the generator its random functions draw from), so a
    /// retried transaction can draw the same values again.
    pub fn random_state(&self) -> Prng {
        self.prng.clone()
    }

    /// Swaps the client's variables and random state with `other`'s: the client hands
    /// them to the executor of the next script, as a pgbench client's scripts share them.
    pub fn hand_over(&mut self, other: &mut Executor) {
        std::mem::swap(&mut self.vars, &mut other.vars);
        std::mem::swap(&mut self.prng, &mut other.prng);
    }

    /// Puts back a state [`Executor::random_state`] returned.
    pub fn restore_random_state(&mut self, state: Prng) {
        self.prng = state;
    }

    /// Times every command of each run from now on (`-r`).
    pub fn time_commands(&mut self, script: &Script) {
        self.times = Some(CommandTimes {
            ns: vec![CommandTimes::SKIPPED; script.commands.len()],
            reached: 0,
            failed: None,
        });
    }

    /// A variable's value, for tests and callers that inspect a client.
    pub fn value(&self, var: usize) -> Result<Value, EvalError> {
        self.vars.get(var)
    }

    /// Evaluates an expression as command `at` (1-based in `debug()` output).
    fn evaluate(
        &mut self,
        script: &Script,
        e: &crate::script::Expr,
        at: usize,
    ) -> Result<Value, ConnectError> {
        let mut debug = |v: Value| debug_line(script, at, v);
        eval(e, &self.vars, &mut self.prng, &mut debug).map_err(|err| self.eval_failure(script, at, err))
    }

    fn eval_failure(&self, script: &Script, at: usize, err: EvalError) -> ConnectError {
        let message = err.message(&script.variables, |i| self.vars.text(i));
        script_error(
            err.key(),
            format!("command {} ({}): {message}", at + 1, script.texts[at]),
        )
    }

    /// Runs the script once on `session`. On a failure inside a transaction block the
    /// block is rolled back, so the session stays usable for the next transaction.
    pub async fn run(
        &mut self,
        script: &Script,
        mode: QueryMode,
        session: &mut Session,
    ) -> Result<(), StepError> {
        if let Some(t) = &mut self.times {
            t.ns.fill(CommandTimes::SKIPPED);
            t.reached = script.commands.len();
            t.failed = None;
        }
        if self.debug {
            eprintln!(
                "debug: client {} executing script \"{}\"",
                self.client_id, script.name
            );
        }
        match self.run_commands(script, mode, session).await {
            Ok(()) => {
                if session.transaction_status() != TransactionStatus::Idle {
                    // pgbench: "client N aborted: end of script reached without
                    // completing the last transaction". The block is rolled back so a
                    // pooled connection goes back clean.
                    self.aborted = Some(format!(
                        "client {} aborted: end of script reached without completing the last transaction; \
                         end the script's transaction with COMMIT or ROLLBACK",
                        self.client_id
                    ));
                    let _ = session.execute(Statement::Simple("ROLLBACK"), &[]).await;
                }
                Ok(())
            }
            Err(Failure { at, error }) => {
                if let Some(t) = &mut self.times {
                    t.failed = Some(at);
                }
                session.pipeline_abandon();
                if !session.is_broken() && session.transaction_status() != TransactionStatus::Idle {
                    // Best effort: a broken connection will show on the next use.
                    let _ = session.execute(Statement::Simple("ROLLBACK"), &[]).await;
                }
                Err(StepError {
                    error,
                    statement: script.texts.get(at).cloned(),
                })
            }
        }
    }

    /// A statement inside a pipeline: bound and sent, its answer read at the sync.
    fn pipeline_send(
        &mut self,
        script: &Script,
        q: &SqlCommand,
        mode: QueryMode,
        session: &mut Session,
        at: usize,
    ) -> Result<(), ConnectError> {
        if q.results != Results::Discard {
            return Err(self.abort(script, at, "\\gset and \\aset are not allowed in pipeline mode"));
        }
        let (bound, n) = self.bind(script, q, mode, at)?;
        self.trace_sending(q, bound, n);
        let stmt = bound;
        let refs: [&str; 16] = std::array::from_fn(|i| {
            if i < n.min(16) {
                self.params[i].as_str()
            } else {
                ""
            }
        });
        if n <= 16 {
            session.pipeline_send(stmt.get(&self.sql, q), &refs[..n])
        } else {
            let v: Vec<&str> = self.params[..n].iter().map(String::as_str).collect();
            session.pipeline_send(stmt.get(&self.sql, q), &v)
        }
    }

    /// `\startpipeline`: refused in the simple protocol and inside a pipeline.
    fn start_pipeline(
        &mut self,
        script: &Script,
        mode: QueryMode,
        in_pipeline: bool,
        at: usize,
    ) -> Result<(), ConnectError> {
        if mode == QueryMode::Simple {
            return Err(self.abort(
                script,
                at,
                "cannot use pipeline mode with the simple query protocol; run with -M extended or \
                 -M prepared",
            ));
        }
        if in_pipeline {
            return Err(self.abort(script, at, "already in pipeline mode"));
        }
        Ok(())
    }

    async fn run_commands(
        &mut self,
        script: &Script,
        mode: QueryMode,
        session: &mut Session,
    ) -> Result<(), Failure> {
        if mode == QueryMode::Prepared && !self.prepared {
            // Every statement is prepared once per connection even when one fails (as
            // pgbench does): preparing again would only add "already exists" errors.
            let mut first = None;
            for (at, c) in script.commands.iter().enumerate() {
                if let Command::Sql(q) = c {
                    if let Err(error) = session.prepare(&q.statement_name, &q.placeholder_sql).await {
                        if session.is_broken() {
                            return Err(Failure { at, error });
                        }
                        first.get_or_insert(Failure { at, error });
                    }
                }
            }
            self.prepared = true;
            if let Some(f) = first {
                return Err(f);
            }
        }
        let mut in_pipeline = false;
        let mut pc = 0;
        while let Some(c) = script.commands.get(pc) {
            // Two clock reads per command, only under -r (pgbench's -r costs the same).
            let started = self.times.is_some().then(Instant::now);
            let at = pc;
            let fail = |error| Failure { at, error };
            pc += 1;
            if self.debug && !matches!(c, Command::Sql(_)) {
                eprintln!("debug: client {} executing {}", self.client_id, script.texts[at]);
            }
            match c {
                Command::Set { var, expr } => {
                    // Matched here rather than through `evaluate`: the small result of
                    // `eval` stays small on the hot path, and the error is built only
                    // when there is one.
                    let mut debug = |v: Value| debug_line(script, at, v);
                    match eval(expr, &self.vars, &mut self.prng, &mut debug) {
                        Ok(v) => self.vars.set(*var, v),
                        Err(e) => return Err(fail(self.eval_failure(script, at, e))),
                    }
                }
                Command::Sleep { amount, unit_us } => {
                    let n = self.sleep_amount(script, *amount, at).map_err(fail)?;
                    let us = n.saturating_mul(*unit_us);
                    if us > 0 {
                        tokio::time::sleep(Duration::from_micros(us as u64)).await;
                    }
                }
                Command::If { cond, next } => {
                    if !self.evaluate(script, cond, at).map_err(fail)?.truth() {
                        pc = self
                            .false_branch(script, *next)
                            .map_err(|(at, error)| Failure { at, error })?;
                    }
                }
                // Reached by running off the end of a branch that ran: leave the block.
                Command::Elif { end, .. } | Command::Else { end } => pc = end + 1,
                Command::Endif => {}
                Command::Sql(q) if in_pipeline => {
                    self.pipeline_send(script, q, mode, session, at).map_err(fail)?
                }
                Command::Sql(q) => self.statement(script, q, mode, session, at).await.map_err(fail)?,
                // Boxed: a rare command whose future would otherwise enlarge every
                // transaction's.
                Command::Shell { var, words } => Box::pin(self.shell(script, *var, words, at))
                    .await
                    .map_err(fail)?,
                Command::StartPipeline => {
                    self.start_pipeline(script, mode, in_pipeline, at).map_err(fail)?;
                    in_pipeline = true;
                }
                Command::SyncPipeline | Command::EndPipeline if !in_pipeline => {
                    return Err(fail(self.abort(script, at, "not in pipeline mode")));
                }
                Command::SyncPipeline => session.pipeline_sync().map_err(fail)?,
                Command::RandString { var, template } => {
                    // Written into the slot's own string, so the hot path allocates
                    // nothing after the first transaction.
                    let mut text = self.vars.take_text(*var);
                    self.prng.sysbench_string(template, &mut text);
                    self.vars.put_text(*var, text);
                }
                Command::EndPipeline => {
                    in_pipeline = false;
                    Box::pin(session.pipeline_end()).await.map_err(fail)?;
                }
                Command::Fails { key, why } => {
                    return Err(fail(script_error(
                        key,
                        format!("command {} ({}): {why}", at + 1, script.texts[at]),
                    )))
                }
            }
            if let (Some(t), Some(started)) = (&mut self.times, started) {
                t.ns[at] = (started.elapsed().as_nanos() as u64).min(CommandTimes::SKIPPED - 1);
            }
        }
        if in_pipeline {
            let last = script.commands.len() - 1;
            return Err(Failure {
                at: last,
                error: self.abort(script, last, "end of script reached with pipeline open"),
            });
        }
        Ok(())
    }

    /// -d: what a SQL command sends, as pgbench's debug trace says it (the parameters
    /// too, which pgbench leaves out), and that the client now waits for its results.
    fn trace_sending(&self, q: &SqlCommand, bound: Bound, n: usize) {
        if !self.debug {
            return;
        }
        let id = self.client_id;
        match bound {
            Bound::Simple => eprintln!("debug: client {id} sending {}", self.sql),
            Bound::Extended => eprintln!(
                "debug: client {id} sending {} with parameters {:?}",
                q.placeholder_sql,
                &self.params[..n]
            ),
            Bound::Prepared => eprintln!(
                "debug: client {id} sending {} with parameters {:?}",
                q.statement_name,
                &self.params[..n]
            ),
        }
        eprintln!("debug: client {id} receiving");
    }

    /// A failure pgbench aborts the client for (a pipeline used out of turn): the
    /// client stops after this transaction, and the run says why.
    fn abort(&mut self, script: &Script, at: usize, why: &str) -> ConnectError {
        self.aborted = Some(format!(
            "client {} aborted in command {} ({}) of script {}: {why}",
            self.client_id,
            at + 1,
            script.texts[at],
            script.name
        ));
        script_error(
            "pipeline",
            format!("command {} ({}): {why}", at + 1, script.texts[at]),
        )
    }

    /// Where a false `\if` (or `\elif`) goes: the first `\elif` whose condition holds
    /// runs its branch, else the `\else` branch, else past the `\endif`.
    fn false_branch(&mut self, script: &Script, mut at: usize) -> Result<usize, (usize, ConnectError)> {
        loop {
            match &script.commands[at] {
                Command::Elif { cond, next, .. } => {
                    if self.evaluate(script, cond, at).map_err(|e| (at, e))?.truth() {
                        return Ok(at + 1);
                    }
                    at = *next;
                }
                _ => return Ok(at + 1),
            }
        }
    }

    /// `\sleep`'s amount, as pgbench reads it: a literal, or a variable's text through
    /// C's atoi (so 2.5 sleeps 2), which must start with a digit.
    fn sleep_amount(&self, script: &Script, amount: SleepAmount, at: usize) -> Result<i64, ConnectError> {
        match amount {
            SleepAmount::Literal(n) => Ok(n),
            SleepAmount::Var(v) => {
                let mut text = String::new();
                if !self.vars.push_sql(v, &mut text) {
                    return Err(self.eval_failure(script, at, EvalError::Undefined(v)));
                }
                atoi(&text).ok_or_else(|| {
                    script_error(
                        "sleep",
                        format!(
                            "command {} ({}): invalid sleep time \"{text}\" for variable \"{}\"; it must be an integer",
                            at + 1,
                            script.texts[at],
                            script.variables[v]
                        ),
                    )
                })
            }
        }
    }

    /// Writes the command's SQL (simple) or parameters (extended, prepared) into the
    /// executor's buffers; returns which statement to send and how many parameters.
    fn bind(
        &mut self,
        script: &Script,
        q: &SqlCommand,
        mode: QueryMode,
        at: usize,
    ) -> Result<(Bound, usize), ConnectError> {
        match mode {
            QueryMode::Simple => {
                self.sql.clear();
                for part in &q.parts {
                    match part {
                        Part::Text(t) => self.sql.push_str(t),
                        Part::Var(v) => {
                            if !self.vars.push_sql(*v, &mut self.sql) {
                                // pgbench leaves a variable that is not set as written.
                                self.sql.push(':');
                                self.sql.push_str(&script.variables[*v]);
                            }
                        }
                    }
                }
                Ok((Bound::Simple, 0))
            }
            QueryMode::Extended | QueryMode::Prepared => {
                if self.params.len() < q.params.len() {
                    self.params.resize(q.params.len(), String::new());
                }
                for (slot, &v) in self.params.iter_mut().zip(&q.params) {
                    slot.clear();
                    if !self.vars.push_sql(v, slot) {
                        let message = EvalError::Undefined(v).message(&script.variables, |_| None);
                        return Err(script_error(
                            "undefined-variable",
                            format!("command {} ({}): {message}", at + 1, script.texts[at]),
                        ));
                    }
                }
                let b = if mode == QueryMode::Extended {
                    Bound::Extended
                } else {
                    Bound::Prepared
                };
                Ok((b, q.params.len()))
            }
        }
    }

    async fn statement(
        &mut self,
        script: &Script,
        q: &SqlCommand,
        mode: QueryMode,
        session: &mut Session,
        at: usize,
    ) -> Result<(), ConnectError> {
        let (bound, n) = self.bind(script, q, mode, at)?;
        self.trace_sending(q, bound, n);
        let stmt = bound.get(&self.sql, q);
        let keep = q.results != Results::Discard;
        if n <= 16 {
            // No allocation for the common case of a few parameters.
            let refs: [&str; 16] = std::array::from_fn(|i| if i < n { self.params[i].as_str() } else { "" });
            if keep {
                session
                    .execute_results(stmt, &refs[..n], &mut self.results)
                    .await?;
            } else {
                session.execute(stmt, &refs[..n]).await?;
            }
        } else {
            let v: Vec<&str> = self.params[..n].iter().map(String::as_str).collect();
            if keep {
                session.execute_results(stmt, &v, &mut self.results).await?;
            } else {
                session.execute(stmt, &v).await?;
            }
        }
        if keep {
            self.store_results(script, q, at)?;
        }
        Ok(())
    }

    /// `\gset`: the last result must have exactly one row, whose columns become
    /// variables; `\aset`: every result's last row, results without rows skipped. A
    /// NULL is stored as empty text, as pgbench stores it.
    fn store_results(&mut self, script: &Script, q: &SqlCommand, at: usize) -> Result<(), ConnectError> {
        let (prefix, all) = match &q.results {
            Results::Gset(p) => (p.as_str(), false),
            Results::Aset(p) => (p.as_str(), true),
            Results::Discard => return Ok(()),
        };
        let results = std::mem::take(&mut self.results);
        let outcome = (|| {
            if !all {
                let (rows, query) = match results.last() {
                    Some(r) if r.returns_rows => (r.rows, results.len()),
                    _ => (0, results.len()),
                };
                if rows != 1 {
                    return Err(script_error(
                        "gset-rows",
                        format!(
                            "command {} ({}): \\gset expected one row, got {rows} (query {query}); \
                             make the query return exactly one row, e.g. with LIMIT 1",
                            at + 1,
                            script.texts[at]
                        ),
                    ));
                }
            }
            let chosen: &[ResultSet] = if all {
                &results
            } else {
                &results[results.len() - 1..]
            };
            let mut name = String::new();
            for r in chosen.iter().filter(|r| r.returns_rows && r.rows > 0) {
                for (col, value) in r.columns.iter().zip(&r.last_row) {
                    name.clear();
                    name.push_str(prefix);
                    name.push_str(col);
                    if !crate::script::scan::valid_variable_name(&name) {
                        return Err(script_error(
                            "gset-name",
                            format!(
                                "command {} ({}): cannot store column {col:?} in variable {name:?}: not a valid \
                                 variable name; name the column with AS",
                                at + 1,
                                script.texts[at]
                            ),
                        ));
                    }
                    // A name the script never reads needs no storing.
                    if let Some(&var) = script.index.get(&name) {
                        self.vars.set_text(var, value.as_deref().unwrap_or(""));
                    }
                }
            }
            Ok(())
        })();
        self.results = results;
        outcome
    }

    /// `\shell` and `\setshell`, run by `super::shell`: `\setshell` stores the integer the
    /// command printed first; a failure names the command.
    async fn shell(
        &mut self,
        script: &Script,
        var: Option<usize>,
        words: &[ShellWord],
        at: usize,
    ) -> Result<(), ConnectError> {
        let line = shell::command_line(words, &self.vars)
            .map_err(|v| self.eval_failure(script, at, EvalError::Undefined(v)))?;
        match shell::run(&line, var.is_some()).await {
            Ok(printed) => {
                if let (Some(var), Some(v)) = (var, printed) {
                    self.vars.set(var, Value::Int(v));
                }
                Ok(())
            }
            Err(why) => {
                let what = if var.is_some() { "\\setshell" } else { "\\shell" };
                Err(script_error(
                    "shell",
                    format!(
                        "command {} ({}): {what} {line:?}: {why}",
                        at + 1,
                        script.texts[at]
                    ),
                ))
            }
        }
    }
}

/// `debug()`'s line on stderr, in pgbench's form (command numbered from 1).
fn debug_line(script: &Script, at: usize, v: Value) {
    eprintln!(
        "debug(script={},command={}): {}",
        script.number,
        at + 1,
        v.debug_text()
    );
}

/// Which form of a SQL command to send, once [`Executor::bind`] filled the buffers.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Simple,
    Extended,
    Prepared,
}

impl Bound {
    fn get<'a>(self, sql: &'a str, q: &'a SqlCommand) -> Statement<'a> {
        match self {
            Bound::Simple => Statement::Simple(sql),
            Bound::Extended => Statement::Extended(&q.placeholder_sql),
            Bound::Prepared => Statement::Prepared(&q.statement_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(scale: i64) -> ClientSeat {
        ClientSeat {
            scale,
            client_id: 0,
            clients: 1,
            run_seed: 5,
        }
    }

    #[test]
    fn skewed_random_functions_follow_pgbenchs_distributions() {
        let mut rng = Prng::new(42);
        let n = 200_000;
        // Exponential, parameter 2 on [0, 999]: the value / 1000 has density proportional
        // to e^(-2x) on [0, 1), whose mean is 1/2 - e^-2 / (1 - e^-2) = 0.3435.
        let mean = (0..n)
            .map(|_| rng.exponential(0, 999, 2.0) as f64 / 1000.0)
            .sum::<f64>()
            / n as f64;
        assert!((mean - 0.3435).abs() < 0.005, "exponential mean {mean}");
        // Gaussian, parameter 2.5 on [1, 100]: symmetric about the middle, every value
        // in range, and the middle tenth far more frequent than the outer tenths.
        let draws: Vec<i64> = (0..n).map(|_| rng.gaussian(1, 100, 2.5)).collect();
        assert!(draws.iter().all(|v| (1..=100).contains(v)));
        let mean = draws.iter().sum::<i64>() as f64 / n as f64;
        assert!((mean - 50.5).abs() < 0.3, "gaussian mean {mean}");
        let count = |r: std::ops::RangeInclusive<i64>| draws.iter().filter(|v| r.contains(v)).count();
        assert!(
            count(46..=55) > 10 * count(1..=10),
            "{} vs {}",
            count(46..=55),
            count(1..=10)
        );
        // Zipfian, s = 2 on [1, 1000]: P(k) is proportional to 1/k^2, so 1 comes up four
        // times as often as 2, and nine times as often as 3.
        let draws: Vec<i64> = (0..n).map(|_| rng.zipfian(1, 1000, 2.0)).collect();
        assert!(draws.iter().all(|v| (1..=1000).contains(v)));
        let f = |k: i64| draws.iter().filter(|&&v| v == k).count() as f64;
        assert!((f(1) / f(2) - 4.0).abs() < 0.2, "{}", f(1) / f(2));
        assert!((f(1) / f(3) - 9.0).abs() < 0.8, "{}", f(1) / f(3));
    }

    #[test]
    fn automatic_variables_and_defines_start_each_client() {
        let s = Script::parse_with(
            "t",
            "\\set a :scale + :client_id\nSELECT :d, :n;\n",
            &[("d".to_string(), "2.50"), ("n".to_string(), "7")],
        )
        .unwrap();
        let ex = Executor::new(&s, seat(3));
        assert_eq!(ex.value(VAR_SCALE), Ok(Value::Int(3)));
        assert_eq!(ex.value(VAR_RANDOM_SEED), Ok(Value::Int(5)));
        // pgbench 15 printed this :default_seed with --random-seed=5 and one client.
        assert_eq!(ex.value(VAR_DEFAULT_SEED), Ok(Value::Int(-1240385398947155067)));
        assert_eq!(ex.value(s.index["d"]), Ok(Value::Double(2.5)));
        assert_eq!(ex.value(s.index["n"]), Ok(Value::Int(7)));
        let mut sql = String::new();
        ex.vars.push_sql(s.index["d"], &mut sql);
        assert_eq!(sql, "2.50", "a define is substituted as written");
    }

    #[test]
    fn simple_mode_splices_every_type_and_leaves_unset_variables_as_written() {
        let s = Script::parse(
            "t",
            "\\set i 5\n\\set d 0.1 + 0.2\n\\set b 1 < 2\n\\set n NULL\nSELECT :i, :d, :b, :n, :later::text;\n\\set later 1\n",
        )
        .unwrap();
        let mut ex = Executor::new(&s, seat(1));
        for (at, c) in s.commands.iter().enumerate().take(4) {
            if let Command::Set { var, expr } = c {
                let v = ex.evaluate(&s, expr, at).unwrap();
                ex.vars.set(*var, v);
            }
        }
        let Command::Sql(q) = &s.commands[4] else { panic!() };
        ex.bind(&s, q, QueryMode::Simple, 4).unwrap();
        assert_eq!(ex.sql, "SELECT 5, 0.3, true, NULL, :later::text;");
        let e = ex.bind(&s, q, QueryMode::Extended, 4).unwrap_err();
        assert!(e.to_string().contains("undefined variable \"later\""), "{e}");
    }

    #[test]
    fn evaluation_errors_name_the_command() {
        let s = Script::parse("t", "\\set a 9223372036854775807\n\\set b :a + 1\n").unwrap();
        let mut ex = Executor::new(&s, seat(1));
        let Command::Set { expr, .. } = &s.commands[1] else {
            panic!()
        };
        ex.vars.set(s.index["a"], Value::Int(i64::MAX));
        let e = ex.evaluate(&s, expr, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "query: command 2 (\\set b :a + 1): bigint add out of range"
        );
        assert_eq!(e.key(), "query:script-out-of-range");
    }
}
