//! Statement fingerprints and literal redaction, on one small SQL lexer.
//!
//! A fingerprint groups the statements an application sends that differ only in their
//! values, as PostgreSQL's pg_stat_statements and MySQL's statement digests do: literals
//! become placeholders (`$1`, `$2`, ... on PostgreSQL, numbered after the highest `$n`
//! the text already has; `?` on MySQL), a list of only values after `IN` becomes
//! `IN (...)` and a multi-row `VALUES` keeps its first row (so the list's length does
//! not split a statement in two), comments go, whitespace becomes single spaces and
//! keywords upper case. Identifiers keep their case (MySQL's table names can be case
//! sensitive). The id is FNV-1a 64 of the normalised text's UTF-8 bytes: stable across
//! versions and machines, and easy to recompute elsewhere.
//!
//! [`redact_literals`] is the same lexer used for `--redact-values`: the text stays as
//! sent (comments and spacing included), each literal replaced by a placeholder, and
//! only each literal's kind and length kept.
//!
//! The lexer knows both dialects' quoting: `'...'` with `''` (and backslash escapes on
//! MySQL and in PostgreSQL's `E'...'`), PostgreSQL's `$tag$...$tag$` and `"identifier"`,
//! MySQL's `"string"`, `` `identifier` `` and `#` comments, nested `/* */` on
//! PostgreSQL. A sign directly before a number where a value cannot end (after an
//! operator, `(`, `,` or a keyword) belongs to the literal, as in pg_stat_statements:
//! `abalance + -1234` is `abalance + $1`. `TRUE`, `FALSE` and `NULL` stay keywords.

use super::event::Literal;

/// Whose SQL: quoting and placeholders differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Mysql,
}

/// A statement's normalised text and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub id: u64,
    pub text: String,
}

impl Fingerprint {
    /// The id as 16 hex digits: how JSON carries it (a number above 2^53 would lose
    /// digits in JavaScript and jq).
    pub fn id_hex(&self) -> String {
        format!("{:016x}", self.id)
    }
}

/// The fingerprint of `sql`.
pub fn fingerprint(sql: &str, dialect: Dialect) -> Fingerprint {
    let text = normalise(sql, dialect);
    Fingerprint {
        id: fnv1a(text.as_bytes()),
        text,
    }
}

