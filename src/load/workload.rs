//! Workloads: what one transaction does, as a script in pgbench's syntax.
//!
//! A script is parsed once into [`Command`]s: `\set VAR EXPR` (integer arithmetic with
//! `+ - * / %`, parentheses, `:var` references, `random(lo, hi)` and pgbench's skewed
//! `random_exponential`, `random_gaussian` and `random_zipfian(lo, hi, parameter)`),
//! `\sleep N [us|ms|s]`, and SQL commands (which may span lines and end with `;`) that
//! refer to variables as `:name`. Each SQL command is kept in two forms, so every query mode sends what libpq
//! would: values spliced into the text (simple), or `$n` placeholders with text
//! parameters (extended, prepared). The built-in workloads are pgbench's own scripts,
//! pointed at connbench's schema.
//!
//! Engines: the script language is engine-neutral; [`Executor::run`] is where a
//! PostgreSQL session is driven, and a MySQL executor would sit beside it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::proto::ConnectError;
use crate::proto::{Session, Statement};

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
}

impl Builtin {
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::TpcbLike => "tpcb-like",
            Builtin::SimpleUpdate => "simple-update",
            Builtin::SelectOnly => "select-only",
            Builtin::ConnectOnly => "connect-only",
        }
    }

    pub const ALL: [Builtin; 4] = [
        Builtin::TpcbLike,
        Builtin::SimpleUpdate,
        Builtin::SelectOnly,
        Builtin::ConnectOnly,
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
        }
    }

    /// Whether the workload reads connbench's tables (and so needs `connbench init`).
    pub fn needs_tables(self) -> bool {
        self != Builtin::ConnectOnly
    }
}

/// A script problem, with its line.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{script} line {line}: {why}")]
pub struct ScriptError {
    pub script: String,
    pub line: usize,
    pub why: String,
}

/// An integer expression of `\set`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(i64),
    Var(usize),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Random(Box<Expr>, Box<Expr>),
    /// random_exponential, random_gaussian or random_zipfian(lo, hi, parameter): the
    /// parameter is a number written in the script, checked when it is parsed.
    Skewed(Distribution, Box<Expr>, Box<Expr>, f64),
}

/// pgbench's non-uniform random functions, drawn as pgbench draws them (see [`Rng`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Exponential,
    Gaussian,
    Zipfian,
}

impl Distribution {
    fn named(f: &str) -> Option<Distribution> {
        match f {
            "random_exponential" => Some(Distribution::Exponential),
            "random_gaussian" => Some(Distribution::Gaussian),
            "random_zipfian" => Some(Distribution::Zipfian),
            _ => None,
        }
    }

    /// pgbench's limits on the parameter, as a message when `p` is outside them.
    fn check(self, f: &str, p: f64) -> Result<(), String> {
        let ok = match self {
            Distribution::Exponential => p > 0.0,
            Distribution::Gaussian => p >= 2.0,
            Distribution::Zipfian => (1.001..=1000.0).contains(&p),
        };
        let limits = match self {
            Distribution::Exponential => "above 0",
            Distribution::Gaussian => "at least 2.0",
            Distribution::Zipfian => "between 1.001 and 1000",
        };
        if ok && p.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "{f}'s parameter must be {limits} (pgbench's limits), not {p}"
            ))
        }
    }
}

/// One step of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Set { var: usize, expr: Expr },
    Sleep { expr: Expr, unit_ns: u64 },
    Sql(SqlCommand),
}

/// A SQL command in both of its forms.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlCommand {
    /// As written, for messages.
    pub text: String,
    /// For simple mode: literal pieces and variables in between.
    pub parts: Vec<Part>,
    /// For extended and prepared modes: `$n` in place of each distinct variable.
    pub placeholder_sql: String,
    /// The variable behind each `$n`, in order.
    pub params: Vec<usize>,
    /// Prepared statement name on every connection.
    pub statement_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Var(usize),
}

/// A parsed script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub name: String,
    pub commands: Vec<Command>,
    /// Each command as written (a SQL command's lines joined by spaces), for the
    /// per-command report.
    pub texts: Vec<String>,
    /// Variable names by index; `scale` and `client_id` are always 0 and 1.
    pub variables: Vec<String>,
    /// Values given on the command line (`-D NAME=VALUE`), by variable index: each
    /// client starts with them, after `scale` and `client_id`, so `-D scale=N` wins.
    pub defined: Vec<(usize, i64)>,
}

