//! A script's text into [`Command`]s, as pgbench 15 reads it (pgbench.c `ParseScript`,
//! `process_backslash_command`, `CheckConditional`; psqlscan.l for where a SQL command
//! ends).
//!
//! SQL commands end at a `;` outside quotes, comments and parentheses, or where a
//! meta-command (a backslash outside quotes) begins; `\;` joins statements into one
//! compound command, sent as one Query message. Meta-commands run to the end of their
//! line (a backslash before the newline continues it). `\gset` and `\aset` belong to
//! the SQL command before them. Everything pgbench refuses when it reads a script is
//! refused here, with the line and the fix. What pgbench only finds while running (an
//! expression's variable that nothing ever sets, an invalid variable name for `\set`,
//! unbalanced pipelines, `\gset` inside a pipeline) fails here while running too, as
//! pgbench's does, so a script behaves the same in both tools; the parser finds these
//! ahead and says so in the script's warnings, printed before the run.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::parser::{parse_expr, Expr};
use super::scan::{scan, valid_variable_name, variable_at, Raw};
use super::{Script, ScriptError};

/// One step of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Set {
        var: usize,
        expr: Expr,
    },
    Sleep {
        amount: SleepAmount,
        unit_us: i64,
    },
    /// `\if`: when false, go to `next` (the matching `\elif`, `\else` or `\endif`).
    If {
        cond: Expr,
        next: usize,
    },
    /// `\elif`: reached from a false branch, test `cond` (false: go to `next`); reached
    /// by running off the end of a taken branch, go to `end` (the `\endif`).
    Elif {
        cond: Expr,
        next: usize,
        end: usize,
    },
    /// `\else`: reached by running off a taken branch, go to `end`.
    Else {
        end: usize,
    },
    Endif,
    Sql(SqlCommand),
    /// `\shell` (no variable) or `\setshell VAR` (stores the integer it prints).
    Shell {
        var: Option<usize>,
        words: Vec<ShellWord>,
    },
    StartPipeline,
    SyncPipeline,
    EndPipeline,
    /// `\randstring VAR TEMPLATE` (connbench's, not pgbench's): VAR becomes text made
    /// from the template as sysbench makes its `c` and `pad` values, each `#` a random
    /// digit and each `@` a random letter; the built-in sysbench workloads use it.
    RandString {
        var: usize,
        template: String,
    },
    /// A command pgbench reads but fails when it runs (`\set` or `\setshell` of an
    /// invalid variable name): the failure's key and message.
    Fails {
        key: &'static str,
        why: String,
    },
}

/// How long `\sleep` sleeps, before its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SleepAmount {
    Literal(i64),
    Var(usize),
}

/// A word of a `\shell` or `\setshell` command line.
#[derive(Debug, Clone, PartialEq)]
pub enum ShellWord {
    Text(String),
    Var(usize),
}

/// What a SQL command does with the rows it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Results {
    Discard,
    /// `\gset [prefix]`: the last statement must return exactly one row; its columns
    /// become variables named prefix + column.
    Gset(String),
    /// `\aset [prefix]`: every statement's last row (if any) is stored so.
    Aset(String),
}

/// A SQL command in both of its forms.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlCommand {
    /// As written (statements of a compound joined by `;`), for messages.
    pub text: String,
    /// For simple mode: literal pieces and variables in between.
    pub parts: Vec<Part>,
    /// For extended and prepared modes: `$n` in place of each distinct variable.
    pub placeholder_sql: String,
    /// The variable behind each `$n`, in order.
    pub params: Vec<usize>,
    /// Prepared statement name on every connection.
    pub statement_name: String,
    pub results: Results,
    /// Statements in it: more than one for a `\;` compound.
    pub statements: usize,
    /// The `:name`s in it, each occurrence counted, set or not: pgbench's extended and
    /// prepared modes bind one parameter per occurrence and take at most 255.
    pub occurrences: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Var(usize),
}

/// The script's variable names and the indices evaluation uses.
pub(super) struct Names {
    pub list: Vec<String>,
    pub index: HashMap<String, usize>,
}