/// `sql` with each literal replaced by a placeholder, and each literal's kind and length.
pub fn redact_literals(sql: &str, dialect: Dialect) -> (String, Vec<Literal>) {
    let tokens = lex(sql, dialect);
    let mut next = first_free_param(sql, &tokens, dialect);
    let mut out = String::with_capacity(sql.len());
    let mut literals = Vec::new();
    let mut at = 0;
    for t in &tokens {
        let Some(kind) = t.kind.literal_kind() else {
            continue;
        };
        out.push_str(&sql[at..t.start]);
        placeholder(&mut out, dialect, &mut next);
        literals.push(Literal {
            kind: kind.into(),
            len: (t.end - t.start) as u64,
        });
        at = t.end;
    }
    out.push_str(&sql[at..]);
    (out, literals)
}

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn placeholder(out: &mut String, dialect: Dialect, next: &mut u32) {
    match dialect {
        Dialect::Postgres => {
            out.push('$');
            out.push_str(&next.to_string());
            *next += 1;
        }
        Dialect::Mysql => out.push('?'),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Word,
    Keyword,
    QuotedIdent,
    Str,
    Num,
    Bits,
    Param,
    Punct,
    Comment,
}

impl Kind {
    fn literal_kind(self) -> Option<&'static str> {
        match self {
            Kind::Str => Some("string"),
            Kind::Num => Some("number"),
            Kind::Bits => Some("bits"),
            _ => None,
        }
    }

    fn is_value(self) -> bool {
        matches!(self, Kind::Str | Kind::Num | Kind::Bits | Kind::Param)
    }
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

const KEYWORDS: &[&str] = &[
    "ALL",
    "ALTER",
    "ANALYZE",
    "AND",
    "ANY",
    "ARRAY",
    "AS",
    "ASC",
    "BEGIN",
    "BETWEEN",
    "BY",
    "CASE",
    "CAST",
    "COMMIT",
    "CONFLICT",
    "COPY",
    "CREATE",
    "CROSS",
    "DEALLOCATE",
    "DEFAULT",
    "DELETE",
    "DESC",
    "DISTINCT",
    "DO",
    "DROP",
    "DUPLICATE",
    "ELSE",
    "END",
    "EXECUTE",
    "EXISTS",
    "EXPLAIN",
    "FALSE",
    "FETCH",
    "FIRST",
    "FOR",
    "FROM",
    "FULL",
    "GROUP",
    "HAVING",
    "IF",
    "IGNORE",
    "ILIKE",
    "IN",
    "INDEX",
    "INNER",
    "INSERT",
    "INTERVAL",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "LAST",
    "LEFT",
    "LIKE",
    "LIMIT",
    "LOCK",
    "LOCKED",
    "NEXT",
    "NOT",
    "NOTHING",
    "NOWAIT",
    "NULL",
    "NULLS",
    "OFFSET",
    "ON",
    "ONLY",
    "OR",
    "ORDER",
    "OUTER",
    "OVER",
    "PARTITION",
    "PREPARE",
    "PRIMARY",
    "RELEASE",
    "REPLACE",
    "RETURNING",
    "RIGHT",
    "ROLLBACK",
    "ROW",
    "ROWS",
    "SAVEPOINT",
    "SELECT",
    "SET",
    "SHARE",
    "SHOW",
    "SKIP",
    "SOME",
    "START",
    "STDIN",
    "STDOUT",
    "TABLE",
    "THEN",
    "TO",
    "TRANSACTION",
    "TRUE",
    "TRUNCATE",
    "UNION",
    "UNIQUE",
    "UPDATE",
    "USING",
    "VACUUM",
    "VALUES",
    "WHEN",
    "WHERE",
    "WINDOW",
    "WITH",
    "WORK",
];

/// Keywords after which a value may end (a sign after them is an operator).
const VALUE_KEYWORDS: &[&str] = &["TRUE", "FALSE", "NULL", "END"];

fn is_keyword(w: &str) -> bool {
    w.len() <= 12 && KEYWORDS.binary_search(&w.to_ascii_uppercase().as_str()).is_ok()
}

/// Operators of more than one character, longest first.
const OPERATORS: &[&str] = &[
    "->>", "#>>", "::", "<=", ">=", "<>", "!=", "||", "->", "#>", "@>", "<@", ":=", "=>", "&&", "<<", ">>",
];

fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

fn lex(sql: &str, d: Dialect) -> Vec<Token> {
    let s = sql.as_bytes();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let start = i;
        let next = s.get(i + 1).copied();
        let kind = if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if let Some(end) = line_comment_end(s, i, d) {
            i = end;
            Kind::Comment
        } else if c == b'/' && next == Some(b'*') {
            i = block_comment_end(s, i, d == Dialect::Postgres);
            Kind::Comment
        } else if c == b'\'' {
            i = quoted_end(s, i, b'\'', d == Dialect::Mysql);
            Kind::Str
        } else if c == b'"' {
            i = quoted_end(s, i, b'"', d == Dialect::Mysql);
            if d == Dialect::Mysql {
                Kind::Str
            } else {
                Kind::QuotedIdent
            }
        } else if c == b'`' && d == Dialect::Mysql {
            i = quoted_end(s, i, b'`', false);
            Kind::QuotedIdent
        } else if c == b'$' && d == Dialect::Postgres && next.is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
            while i < s.len() && s[i].is_ascii_digit() {
                i += 1;
            }
            Kind::Param
        } else if c == b'$' && d == Dialect::Postgres && dollar_tag(s, i).is_some() {
            i = dollar_end(s, i);
            Kind::Str
        } else if c == b'?' && d == Dialect::Mysql {
            i += 1;
            Kind::Param
        } else if c.is_ascii_digit() || (c == b'.' && next.is_some_and(|b| b.is_ascii_digit())) {
            i = number_end(s, i);
            Kind::Num
        } else if (c == b'-' || c == b'+')
            && (next.is_some_and(|b| b.is_ascii_digit())
                || (next == Some(b'.') && s.get(i + 2).is_some_and(|b| b.is_ascii_digit())))
            && !value_ends(sql, out.last())
        {
            i = number_end(s, i + 1);
            Kind::Num
        } else if word_byte(c) {
            let (end, kind) = word(sql, i, d);
            i = end;
            kind
        } else {
            i += OPERATORS
                .iter()
                .find(|op| s[i..].starts_with(op.as_bytes()))
                .map_or(1, |op| op.len());
            Kind::Punct
        };
        out.push(Token { kind, start, end: i });
    }
    out
}