pub const VAR_SCALE: usize = 0;
pub const VAR_CLIENT_ID: usize = 1;

impl Script {
    /// Parses a script in pgbench's syntax (the subset described in the module docs).
    pub fn parse(name: &str, text: &str) -> Result<Script, ScriptError> {
        Script::parse_with(name, text, &[])
    }

    /// Parses a script with variables given values beforehand (`-D NAME=VALUE`).
    pub fn parse_with(name: &str, text: &str, defines: &[(String, i64)]) -> Result<Script, ScriptError> {
        let mut p = ScriptParser {
            name,
            vars: HashMap::new(),
            variables: Vec::new(),
        };
        p.var("scale");
        p.var("client_id");
        let defined = defines.iter().map(|(n, v)| (p.var(n), *v)).collect();
        // First pass: every variable a \set defines, so `:name` in SQL can be told apart
        // from a `::type` cast or text that only looks like a variable.
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("\\set") {
                if let Some(var) = rest.split_whitespace().next() {
                    p.var(var);
                }
            }
        }
        let mut commands = Vec::new();
        let mut texts = Vec::new();
        let mut sql = String::new();
        let mut sql_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if sql.is_empty() && (line.is_empty() || line.starts_with("--")) {
                continue;
            }
            if sql.is_empty() && line.starts_with('\\') {
                commands.push(p.meta(line, line_no)?);
                texts.push(line.to_string());
                continue;
            }
            if sql.is_empty() {
                sql_line = line_no;
            } else {
                sql.push('\n');
            }
            sql.push_str(raw);
            if line.ends_with(';') {
                let n = commands.iter().filter(|c| matches!(c, Command::Sql(_))).count();
                commands.push(Command::Sql(p.sql(sql.trim(), n)));
                texts.push(one_line(&sql));
                sql.clear();
            }
        }
        if !sql.trim().is_empty() {
            // pgbench accepts a last command without its semicolon.
            let n = commands.iter().filter(|c| matches!(c, Command::Sql(_))).count();
            commands.push(Command::Sql(p.sql(sql.trim(), n)));
            texts.push(one_line(&sql));
        }
        let _ = sql_line;
        Ok(Script {
            name: name.to_string(),
            commands,
            texts,
            variables: p.variables,
            defined,
        })
    }

    /// How many SQL commands a transaction runs.
    pub fn statements(&self) -> usize {
        self.commands
            .iter()
            .filter(|c| matches!(c, Command::Sql(_)))
            .count()
    }
}

/// A command's text on one line: its lines' words joined by single spaces.
fn one_line(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct ScriptParser<'a> {
    name: &'a str,
    vars: HashMap<String, usize>,
    variables: Vec<String>,
}