impl Names {
    pub fn var(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.list.push(name.to_string());
        self.index.insert(name.to_string(), self.list.len() - 1);
        self.list.len() - 1
    }
}

struct Parser<'a> {
    script: &'a str,
    names: Names,
    /// Names something assigns (\set, \setshell, -D, the automatic ones).
    assigned: Vec<String>,
    /// Prefixes of `\gset` and `\aset`: any name with one of them may be set by a query.
    result_prefixes: Vec<String>,
    /// What will fail when it runs (see the module docs), found ahead.
    warnings: Vec<ScriptError>,
}

impl Parser<'_> {
    fn err(&self, line: usize, why: impl Into<String>) -> ScriptError {
        ScriptError {
            script: self.script.to_string(),
            line,
            why: why.into(),
        }
    }

    /// Whether anything could ever give `name` a value.
    fn settable(&self, name: &str) -> bool {
        self.assigned.iter().any(|a| a == name)
            || self.result_prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    fn expr(&mut self, text: &str, line: usize, what: &str) -> Result<Expr, ScriptError> {
        let mut unset = None;
        let names = &mut self.names;
        let assigned = &self.assigned;
        let prefixes = &self.result_prefixes;
        let e = parse_expr(text, &mut |n| {
            let settable =
                assigned.iter().any(|a| a == n) || prefixes.iter().any(|p| n.starts_with(p.as_str()));
            if !settable && unset.is_none() {
                unset = Some(n.to_string());
            }
            names.var(n)
        })
        .map_err(|e| {
            let near = text
                .get(e.at..)
                .unwrap_or("")
                .chars()
                .take(20)
                .collect::<String>();
            let near = if near.is_empty() {
                "at the end".to_string()
            } else {
                format!("at {near:?}")
            };
            // A long expression is cut in the message, which stays one readable line.
            let whole = if text.chars().count() > 60 {
                format!("{}...", text.chars().take(60).collect::<String>())
            } else {
                text.to_string()
            };
            self.err(line, format!("{what}: {} ({near} in {whole:?})", e.why))
        })?;
        if let Some(n) = unset {
            self.never_set(line, what, &n);
        }
        Ok(super::eval::compile(e))
    }

    /// A variable nothing sets: the command fails when it runs, as pgbench's does.
    fn never_set(&mut self, line: usize, what: &str, name: &str) {
        let w = self.err(
            line,
            format!(
                "{what}: variable :{name} is never set, so the command fails when it runs (as pgbench's \
                 does); set it with \\set, \\setshell, \\gset, \\aset or -D {name}=VALUE"
            ),
        );
        self.warnings.push(w);
    }

    fn sql(&mut self, text: &str, index: usize, statements: usize) -> SqlCommand {
        let mut parts = Vec::new();
        let mut placeholder_sql = String::with_capacity(text.len());
        let mut params: Vec<usize> = Vec::new();
        let mut literal = String::new();
        let mut occurrences = 0;
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            if rest.starts_with("::") {
                // A ::type cast (and any run of colons) is never a variable.
                let n = rest.len() - rest.trim_start_matches(':').len();
                literal.push_str(&rest[..n]);
                placeholder_sql.push_str(&rest[..n]);
                i += n;
                continue;
            }
            if rest.starts_with(':') {
                if let Some(name) = variable_at(text, i) {
                    occurrences += 1;
                    if self.settable(name) {
                        let var = self.names.var(name);
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
                        i += 1 + name.len();
                        continue;
                    }
                }
            }
            let ch = rest.chars().next().expect("not at the end");
            literal.push(ch);
            placeholder_sql.push(ch);
            i += ch.len_utf8();
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
            results: Results::Discard,
            statements,
            occurrences,
        }
    }

    /// `\shell COMMAND [ARGS]` and `\setshell NAME COMMAND [ARGS]` (`lower`, the name as
    /// written, lower-cased): `:name` words are variables.
    fn shell(&mut self, words: &[&str], lower: &str, line: usize) -> Result<Command, ScriptError> {
        let set = lower == "setshell";
        let need = if set { 3 } else { 2 };
        if words.len() < need {
            return Err(self.err(
                line,
                if set {
                    "\\setshell needs a variable and a command: \\setshell NAME COMMAND [ARGS]".to_string()
                } else {
                    "\\shell needs a command: \\shell COMMAND [ARGS]".to_string()
                },
            ));
        }
        // pgbench's MAX_ARGS: the command's name and at most 255 words.
        if words.len() > 256 {
            return Err(self.err(
                line,
                format!(
                    "too many arguments in command \"{lower}\": {} words, pgbench's maximum is 255; \
                     put the command in a shell script and run that",
                    words.len() - 1
                ),
            ));
        }
        if set && !valid_variable_name(words[1]) {
            return Ok(self.fails(line, "\\setshell", words[1]));
        }
        let var = set.then(|| self.names.var(words[1]));
        let mut out = Vec::new();
        for w in &words[need - 1..] {
            // pgbench: `:name` is a variable, `::x` the text `:x`, else text.
            out.push(match w.strip_prefix(':') {
                Some(lit) if lit.starts_with(':') => ShellWord::Text(lit.to_string()),
                Some(v) => {
                    if !self.settable(v) {
                        self.never_set(line, &format!("\\{lower}"), v);
                    }
                    ShellWord::Var(self.names.var(v))
                }
                None => ShellWord::Text(w.to_string()),
            });
        }
        Ok(Command::Shell { var, words: out })
    }

    fn meta(&mut self, text: &str, line: usize) -> Result<Command, ScriptError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let name = words.first().copied().unwrap_or("");
        let lower = name.to_ascii_lowercase();
        let rest_after = |n: usize| -> &str {
            // The text after the first n words, as written (an expression keeps its spaces).
            let mut t = text;
            for _ in 0..n {
                t = t.trim_start();
                t = &t[t.find(char::is_whitespace).unwrap_or(t.len())..];
            }
            t.trim()
        };
        let no_arguments = |this: &Self| {
            if words.len() > 1 {
                Err(this.err(
                    line,
                    format!(
                        "\\{lower} takes no arguments, found {:?}; remove it",
                        rest_after(1)
                    ),
                ))
            } else {
                Ok(())
            }
        };
        match lower.as_str() {
            "set" => {
                let Some(var) = words.get(1) else {
                    return Err(self.err(line, "\\set needs a variable and an expression: \\set NAME EXPRESSION"));
                };
                let expr_text = rest_after(2);
                if expr_text.is_empty() {
                    return Err(self.err(line, format!("\\set {var} needs an expression after the name")));
                }
                let expr = self.expr(expr_text, line, "\\set")?;
                if !valid_variable_name(var) {
                    return Ok(self.fails(line, "\\set", var));
                }
                Ok(Command::Set {
                    var: self.names.var(var),
                    expr,
                })
            }
            "sleep" => self.sleep(&words, line),
            "if" | "elif" => {
                let cond_text = rest_after(1);
                if cond_text.is_empty() {
                    return Err(self.err(line, format!("\\{lower} needs a condition, e.g. \\{lower} :x > 0")));
                }
                let cond = self.expr(cond_text, line, &format!("\\{lower}"))?;
                Ok(if lower == "if" {
                    Command::If { cond, next: 0 }
                } else {
                    Command::Elif { cond, next: 0, end: 0 }
                })
            }
            "else" => no_arguments(self).map(|_| Command::Else { end: 0 }),
            "endif" => no_arguments(self).map(|_| Command::Endif),
            "startpipeline" => no_arguments(self).map(|_| Command::StartPipeline),
            "syncpipeline" => no_arguments(self).map(|_| Command::SyncPipeline),
            "endpipeline" => no_arguments(self).map(|_| Command::EndPipeline),
            "shell" | "setshell" => self.shell(&words, &lower, line),
            "randstring" => {
                let (Some(var), Some(template), None) = (words.get(1), words.get(2), words.get(3)) else {
                    return Err(self.err(
                        line,
                        "\\randstring needs a variable and a template without spaces: \\randstring NAME ###-@@@",
                    ));
                };
                if !valid_variable_name(var) {
                    return Err(self.err(line, format!("\\randstring: invalid variable name {var:?}")));
                }
                Ok(Command::RandString {
                    var: self.names.var(var),
                    template: template.to_string(),
                })
            }
            "gset" | "aset" => unreachable!("handled with the SQL command before it"),
            "" => Err(self.err(line, "a lone backslash; write a meta-command such as \\set, or remove it")),
            other => Err(self.err(
                line,
                format!(
                    "invalid command \\{other}; pgbench's are \\set, \\setshell, \\shell, \\sleep, \\if, \\elif, \
                     \\else, \\endif, \\gset, \\aset, \\startpipeline, \\syncpipeline and \\endpipeline \
                     (and connbench's \\randstring)"
                ),
            )),
        }
    }

    /// `\set` or `\setshell` of an invalid variable name: pgbench reads it and fails
    /// when it runs; so does connbench, with a warning ahead.
    fn fails(&mut self, line: usize, what: &str, var: &str) -> Command {
        let why = format!(
            "{what}: invalid variable name {var:?}; a name starts with a letter or _ and goes on with \
             letters, digits or _"
        );
        let w = self.err(
            line,
            format!("{why} (the command fails when it runs, as pgbench's does)"),
        );
        self.warnings.push(w);
        Command::Fails {
            key: "invalid-variable-name",
            why,
        }
    }

    fn sleep(&mut self, words: &[&str], line: usize) -> Result<Command, ScriptError> {
        let usage = "\\sleep takes a number or :variable and an optional unit: \\sleep 10 ms";
        let (amount, unit) = match words {
            [_] => return Err(self.err(line, format!("\\sleep: missing argument; {usage}"))),
            [_, a] if !a.starts_with(':') => {
                // "2ms": the number and its unit in one word, as pgbench allows.
                let digits_end = a
                    .char_indices()
                    .find(|&(k, c)| !(c.is_ascii_digit() || (k == 0 && (c == '+' || c == '-'))))
                    .map_or(a.len(), |(k, _)| k);
                let number = &a[..digits_end];
                if !number
                    .trim_start_matches(['+', '-'])
                    .starts_with(|c: char| c.is_ascii_digit())
                {
                    return Err(self.err(
                        line,
                        format!("\\sleep: invalid sleep time {a:?}, must be an integer; {usage}"),
                    ));
                }
                (number, (digits_end < a.len()).then(|| &a[digits_end..]))
            }
            [_, a] => (*a, None),
            [_, a, u] => (*a, Some(*u)),
            _ => return Err(self.err(line, format!("\\sleep: too many arguments; {usage}"))),
        };
        let unit_us = match unit.map(str::to_ascii_lowercase).as_deref() {
            None | Some("s") => 1_000_000,
            Some("ms") => 1_000,
            Some("us") => 1,
            Some(_) => {
                return Err(self.err(
                    line,
                    format!(
                        "\\sleep: unrecognized time unit {:?}, must be us, ms or s",
                        unit.unwrap_or("")
                    ),
                ))
            }
        };
        let amount = match amount.strip_prefix(':') {
            Some(v) => {
                if !self.settable(v) {
                    self.never_set(line, "\\sleep", v);
                }
                SleepAmount::Var(self.names.var(v))
            }
            None => {
                let n = atoi(amount).ok_or_else(|| {
                    self.err(
                        line,
                        format!("\\sleep: invalid sleep time {amount:?}, must be an integer; {usage}"),
                    )
                })?;
                SleepAmount::Literal(n)
            }
        };
        Ok(Command::Sleep { amount, unit_us })
    }
}