/// The end of a `--` (MySQL: `-- `) or MySQL `#` comment starting at `i`, if one does.
fn line_comment_end(s: &[u8], i: usize, d: Dialect) -> Option<usize> {
    let dashes = s[i..].starts_with(b"--")
        && (d == Dialect::Postgres
            || s.get(i + 2)
                .is_none_or(|b| b.is_ascii_whitespace() || b.is_ascii_control()));
    let hash = s[i] == b'#' && d == Dialect::Mysql;
    (dashes || hash).then(|| s[i..].iter().position(|&b| b == b'\n').map_or(s.len(), |p| i + p))
}

/// A word starting at `i`: a keyword, an identifier, or a literal with a one-letter
/// prefix glued to its quote (E'..' B'..' X'..' N'..').
fn word(sql: &str, i: usize, d: Dialect) -> (usize, Kind) {
    let s = sql.as_bytes();
    let c = s[i].to_ascii_uppercase();
    if matches!(c, b'E' | b'B' | b'X' | b'N') && s.get(i + 1) == Some(&b'\'') {
        let backslash = d == Dialect::Mysql || c == b'E';
        let end = quoted_end(s, i + 1, b'\'', backslash);
        return (
            end,
            if matches!(c, b'B' | b'X') {
                Kind::Bits
            } else {
                Kind::Str
            },
        );
    }
    let mut j = i;
    while j < s.len() && word_byte(s[j]) {
        j += 1;
    }
    (
        j,
        if is_keyword(&sql[i..j]) {
            Kind::Keyword
        } else {
            Kind::Word
        },
    )
}

/// Whether a value can end at `t`, so that a sign after it is a binary operator.
fn value_ends(sql: &str, t: Option<&Token>) -> bool {
    let Some(t) = t else { return false };
    match t.kind {
        Kind::Word | Kind::QuotedIdent | Kind::Str | Kind::Num | Kind::Bits | Kind::Param => true,
        Kind::Keyword => VALUE_KEYWORDS
            .iter()
            .any(|k| sql[t.start..t.end].eq_ignore_ascii_case(k)),
        Kind::Punct => matches!(&sql[t.start..t.end], ")" | "]"),
        Kind::Comment => false,
    }
}