impl ScriptParser<'_> {
    fn var(&mut self, name: &str) -> usize {
        if let Some(&i) = self.vars.get(name) {
            return i;
        }
        self.variables.push(name.to_string());
        self.vars.insert(name.to_string(), self.variables.len() - 1);
        self.variables.len() - 1
    }

    fn err(&self, line: usize, why: impl Into<String>) -> ScriptError {
        ScriptError {
            script: self.name.to_string(),
            line,
            why: why.into(),
        }
    }

    fn meta(&mut self, line: &str, no: usize) -> Result<Command, ScriptError> {
        let mut words = line.splitn(3, char::is_whitespace);
        let cmd = words.next().unwrap_or_default();
        match cmd {
            "\\set" => {
                let var = words
                    .next()
                    .filter(|v| is_var_name(v))
                    .ok_or_else(|| self.err(no, "\\set needs a variable name"))?;
                let text = words.next().unwrap_or("").trim();
                let var = self.var(var);
                let expr = self.expr(text, no)?;
                Ok(Command::Set { var, expr })
            }
            "\\sleep" => {
                let rest: Vec<&str> = line["\\sleep".len()..].split_whitespace().collect();
                let (amount, unit) = match rest.as_slice() {
                    [a] => (*a, "s"),
                    [a, u] => (*a, *u),
                    _ => {
                        return Err(self.err(
                            no,
                            "\\sleep takes a number or :variable and an optional unit (us, ms, s)",
                        ))
                    }
                };
                let unit_ns = match unit {
                    "us" => 1_000,
                    "ms" => 1_000_000,
                    "s" => 1_000_000_000,
                    u => return Err(self.err(no, format!("unknown \\sleep unit {u:?}; use us, ms or s"))),
                };
                let expr = self.expr(amount, no)?;
                Ok(Command::Sleep { expr, unit_ns })
            }
            other => Err(self.err(
                no,
                format!("{other} is not supported; connbench scripts take SQL, \\set and \\sleep"),
            )),
        }
    }

    fn sql(&mut self, text: &str, index: usize) -> SqlCommand {
        let mut parts = Vec::new();
        let mut placeholder_sql = String::with_capacity(text.len());
        let mut params: Vec<usize> = Vec::new();
        let mut literal = String::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b':' && i + 1 < bytes.len() && bytes[i + 1] == b':' {
                // a ::type cast
                literal.push_str("::");
                placeholder_sql.push_str("::");
                i += 2;
                continue;
            }
            if c == b':' {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                    end += 1;
                }
                let name = &text[start..end];
                if let Some(&var) = self.vars.get(name) {
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Var(var));
                    let n = match params.iter().position(|&v| v == var) {
                        Some(pos) => pos + 1,
                        None => {
                            params.push(var);
                            params.len()
                        }
                    };
                    let _ = write!(placeholder_sql, "${n}");
                    i = end;
                    continue;
                }
            }
            // Copy one UTF-8 character.
            let ch_len = utf8_len(c);
            literal.push_str(&text[i..i + ch_len]);
            placeholder_sql.push_str(&text[i..i + ch_len]);
            i += ch_len;
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        SqlCommand {
            text: text.to_string(),
            parts,
            placeholder_sql,
            params,
            statement_name: format!("connbench_{index}"),
        }
    }

    fn expr(&mut self, text: &str, no: usize) -> Result<Expr, ScriptError> {
        let tokens = tokenize(text).map_err(|why| self.err(no, why))?;
        let mut pos = 0;
        let e = self.parse_sum(&tokens, &mut pos, no)?;
        if pos != tokens.len() {
            return Err(self.err(no, format!("unexpected {:?} in expression {text:?}", tokens[pos])));
        }
        Ok(e)
    }

    fn parse_sum(&mut self, t: &[Tok], pos: &mut usize, no: usize) -> Result<Expr, ScriptError> {
        let mut left = self.parse_product(t, pos, no)?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = t.get(*pos) {
            *pos += 1;
            let right = self.parse_product(t, pos, no)?;
            left = Expr::Bin(*op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_product(&mut self, t: &[Tok], pos: &mut usize, no: usize) -> Result<Expr, ScriptError> {
        let mut left = self.parse_unary(t, pos, no)?;
        while let Some(Tok::Op(op @ ('*' | '/' | '%'))) = t.get(*pos) {
            *pos += 1;
            let right = self.parse_unary(t, pos, no)?;
            left = Expr::Bin(*op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_unary(&mut self, t: &[Tok], pos: &mut usize, no: usize) -> Result<Expr, ScriptError> {
        match t.get(*pos) {
            Some(Tok::Op('-')) => {
                *pos += 1;
                Ok(Expr::Neg(Box::new(self.parse_unary(t, pos, no)?)))
            }
            Some(Tok::Op('+')) => {
                *pos += 1;
                self.parse_unary(t, pos, no)
            }
            Some(Tok::Int(n)) => {
                *pos += 1;
                Ok(Expr::Int(*n))
            }
            Some(Tok::Var(name)) => {
                *pos += 1;
                match self.vars.get(name.as_str()) {
                    Some(&v) => Ok(Expr::Var(v)),
                    None => Err(self.err(no, format!("variable :{name} is never set"))),
                }
            }
            Some(Tok::Open) => {
                *pos += 1;
                let e = self.parse_sum(t, pos, no)?;
                match t.get(*pos) {
                    Some(Tok::Close) => {
                        *pos += 1;
                        Ok(e)
                    }
                    _ => Err(self.err(no, "missing \")\"")),
                }
            }
            Some(Tok::Ident(f)) if f == "random" => {
                *pos += 1;
                if t.get(*pos) != Some(&Tok::Open) {
                    return Err(self.err(no, "random needs (lo, hi)"));
                }
                *pos += 1;
                let lo = self.parse_sum(t, pos, no)?;
                if t.get(*pos) != Some(&Tok::Comma) {
                    return Err(self.err(no, "random needs two arguments: random(lo, hi)"));
                }
                *pos += 1;
                let hi = self.parse_sum(t, pos, no)?;
                if t.get(*pos) != Some(&Tok::Close) {
                    return Err(self.err(no, "missing \")\" after random's arguments"));
                }
                *pos += 1;
                Ok(Expr::Random(Box::new(lo), Box::new(hi)))
            }
            Some(Tok::Ident(f)) if Distribution::named(f).is_some() => {
                let d = Distribution::named(f).expect("checked");
                let usage = format!("{f} needs (lo, hi, parameter), the parameter a number such as 2.5");
                *pos += 1;
                if t.get(*pos) != Some(&Tok::Open) {
                    return Err(self.err(no, usage));
                }
                *pos += 1;
                let lo = self.parse_sum(t, pos, no)?;
                if t.get(*pos) != Some(&Tok::Comma) {
                    return Err(self.err(no, usage));
                }
                *pos += 1;
                let hi = self.parse_sum(t, pos, no)?;
                if t.get(*pos) != Some(&Tok::Comma) {
                    return Err(self.err(no, usage));
                }
                *pos += 1;
                let param = match t.get(*pos) {
                    Some(Tok::Int(n)) => *n as f64,
                    Some(Tok::Float(x)) => *x,
                    _ => return Err(self.err(no, usage)),
                };
                *pos += 1;
                if t.get(*pos) != Some(&Tok::Close) {
                    return Err(self.err(no, usage));
                }
                *pos += 1;
                d.check(f, param).map_err(|why| self.err(no, why))?;
                Ok(Expr::Skewed(d, Box::new(lo), Box::new(hi), param))
            }
            Some(Tok::Ident(f)) => Err(self.err(
                no,
                format!(
                    "function {f}() is not supported; connbench knows random(lo, hi), random_exponential, \
                     random_gaussian and random_zipfian(lo, hi, parameter), and integer arithmetic"
                ),
            )),
            Some(Tok::Float(x)) => Err(self.err(
                no,
                format!(
                    "{x} is not an integer: connbench's \\set works in integers; only a random_* \
                     function's parameter takes a decimal"
                ),
            )),
            other => Err(self.err(no, format!("expected a value, found {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    /// A number with a decimal point: only a distribution's parameter takes one.
    Float(f64),
    Var(String),
    Ident(String),
    Op(char),
    Open,
    Close,
    Comma,
}

fn tokenize(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' => {
                chars.next();
            }
            '0'..='9' => {
                let mut s = String::new();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    s.push(d);
                    chars.next();
                }
                if chars.peek() == Some(&'.') {
                    s.push('.');
                    chars.next();
                    while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                        s.push(d);
                        chars.next();
                    }
                    out.push(Tok::Float(s.parse().map_err(|_| format!("{s} is not a number"))?));
                    continue;
                }
                out.push(Tok::Int(
                    s.parse().map_err(|_| format!("number {s} is too large"))?,
                ));
            }
            ':' => {
                chars.next();
                let mut s = String::new();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_alphanumeric() || **d == '_') {
                    s.push(d);
                    chars.next();
                }
                if s.is_empty() {
                    return Err("\":\" must be followed by a variable name".into());
                }
                out.push(Tok::Var(s));
            }
            c if c.is_ascii_alphabetic() => {
                let mut s = String::new();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_alphanumeric() || **d == '_') {
                    s.push(d);
                    chars.next();
                }
                out.push(Tok::Ident(s));
            }
            '+' | '-' | '*' | '/' | '%' => {
                out.push(Tok::Op(c));
                chars.next();
            }
            '(' => {
                out.push(Tok::Open);
                chars.next();
            }
            ')' => {
                out.push(Tok::Close);
                chars.next();
            }
            ',' => {
                out.push(Tok::Comma);
                chars.next();
            }
            other => return Err(format!("unexpected character {other:?} in expression")),
        }
    }
    Ok(out)
}

fn is_var_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Appends an integer's decimal digits (the formatting machinery is slower, and this
/// runs for every parameter of every statement).
fn push_int(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&buf[i..]).expect("ASCII digits"));
}

/// A client's random numbers: rand's `SmallRng` (xoshiro), seeded per client from the
/// run's seed (`--random-seed`, reported) and the client's id, so clients differ and a
/// run's random choices can be repeated. `range` draws with rand's uniform
/// integer sampling, which has no modulo bias.
#[derive(Debug, Clone)]
pub struct Rng(rand::rngs::SmallRng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rand::SeedableRng::seed_from_u64(seed))
    }

    /// Uniform in [lo, hi], inclusive as pgbench's random(); `lo` when the range is empty.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        rand::RngExt::random_range(&mut self.0, lo..=hi)
    }

    /// pgbench's non-uniform draws in [lo, hi] (`lo` when the range is empty), with its
    /// formulas (pgbench.c: getExponentialRand, getGaussianRand, getZipfianRand):
    /// - exponential: `-ln(cut + (1 - cut) u) / p` with `cut = e^-p`, u uniform in (0, 1],
    ///   a value in [0, 1) falling off as e^(-p x);
    /// - gaussian: Box-Muller, redrawn until within ±p standard deviations, mapped from
    ///   [-p, p) to [0, 1);
    /// - zipfian: Devroye's rejection method ("Non-Uniform Random Variate Generation",
    ///   p. 550), value k with probability proportional to 1/k^p.
    ///
    /// The first two scale their [0, 1) value to the range's width.
    pub fn skewed(&mut self, d: Distribution, lo: i64, hi: i64, p: f64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let width = (hi as i128 - lo as i128 + 1) as f64;
        let scaled = |r: f64| (lo as i128 + (width * r) as i128).min(hi as i128) as i64;
        match d {
            Distribution::Exponential => {
                let cut = (-p).exp();
                let r = -(cut + (1.0 - cut) * self.unit()).ln() / p;
                scaled(r)
            }
            Distribution::Gaussian => {
                let stdev = loop {
                    let (r1, r2) = (self.unit(), self.unit());
                    let z = (-2.0 * r1.ln()).sqrt() * (2.0 * std::f64::consts::PI * r2).sin();
                    if (-p..p).contains(&z) {
                        break z;
                    }
                };
                scaled((stdev + p) / (2.0 * p))
            }
            Distribution::Zipfian => {
                let b = 2f64.powf(p - 1.0);
                loop {
                    let u = 1.0 - self.unit();
                    let v = 1.0 - self.unit();
                    let x = u.powf(-1.0 / (p - 1.0)).floor();
                    let t = (1.0 + 1.0 / x).powf(p - 1.0);
                    if v * x * (t - 1.0) / (b - 1.0) <= t / b && x <= width {
                        break (lo as i128 + x as i128 - 1) as i64;
                    }
                }
            }
        }
    }

    /// Uniform in (0, 1], so that its logarithm is finite.
    pub fn unit(&mut self) -> f64 {
        1.0 - rand::RngExt::random::<f64>(&mut self.0)
    }
}