/// C's `atoi` for \sleep: leading spaces, a sign, digits; `None` when no digit starts it.
/// Saturates where atoi's behaviour is undefined.
pub fn atoi(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &t[..t.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    let n = digits.parse::<i64>().unwrap_or(i64::MAX);
    Some(if neg { -n } else { n })
}

/// Parses a run's scripts (see the module docs); `defines` are the `-D NAME=VALUE`
/// variables. The scripts share one set of variables, as a pgbench client's scripts
/// do: a name one script sets, another may read, and every script numbers every
/// variable alike, so a client's state carries from one script to the next.
pub(super) fn parse_many(
    scripts: &[(&str, &str)],
    defines: &[(String, String)],
) -> Result<Vec<Script>, ScriptError> {
    let mut p = Parser {
        script: "",
        names: Names {
            list: Vec::new(),
            index: HashMap::new(),
        },
        assigned: Vec::new(),
        result_prefixes: Vec::new(),
        warnings: Vec::new(),
    };
    for auto in super::AUTOMATIC {
        p.names.var(auto);
        p.assigned.push(auto.to_string());
    }
    let defined: Vec<(usize, String)> = defines
        .iter()
        .map(|(n, v)| {
            p.assigned.push(n.clone());
            (p.names.var(n), v.clone())
        })
        .collect();
    let raws: Vec<Vec<Raw>> = scripts.iter().map(|(_, text)| scan(text)).collect();
    // First pass: every name something assigns, in any of the scripts, so an
    // expression or a `:name` in SQL can be checked against them wherever it comes.
    for r in raws.iter().flatten() {
        if let Raw::Meta { text, .. } = r {
            let mut words = text.split_whitespace();
            match words.next().map(str::to_ascii_lowercase).as_deref() {
                Some("set" | "setshell" | "randstring") => {
                    if let Some(v) = words.next() {
                        p.assigned.push(v.to_string());
                    }
                }
                Some("gset" | "aset") => p.result_prefixes.push(words.next().unwrap_or("").to_string()),
                _ => {}
            }
        }
    }
    let mut parsed = Vec::with_capacity(scripts.len());
    for (&(name, _), raw) in scripts.iter().zip(raws) {
        p.script = name;
        let (commands, texts, lines) = commands(raw, &mut p)?;
        parsed.push(Script {
            name: name.to_string(),
            commands,
            texts,
            variables: Vec::new(),
            index: HashMap::new(),
            defined: defined.clone(),
            warnings: std::mem::take(&mut p.warnings),
            number: 0,
            lines,
            goes_on_after: &[],
        });
    }
    for s in &mut parsed {
        s.variables = p.names.list.clone();
        s.index = p.names.index.clone();
    }
    Ok(parsed)
}

/// One script's pieces as commands, with each command's text.
#[allow(clippy::type_complexity)]
fn commands(raw: Vec<Raw>, p: &mut Parser) -> Result<(Vec<Command>, Vec<String>, Vec<usize>), ScriptError> {
    let mut commands: Vec<Command> = Vec::new();
    let mut texts = Vec::new();
    let mut lines = Vec::new();
    let mut sql_count = 0;
    for r in raw {
        match r {
            Raw::Sql {
                text,
                line,
                statements,
            } => {
                commands.push(Command::Sql(p.sql(&text, sql_count, statements)));
                sql_count += 1;
                texts.push(one_line(&text));
                lines.push(line);
            }
            Raw::Meta { text, line } => {
                let word = text.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
                if word == "gset" || word == "aset" {
                    let args: Vec<&str> = text.split_whitespace().skip(1).collect();
                    if args.len() > 1 {
                        return Err(p.err(
                            line,
                            format!("\\{word}: too many arguments; it takes one optional variable prefix"),
                        ));
                    }
                    let prefix = args.first().copied().unwrap_or("").to_string();
                    match commands.last_mut() {
                        Some(Command::Sql(q)) if q.results == Results::Discard => {
                            q.results = if word == "gset" {
                                Results::Gset(prefix)
                            } else {
                                Results::Aset(prefix)
                            };
                            let last = texts.last_mut().expect("a text per command");
                            *last = format!("{last} \\{word}");
                        }
                        _ => {
                            return Err(p.err(
                                line,
                                format!("\\{word} must follow an SQL command (write it after the query, e.g. SELECT 1 AS x \\{word})"),
                            ))
                        }
                    }
                    continue;
                }
                commands.push(p.meta(&text, line)?);
                texts.push(format!("\\{}", one_line(&text)));
                lines.push(line);
            }
        }
    }
    link_conditionals(&mut commands, &lines, p)?;
    check_pipelines(&commands, &lines, p);
    Ok((commands, texts, lines))
}

/// Checks `\if` blocks as pgbench's `CheckConditional` does and fills in where each
/// branch goes.
fn link_conditionals(commands: &mut [Command], lines: &[usize], p: &Parser) -> Result<(), ScriptError> {
    // Open blocks: the indices of their \if, \elif and \else so far.
    let mut open: Vec<Vec<usize>> = Vec::new();
    for i in 0..commands.len() {
        match &commands[i] {
            Command::If { .. } => open.push(vec![i]),
            Command::Elif { .. } | Command::Else { .. } => {
                let what = if matches!(commands[i], Command::Elif { .. }) {
                    "\\elif"
                } else {
                    "\\else"
                };
                let Some(block) = open.last_mut() else {
                    return Err(p.err(
                        lines[i],
                        format!("{what} without matching \\if; add the \\if or remove it"),
                    ));
                };
                let last = *block.last().expect("a block starts with its \\if");
                if matches!(commands[last], Command::Else { .. }) {
                    return Err(p.err(
                        lines[i],
                        format!("{what} after \\else; a block has at most one \\else, last"),
                    ));
                }
                block.push(i);
            }
            Command::Endif => {
                let Some(block) = open.pop() else {
                    return Err(p.err(
                        lines[i],
                        "\\endif without matching \\if; add the \\if or remove it",
                    ));
                };
                for (k, &at) in block.iter().enumerate() {
                    let next = block.get(k + 1).copied().unwrap_or(i);
                    match &mut commands[at] {
                        Command::If { next: n, .. } => *n = next,
                        Command::Elif { next: n, end, .. } => {
                            *n = next;
                            *end = i;
                        }
                        Command::Else { end } => *end = i,
                        _ => unreachable!("blocks hold only \\if, \\elif and \\else"),
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(block) = open.last() {
        return Err(p.err(
            lines[block[0]],
            "\\if without matching \\endif; close the block with \\endif",
        ));
    }
    Ok(())
}

/// Pipelines must open and close in the script, and hold only SQL (no `\gset`/`\aset`,
/// whose rows a pipeline does not wait for). pgbench finds these while running and
/// aborts the client, and so does connbench's executor; here they become warnings,
/// printed before the run. A script with `\if` blocks gets none: which commands run
/// depends on its branches, which only running shows.
fn check_pipelines(commands: &[Command], lines: &[usize], p: &mut Parser) {
    if commands.iter().any(|c| matches!(c, Command::If { .. })) {
        return;
    }
    let mut open: Option<usize> = None;
    let aborts = " (pgbench aborts the client there, and so does connbench)";
    for (i, c) in commands.iter().enumerate() {
        let warning = match c {
            Command::StartPipeline if open.is_some() => Some(format!(
                "\\startpipeline: already in pipeline mode; end the first with \\endpipeline{aborts}"
            )),
            Command::StartPipeline => {
                open = Some(i);
                None
            }
            Command::SyncPipeline | Command::EndPipeline if open.is_none() => {
                let what = if matches!(c, Command::SyncPipeline) {
                    "\\syncpipeline"
                } else {
                    "\\endpipeline"
                };
                Some(format!("{what}: not in pipeline mode; start one with \\startpipeline{aborts}"))
            }
            Command::EndPipeline => {
                open = None;
                None
            }
            Command::Sql(q) if open.is_some() && q.results != Results::Discard => Some(format!(
                "\\gset and \\aset are not allowed in pipeline mode; move the query out of the pipeline{aborts}"
            )),
            _ => None,
        };
        if let Some(w) = warning {
            let w = p.err(lines[i], w);
            p.warnings.push(w);
        }
    }
    if let Some(i) = open {
        let w = p.err(
            lines[i],
            format!("\\startpipeline without \\endpipeline: the script ends with the pipeline open; add \\endpipeline{aborts}"),
        );
        p.warnings.push(w);
    }
}

/// A command's text on one line: its lines' words joined by single spaces.
fn one_line(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_a_leading_integer_as_c_does() {
        assert_eq!(atoi(" -12ms"), Some(-12));
        assert_eq!(atoi("x"), None);
    }
}