fn block_comment_end(s: &[u8], mut i: usize, nested: bool) -> usize {
    let mut depth = 0usize;
    while i < s.len() {
        if s[i..].starts_with(b"/*") && (nested || depth == 0) {
            depth += 1;
            i += 2;
        } else if s[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    s.len()
}

/// The end of a quoted token opening at `i`: a doubled quote continues it, and so does a
/// backslash escape where the dialect has them. Unterminated runs to the end.
fn quoted_end(s: &[u8], i: usize, q: u8, backslash: bool) -> usize {
    let mut j = i + 1;
    while j < s.len() {
        if backslash && s[j] == b'\\' {
            j += 2;
        } else if s[j] == q {
            if s.get(j + 1) == Some(&q) {
                j += 2;
            } else {
                return j + 1;
            }
        } else {
            j += 1;
        }
    }
    s.len()
}

/// The tag of a dollar quote opening at `i` (`$$` or `$tag$`), if one does.
fn dollar_tag(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if s.get(j).is_some_and(|b| b.is_ascii_digit()) {
        return None;
    }
    while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_' || s[j] >= 0x80) {
        j += 1;
    }
    (s.get(j) == Some(&b'$')).then_some(j + 1)
}

fn dollar_end(s: &[u8], i: usize) -> usize {
    let Some(open_end) = dollar_tag(s, i) else {
        return s.len();
    };
    let tag = &s[i..open_end];
    s[open_end..]
        .windows(tag.len())
        .position(|w| w == tag)
        .map_or(s.len(), |p| open_end + p + tag.len())
}

fn number_end(s: &[u8], mut i: usize) -> usize {
    if s.get(i) == Some(&b'0')
        && s.get(i + 1)
            .is_some_and(|b| matches!(b, b'x' | b'X' | b'b' | b'B' | b'o' | b'O'))
    {
        i += 2;
        while i < s.len() && (s[i].is_ascii_hexdigit() || s[i] == b'_') {
            i += 1;
        }
        return i;
    }
    let digits = |mut i: usize| {
        while i < s.len() && (s[i].is_ascii_digit() || s[i] == b'_') {
            i += 1;
        }
        i
    };
    i = digits(i);
    if s.get(i) == Some(&b'.') {
        i = digits(i + 1);
    }
    if s.get(i).is_some_and(|b| matches!(b, b'e' | b'E')) {
        let mut j = i + 1;
        if s.get(j).is_some_and(|b| matches!(b, b'+' | b'-')) {
            j += 1;
        }
        if s.get(j).is_some_and(|b| b.is_ascii_digit()) {
            i = digits(j);
        }
    }
    i
}

/// PostgreSQL: one more than the highest `$n` in the text; MySQL has no numbers.
fn first_free_param(sql: &str, tokens: &[Token], d: Dialect) -> u32 {
    if d == Dialect::Mysql {
        return 1;
    }
    tokens
        .iter()
        .filter(|t| t.kind == Kind::Param)
        .filter_map(|t| sql[t.start + 1..t.end].parse::<u32>().ok())
        .max()
        .map_or(1, |m| m.saturating_add(1))
}

fn normalise(sql: &str, d: Dialect) -> String {
    let all = lex(sql, d);
    let tokens: Vec<Token> = all.iter().copied().filter(|t| t.kind != Kind::Comment).collect();
    let text = |t: &Token| &sql[t.start..t.end];
    let mut next = first_free_param(sql, &all, d);
    let mut out = String::with_capacity(sql.len());
    let mut prev: Option<(Kind, &str)> = None;
    // After VALUES' first row, the index to go on from (the other rows skipped).
    let mut skip: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < tokens.len() {
        if let Some((_, to)) = skip.filter(|&(from, _)| from == i) {
            skip = None;
            i = to;
            continue;
        }
        let t = &tokens[i];
        let is_kw = |w: &str| t.kind == Kind::Keyword && text(t).eq_ignore_ascii_case(w);
        // IN (v, v, ...) of values only.
        if let Some(end) = is_kw("IN").then(|| value_list(sql, &tokens, i + 1)).flatten() {
            space(&mut out, prev, Kind::Keyword, "IN");
            out.push_str("IN (...)");
            prev = Some((Kind::Punct, ")"));
            i = end;
            continue;
        }
        // VALUES (row), (row), ...: the first row stands for all of them.
        if let Some(first_end) = is_kw("VALUES").then(|| value_list(sql, &tokens, i + 1)).flatten() {
            let mut end = first_end;
            while let Some(e) = tokens
                .get(end)
                .filter(|t| text(t) == ",")
                .and_then(|_| value_list(sql, &tokens, end + 1))
            {
                end = e;
            }
            skip = Some((first_end, end));
        }
        let (kind, piece) = match t.kind {
            Kind::Keyword => (Kind::Keyword, text(t).to_ascii_uppercase()),
            k if k.literal_kind().is_some() => {
                let mut p = String::new();
                placeholder(&mut p, d, &mut next);
                (Kind::Param, p)
            }
            k => (k, text(t).to_string()),
        };
        space(&mut out, prev, kind, &piece);
        out.push_str(&piece);
        prev = Some((kind, text(t)));
        i += 1;
    }
    while out.ends_with(';') {
        out.pop();
        while out.ends_with(' ') {
            out.pop();
        }
    }
    out
}

/// If a parenthesised list of values only (literals, placeholders, NULL, DEFAULT,
/// TRUE, FALSE) starts at `i`, the index just after its `)`.
fn value_list(sql: &str, tokens: &[Token], i: usize) -> Option<usize> {
    let text = |t: &Token| &sql[t.start..t.end];
    if tokens.get(i).map(text) != Some("(") {
        return None;
    }
    let mut j = i + 1;
    loop {
        let t = tokens.get(j)?;
        let simple = t.kind.is_value()
            || (t.kind == Kind::Keyword
                && ["NULL", "DEFAULT", "TRUE", "FALSE"]
                    .iter()
                    .any(|k| text(t).eq_ignore_ascii_case(k)));
        if !simple {
            return None;
        }
        match tokens.get(j + 1).map(text)? {
            "," => j += 2,
            ")" => return Some(j + 2),
            _ => return None,
        }
    }
}

/// A space between the previous piece and the next, unless punctuation hugs them.
fn space(out: &mut String, prev: Option<(Kind, &str)>, kind: Kind, next: &str) {
    let Some((pk, pt)) = prev else { return };
    let hug_after = matches!(pt, "(" | "[" | "." | "::");
    let hug_before = matches!(next, ")" | "]" | "," | ";" | "." | "::")
        || (next == "(" && matches!(pk, Kind::Word | Kind::QuotedIdent))
        || (next == "[" && kind == Kind::Punct);
    if !(hug_after || hug_before) {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(s: &str) -> String {
        fingerprint(s, Dialect::Postgres).text
    }

    fn my(s: &str) -> String {
        fingerprint(s, Dialect::Mysql).text
    }

    #[test]
    fn pgbench_statements_fingerprint_as_pg_stat_statements_shows_them() {
        // pgbench's tpcb-like transaction as -M simple sends it, values filled in.
        assert_eq!(
            pg("UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 5;"),
            "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
        );
        assert_eq!(
            pg("SELECT abalance FROM pgbench_accounts WHERE aid = 77123;"),
            "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
        );
        assert_eq!(
            pg("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (3, 1, 5, 4, CURRENT_TIMESTAMP);"),
            "INSERT INTO pgbench_history(tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)"
        );
        assert_eq!(pg("BEGIN;"), "BEGIN");
        assert_eq!(pg("END;"), "END");
        // -M extended: the text already has parameters; literals number after them.
        assert_eq!(
            pg("select abalance from pgbench_accounts where aid = $1 and bid > 10"),
            "SELECT abalance FROM pgbench_accounts WHERE aid = $1 AND bid > $2"
        );
        let a = fingerprint(
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1",
            Dialect::Postgres,
        );
        let b = fingerprint(
            "select  abalance\n  from pgbench_accounts -- the balance\n where aid = 99999",
            Dialect::Postgres,
        );
        assert_eq!(a, b);
        assert_eq!(a.id_hex().len(), 16);
        // FNV-1a 64's published test vector.
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn keywords_are_sorted_for_binary_search() {
        assert!(KEYWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sysbench_statements_fingerprint_as_mysql_digests_group_them() {
        assert_eq!(
            my("SELECT c FROM sbtest1 WHERE id=5012"),
            "SELECT c FROM sbtest1 WHERE id = ?"
        );
        assert_eq!(
            my("SELECT c FROM sbtest2 WHERE id BETWEEN 10 AND 109 ORDER BY c"),
            "SELECT c FROM sbtest2 WHERE id BETWEEN ? AND ? ORDER BY c"
        );
        assert_eq!(
            my("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"),
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"
        );
        assert_eq!(
            my("UPDATE sbtest1 SET c='0123-4567 it''s \\' here' WHERE id=7"),
            "UPDATE sbtest1 SET c = ? WHERE id = ?"
        );
        assert_eq!(
            my("INSERT INTO sbtest1 (id, k, c, pad) VALUES (1, 2, \"x\", 'y'), (3, 4, 'z', 'w')"),
            my("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 6, 'a', 'b')")
        );
        assert_eq!(
            my("SELECT SUM(k) FROM `sbtest1` WHERE id IN (1, 2, 3) # why"),
            "SELECT SUM(k) FROM `sbtest1` WHERE id IN (...)"
        );
        assert_eq!(
            my("select 1 from t where a in (4)"),
            my("SELECT 1 FROM t WHERE a IN (4,5,6,7)")
        );
        assert_eq!(my("SELECT 1--1"), "SELECT ? - ?", "MySQL's -- needs a space");
    }

    #[test]
    fn quoting_in_both_dialects_hides_no_literal_and_invents_none() {
        assert_eq!(
            pg("SELECT $$a 'b' $1$$, $x$y$x$, E'it\\'s', 'a''b'"),
            "SELECT $1, $2, $3, $4"
        );
        assert_eq!(
            pg("SELECT \"Weird \"\" col\" FROM t /* a /* nested */ 5 */"),
            "SELECT \"Weird \"\" col\" FROM t"
        );
        assert_eq!(
            pg("SELECT x'ff', b'01', 1.5e-3, .5, 0x1F, '2024-01-01'::date"),
            "SELECT $1, $2, $3, $4, $5, $6::date"
        );
        assert_eq!(pg("SELECT a-1, a - -1, f(-2)"), "SELECT a - $1, a - $2, f($3)");
        assert_eq!(pg("SELECT 'unterminated"), "SELECT $1");
        let (text, lits) = redact_literals(
            "SELECT * FROM t WHERE a = $1 AND b = 'secret' /* keep */ AND c = -42",
            Dialect::Postgres,
        );
        assert_eq!(
            text,
            "SELECT * FROM t WHERE a = $1 AND b = $2 /* keep */ AND c = $3"
        );
        assert_eq!(
            lits.iter().map(|l| (l.kind.as_str(), l.len)).collect::<Vec<_>>(),
            [("string", 8), ("number", 3)]
        );
        let (text, _) = redact_literals("SELECT \"secret\" FROM t WHERE id = ?", Dialect::Mysql);
        assert_eq!(text, "SELECT ? FROM t WHERE id = ?");
    }
}