/// A client's variables and reusable buffers for one script.
#[derive(Debug)]
pub struct Executor {
    values: Vec<i64>,
    sql: String,
    params: Vec<String>,
    /// Whether the current connection has the script's statements prepared.
    pub prepared: bool,
    /// Which pooled connection the statements were prepared on.
    pub connection: u64,
    pub rng: Rng,
    /// With `-r`: what each command of the last run took.
    pub times: Option<CommandTimes>,
}

/// What each command of one run of the script took (`-r`): the commands before
/// `reached` completed, in `ns[i]` nanoseconds each; `failed` is the one that failed.
/// Kept on the executor and overwritten run by run, so timing allocates nothing; the
/// client hands a measured transaction's times to its worker's recorder.
#[derive(Debug, Clone, Default)]
pub struct CommandTimes {
    pub ns: Vec<u64>,
    pub reached: usize,
    pub failed: Option<usize>,
}

/// Why a transaction failed: the statement and the error.
#[derive(Debug)]
pub struct StepError {
    pub error: ConnectError,
    /// The SQL command (as written) that failed, when one did.
    pub statement: Option<String>,
}

impl Executor {
    pub fn new(script: &Script, scale: i64, client_id: i64, seed: u64) -> Executor {
        let mut values = vec![0; script.variables.len()];
        values[VAR_SCALE] = scale;
        values[VAR_CLIENT_ID] = client_id;
        for &(var, v) in &script.defined {
            values[var] = v;
        }
        Executor {
            values,
            sql: String::with_capacity(256),
            params: vec![String::new(); 8],
            prepared: false,
            connection: u64::MAX,
            rng: Rng::new(seed),
            times: None,
        }
    }

