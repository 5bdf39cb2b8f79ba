//! The scanner: a script's text cut into SQL commands and meta-commands, each with its
//! first line, before anything is understood (psqlscan.l's rules for where a SQL
//! command ends: a `;` outside quotes, comments and parentheses, or a backslash that
//! starts a meta-command), and pgbench's rules for variable names. Apart from the
//! command parser (`command`) because it knows only bytes, not commands.

/// A piece of script text before it is understood: a SQL command or a meta-command.
#[derive(Debug)]
pub(super) enum Raw {
    Sql {
        text: String,
        line: usize,
        statements: usize,
    },
    Meta {
        text: String,
        line: usize,
    },
}

/// Cuts a script into SQL commands and meta-commands, each with its first line.
pub(super) fn scan(text: &str) -> Vec<Raw> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut sql = String::new();
    let mut statements = 1;
    let mut sql_line = 1;
    let mut line = 1;
    let mut depth = 0usize;
    let mut i = 0;
    let finish = |sql: &mut String, statements: &mut usize, line: usize, out: &mut Vec<Raw>| {
        if !sql.trim().is_empty() {
            out.push(Raw::Sql {
                text: sql.trim().to_string(),
                line,
                statements: *statements,
            });
        }
        sql.clear();
        *statements = 1;
    };
    while i < b.len() {
        let c = b[i];
        let blank = sql.trim().is_empty();
        if blank && (c == b'-' && b.get(i + 1) == Some(&b'-')) {
            // A comment before a command is not part of it.
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if blank && c.is_ascii_whitespace() {
            if c == b'\n' {
                line += 1;
            }
            i += 1;
            continue;
        }
        if blank && c != b'\\' {
            sql_line = line;
        }
        // The end of the quoted or commented span starting at i, if one does.
        let span_end = match c {
            b'\'' => {
                let escapes = i > 0
                    && matches!(b[i - 1], b'E' | b'e')
                    && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_'));
                Some(quoted_end(b, i, b'\'', escapes))
            }
            b'"' => Some(quoted_end(b, i, b'"', false)),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                let mut j = i;
                while j < b.len() && b[j] != b'\n' {
                    j += 1;
                }
                Some(j)
            }
            b'/' if b.get(i + 1) == Some(&b'*') => Some(comment_end(b, i)),
            b'$' => dollar_end(b, i),
            _ => None,
        };
        if let Some(end) = span_end {
            let piece = &text[i..end];
            line += piece.matches('\n').count();
            sql.push_str(piece);
            i = end;
            continue;
        }
        match c {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b'\n' => line += 1,
            _ => {}
        }
        if c == b';' && depth == 0 {
            sql.push(';');
            i += 1;
            finish(&mut sql, &mut statements, sql_line, &mut out);
            continue;
        }
        if c == b'\\' {
            if b.get(i + 1) == Some(&b';') {
                // `\;`: one more statement in the same command.
                sql.push(';');
                statements += 1;
                i += 2;
                continue;
            }
            finish(&mut sql, &mut statements, sql_line, &mut out);
            let start_line = line;
            let mut meta = String::new();
            i += 1;
            while i < b.len() && b[i] != b'\n' {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                    // A continued line.
                    meta.push(' ');
                    line += 1;
                    i += 2;
                    continue;
                }
                let len = utf8_len(b[i]).min(b.len() - i);
                meta.push_str(&text[i..i + len]);
                i += len;
            }
            out.push(Raw::Meta {
                text: meta.trim_end().to_string(),
                line: start_line,
            });
            continue;
        }
        let len = utf8_len(c).min(b.len() - i);
        sql.push_str(&text[i..i + len]);
        i += len;
    }
    finish(&mut sql, &mut statements, sql_line, &mut out);
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xff => 4,
        // A continuation byte cannot start a character of a &str; never reached.
        _ => 1,
    }
}

/// The end (exclusive) of a quoted span opened at `start`; doubled quotes stay inside,
/// and so does a backslash-escaped one in an E'' string. An unclosed quote runs to the end.
fn quoted_end(b: &[u8], start: usize, q: u8, escapes: bool) -> usize {
    let mut j = start + 1;
    while j < b.len() {
        if escapes && b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return j + 1;
        }
        j += 1;
    }
    b.len()
}