    /// Times every command of each run from now on (`-r`).
    pub fn time_commands(&mut self, script: &Script) {
        self.times = Some(CommandTimes {
            ns: vec![0; script.commands.len()],
            reached: 0,
            failed: None,
        });
    }

    fn eval(&mut self, e: &Expr) -> i64 {
        match e {
            Expr::Int(n) => *n,
            Expr::Var(v) => self.values[*v],
            Expr::Neg(x) => self.eval(x).wrapping_neg(),
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a), self.eval(b));
                match op {
                    '+' => a.wrapping_add(b),
                    '-' => a.wrapping_sub(b),
                    '*' => a.wrapping_mul(b),
                    '/' if b != 0 => a.wrapping_div(b),
                    '%' if b != 0 => a.wrapping_rem(b),
                    _ => 0,
                }
            }
            Expr::Random(lo, hi) => {
                let (lo, hi) = (self.eval(lo), self.eval(hi));
                self.rng.range(lo, hi)
            }
            Expr::Skewed(d, lo, hi, p) => {
                let (lo, hi) = (self.eval(lo), self.eval(hi));
                self.rng.skewed(*d, lo, hi, *p)
            }
        }
    }

    /// Runs the script once on `session`. On a server error inside a transaction block
    /// the block is rolled back, so the session stays usable for the next transaction.
    pub async fn run(
        &mut self,
        script: &Script,
        mode: QueryMode,
        session: &mut Session,
    ) -> Result<(), StepError> {
        if let Some(t) = &mut self.times {
            t.reached = 0;
            t.failed = None;
        }
        if mode == QueryMode::Prepared && !self.prepared {
            for (i, c) in script.commands.iter().enumerate() {
                if let Command::Sql(q) = c {
                    if let Err(error) = session.prepare(&q.statement_name, &q.placeholder_sql).await {
                        if let Some(t) = &mut self.times {
                            t.failed = Some(i);
                        }
                        return Err(StepError {
                            error,
                            statement: Some(q.text.clone()),
                        });
                    }
                }
            }
            self.prepared = true;
        }
        for (i, c) in script.commands.iter().enumerate() {
            // Two clock reads per command, only under -r (pgbench's -r costs the same).
            let started = self.times.is_some().then(Instant::now);
            match c {
                Command::Set { var, expr } => {
                    let v = self.eval(expr);
                    self.values[*var] = v;
                }
                Command::Sleep { expr, unit_ns } => {
                    let n = self.eval(expr).max(0) as u64;
                    tokio::time::sleep(Duration::from_nanos(n.saturating_mul(*unit_ns))).await;
                }
                Command::Sql(q) => {
                    if let Err(error) = self.statement(q, mode, session).await {
                        if let Some(t) = &mut self.times {
                            t.failed = Some(i);
                        }
                        if session.in_failed_transaction() {
                            // Best effort: a broken connection will show on the next use.
                            let _ = session.execute(Statement::Simple("ROLLBACK"), &[]).await;
                        }
                        return Err(StepError {
                            error,
                            statement: Some(q.text.clone()),
                        });
                    }
                }
            }
            if let (Some(t), Some(started)) = (&mut self.times, started) {
                t.ns[i] = started.elapsed().as_nanos() as u64;
                t.reached = i + 1;
            }
        }
        Ok(())
    }

    async fn statement(
        &mut self,
        q: &SqlCommand,
        mode: QueryMode,
        session: &mut Session,
    ) -> Result<u64, ConnectError> {
        match mode {
            QueryMode::Simple => {
                self.sql.clear();
                for part in &q.parts {
                    match part {
                        Part::Text(t) => self.sql.push_str(t),
                        Part::Var(v) => push_int(&mut self.sql, self.values[*v]),
                    }
                }
                session.execute(Statement::Simple(&self.sql), &[]).await
            }
            QueryMode::Extended | QueryMode::Prepared => {
                if self.params.len() < q.params.len() {
                    self.params.resize(q.params.len(), String::new());
                }
                for (slot, &v) in self.params.iter_mut().zip(&q.params) {
                    slot.clear();
                    push_int(slot, self.values[v]);
                }
                let refs: [&str; 16];
                let n = q.params.len();
                let stmt = if mode == QueryMode::Extended {
                    Statement::Extended(&q.placeholder_sql)
                } else {
                    Statement::Prepared(&q.statement_name)
                };
                if n <= 16 {
                    // No allocation for the common case of a few parameters.
                    refs = std::array::from_fn(|i| if i < n { self.params[i].as_str() } else { "" });
                    session.execute(stmt, &refs[..n]).await
                } else {
                    let v: Vec<&str> = self.params[..n].iter().map(String::as_str).collect();
                    session.execute(stmt, &v).await
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn skewed_random_functions_follow_pgbenchs_distributions() {
        let mut rng = Rng::new(42);
        let n = 200_000;
        // Exponential, parameter 2 on [0, 999]: the value / 1000 has density proportional
        // to e^(-2x) on [0, 1), whose mean is 1/2 - e^-2 / (1 - e^-2) = 0.3435.
        let mean = (0..n)
            .map(|_| rng.skewed(Distribution::Exponential, 0, 999, 2.0) as f64 / 1000.0)
            .sum::<f64>()
            / n as f64;
        assert!((mean - 0.3435).abs() < 0.005, "exponential mean {mean}");
        // Gaussian, parameter 2.5 on [1, 100]: symmetric about the middle, every value
        // in range, and the middle tenth far more frequent than the outer tenths.
        let draws: Vec<i64> = (0..n)
            .map(|_| rng.skewed(Distribution::Gaussian, 1, 100, 2.5))
            .collect();
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
        let draws: Vec<i64> = (0..n)
            .map(|_| rng.skewed(Distribution::Zipfian, 1, 1000, 2.0))
            .collect();
        assert!(draws.iter().all(|v| (1..=1000).contains(v)));
        let f = |k: i64| draws.iter().filter(|&&v| v == k).count() as f64;
        assert!((f(1) / f(2) - 4.0).abs() < 0.2, "{}", f(1) / f(2));
        assert!((f(1) / f(3) - 9.0).abs() < 0.8, "{}", f(1) / f(3));
        // An empty range gives lo, as random() does; the widest range stays in range.
        assert_eq!(rng.skewed(Distribution::Gaussian, 5, 5, 2.0), 5);
        for d in [
            Distribution::Exponential,
            Distribution::Gaussian,
            Distribution::Zipfian,
        ] {
            let v = rng.skewed(d, i64::MIN, i64::MAX, 2.0);
            assert!((i64::MIN..=i64::MAX).contains(&v));
        }
    }

    #[test]
    fn skewed_random_functions_parse_with_pgbenchs_limits() {
        let s = Script::parse(
            "t",
            "\\set a random_zipfian(1, 10 * :scale, 1.07)\n\\set b random_gaussian(1, 10, 3)\n\\set c random_exponential(1, :b, 0.5)\n",
        )
        .unwrap();
        assert!(matches!(
            &s.commands[0],
            Command::Set { expr: Expr::Skewed(Distribution::Zipfian, _, _, p), .. } if *p == 1.07
        ));
        assert!(matches!(
            &s.commands[1],
            Command::Set { expr: Expr::Skewed(Distribution::Gaussian, _, _, p), .. } if *p == 3.0
        ));
        for (line, want) in [
            ("\\set a random_gaussian(1, 10, 1.5)", "at least 2.0"),
            ("\\set a random_exponential(1, 10, 0)", "above 0"),
            ("\\set a random_zipfian(1, 10, 1)", "between 1.001 and 1000"),
            ("\\set a random_zipfian(1, 10)", "needs (lo, hi, parameter)"),
            (
                "\\set a random_gaussian(1, 10, :scale)",
                "needs (lo, hi, parameter)",
            ),
            (
                "\\set a random_poisson(1, 10, 2)",
                "random_zipfian(lo, hi, parameter)",
            ),
            ("\\set a 1.5 + 2", "1.5 is not an integer"),
        ] {
            let e = Script::parse("t", line).unwrap_err();
            assert!(e.why.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn expressions_follow_precedence_and_random_stays_in_range() {
        let s = Script::parse(
            "t",
            "\\set a 2 + 3 * (4 - 1) % 5\n\\set b -:a * :scale\n\\set r random(1, 10 * :scale)\n",
        )
        .unwrap();
        let mut ex = Executor::new(&s, 3, 0, 42);
        for c in &s.commands {
            if let Command::Set { var, expr } = c {
                let v = ex.eval(expr);
                ex.values[*var] = v;
            }
        }
        assert_eq!(ex.values[2], 2 + (3 * 3) % 5);
        assert_eq!(ex.values[3], -18, "unary minus binds tighter than *");
        for _ in 0..1000 {
            let v = ex.rng.range(1, 30);
            assert!((1..=30).contains(&v));
        }
    }

    #[test]
    fn sql_keeps_casts_and_unknown_colons_and_spans_lines() {
        let s = Script::parse("t", "\\set id 5\nSELECT :id::text,\n  ':notavar' AS x\n  ;\n").unwrap();
        let Command::Sql(q) = &s.commands[1] else { panic!() };
        assert_eq!(q.placeholder_sql, "SELECT $1::text,\n  ':notavar' AS x\n  ;");
        assert_eq!(q.parts[1], Part::Var(2));
    }

    #[test]
    fn arithmetic_that_overflows_wraps_instead_of_panicking() {
        // i64::MIN / -1 and % -1 overflow (a panic in Rust's `/`), and / 0 or % 0 divide by
        // zero: a script a user wrote must not bring a worker down.
        let s = Script::parse(
            "t",
            "\\set a -9223372036854775807 - 1\n\\set b :a / -1\n\\set c :a % -1\n\\set d :a / 0\n\\set e -:a * 2\n",
        )
        .unwrap();
        let mut ex = Executor::new(&s, 1, 0, 7);
        for c in &s.commands {
            if let Command::Set { var, expr } = c {
                let v = ex.eval(expr);
                ex.values[*var] = v;
            }
        }
        let names: Vec<i64> = ex.values[2..7].to_vec();
        assert_eq!(names, vec![i64::MIN, i64::MIN, 0, 0, 0]);
    }

    #[test]
    fn integers_format_like_display() {
        for v in [0i64, 7, -7, 10, 99_999, i64::MAX, i64::MIN, -5000] {
            let mut s = String::from("x");
            push_int(&mut s, v);
            assert_eq!(s, format!("x{v}"));
        }
    }

    #[test]
    fn script_errors_name_line_and_fix() {
        let e = Script::parse("f.sql", "SELECT 1;\n\\gset\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.sql line 2: \\gset is not supported; connbench scripts take SQL, \\set and \\sleep"
        );
        let e = Script::parse("f.sql", "\\set x :nope + 1\n").unwrap_err();
        assert_eq!(e.to_string(), "f.sql line 1: variable :nope is never set");
        let e = Script::parse("f.sql", "\\set x sqrt(4)\n").unwrap_err();
        assert!(e.to_string().contains("sqrt() is not supported"), "{e}");
        let e = Script::parse("f.sql", "\\sleep 5 hours\n").unwrap_err();
        assert!(e.to_string().contains("unknown \\sleep unit"), "{e}");
        let s = Script::parse("f.sql", "\\sleep 20 ms\n").unwrap();
        assert!(matches!(
            s.commands[0],
            Command::Sleep {
                unit_ns: 1_000_000,
                ..
            }
        ));
    }
}