/// The end of a (nestable) `/* */` comment opened at `start`.
fn comment_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0;
    let mut j = start;
    while j + 1 < b.len() {
        if b[j] == b'/' && b[j + 1] == b'*' {
            depth += 1;
            j += 2;
        } else if b[j] == b'*' && b[j + 1] == b'/' {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return j;
            }
        } else {
            j += 1;
        }
    }
    b.len()
}

/// The end of a dollar-quoted string (`$$...$$`, `$tag$...$tag$`) opened at `start`, or
/// `None` when the `$` opens none (a `$1` parameter, or inside an identifier).
fn dollar_end(b: &[u8], start: usize) -> Option<usize> {
    if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
        return None;
    }
    let mut j = start + 1;
    while j < b.len()
        && (b[j].is_ascii_alphabetic() || b[j] == b'_' || (j > start + 1 && b[j].is_ascii_digit()))
    {
        j += 1;
    }
    if b.get(j) != Some(&b'$') {
        return None;
    }
    let tag = &b[start..=j];
    let mut k = j + 1;
    while k + tag.len() <= b.len() {
        if &b[k..k + tag.len()] == tag {
            return Some(k + tag.len());
        }
        k += 1;
    }
    Some(b.len())
}

/// pgbench's `valid_variable_name`: a letter, `_` or non-ASCII first, then also digits.
pub fn valid_variable_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || !c.is_ascii())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())
}

/// The variable name after a `:` at `b[i]`, as pgbench's `parseVariable` reads SQL.
pub(super) fn variable_at(text: &str, i: usize) -> Option<&str> {
    let rest = &text[i + 1..];
    let end = rest
        .char_indices()
        .find(|&(k, c)| {
            let ok = c.is_ascii_alphabetic() || c == '_' || !c.is_ascii() || (k > 0 && c.is_ascii_digit());
            !ok
        })
        .map_or(rest.len(), |(k, _)| k);
    (end > 0).then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<String> {
        scan(text)
            .into_iter()
            .map(|r| match r {
                Raw::Sql {
                    text,
                    line,
                    statements,
                } => format!("{line}:sql{statements}:{text}"),
                Raw::Meta { text, line } => format!("{line}:meta:{text}"),
            })
            .collect()
    }

    #[test]
    fn scanning_splits_sql_and_meta_commands_like_psqlscan() {
        assert_eq!(
            kinds("-- a comment\nSELECT 1;\n\\set x 1\nSELECT ';', \"a;b\", $$;$$, $t$;$t$ /* ; */\n  , (1;2)\n;"),
            vec![
                "2:sql1:SELECT 1;",
                "3:meta:set x 1",
                "4:sql1:SELECT ';', \"a;b\", $$;$$, $t$;$t$ /* ; */\n  , (1;2)\n;",
            ]
        );
        assert_eq!(
            kinds("SELECT 1 \\; SELECT 2 \\gset p_\nSELECT 1; \\set y 2\nSELECT E'\\';' AS x"),
            vec![
                "1:sql2:SELECT 1 ; SELECT 2",
                "1:meta:gset p_",
                "2:sql1:SELECT 1;",
                "2:meta:set y 2",
                "3:sql1:SELECT E'\\';' AS x",
            ]
        );
        assert_eq!(kinds("\\set x 1 + \\\n 2\n"), vec!["1:meta:set x 1 +   2"]);
        assert_eq!(kinds("SELECT $1, a$b$c;"), vec!["1:sql1:SELECT $1, a$b$c;"]);
        assert!(kinds("-- only a comment\n\n").is_empty());
    }

    #[test]
    fn variable_names_follow_pgbench() {
        assert!(valid_variable_name("a_1"));
        assert!(valid_variable_name("_x"));
        assert!(valid_variable_name("é"));
        assert!(!valid_variable_name("1x"));
        assert!(!valid_variable_name(""));
        assert!(!valid_variable_name("a-b"));
        assert_eq!(variable_at(":abc1 x", 0), Some("abc1"));
        assert_eq!(variable_at(":1", 0), None);
    }
}
