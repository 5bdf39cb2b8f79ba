//! Tokens of an expression (the argument of `\set`, `\if` and `\elif`), as pgbench's
//! exprscan.l cuts them: numbers (an integer that does not fit in 64 bits is an error,
//! except 9223372036854775808 right after a minus), `:variables`, names of functions
//! and case-insensitive keywords, and the operators. The parser reads the tokens; each
//! carries its byte offset so a message can point at it.

/// One token and where it starts in the expression's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub at: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Int(i64),
    /// 9223372036854775808: only valid as the operand of a unary minus.
    MaxIntPlusOne,
    Double(f64),
    Var(String),
    Ident(String),
    Null,
    Bool(bool),
    And,
    Or,
    Not,
    Is,
    IsNull,
    NotNull,
    Case,
    When,
    Then,
    Else,
    End,
    /// An operator: `+ - * / % = < > <= >= <> != & | # ~ << >>`.
    Op(&'static str),
    Open,
    Close,
    Comma,
}

/// A lexing problem: what, and the byte offset where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct LexError {
    pub why: String,
    pub at: usize,
}

fn is_alpha(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

fn is_alnum(c: char) -> bool {
    is_alpha(c) || c.is_ascii_digit()
}

/// Cuts `text` into tokens.
pub fn tokenize(text: &str) -> Result<Vec<Token>, LexError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        let take_while = |chars: &mut std::iter::Peekable<std::str::CharIndices>,
                          f: &dyn Fn(char) -> bool| {
            let mut end = at;
            while let Some(&(i, d)) = chars.peek() {
                if !f(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            end
        };
        let tok = match c {
            ' ' | '\t' | '\r' | '\n' | '\x0b' | '\x0c' => {
                chars.next();
                continue;
            }
            '0'..='9' | '.' => {
                let end = number_end(text, at);
                if end == at {
                    return Err(LexError {
                        why: "unexpected character \".\"".into(),
                        at,
                    });
                }
                while chars.peek().is_some_and(|&(i, _)| i < end) {
                    chars.next();
                }
                number(&text[at..end], at)?
            }
            ':' => {
                chars.next();
                let start = at + 1;
                let end = take_while(&mut chars, &is_alnum);
                if end <= start {
                    return Err(LexError {
                        why: "\":\" must be followed by a variable name".into(),
                        at,
                    });
                }
                Tok::Var(text[start..end].to_string())
            }
            c if is_alpha(c) => {
                let end = take_while(&mut chars, &is_alnum);
                let word = &text[at..end];
                keyword_or_ident(word)
            }
            '(' | ')' | ',' => {
                chars.next();
                match c {
                    '(' => Tok::Open,
                    ')' => Tok::Close,
                    _ => Tok::Comma,
                }
            }
            _ => {
                chars.next();
                let next = chars.peek().map(|&(_, d)| d);
                let two = |chars: &mut std::iter::Peekable<std::str::CharIndices>, op| {
                    chars.next();
                    Tok::Op(op)
                };
                match (c, next) {
                    ('<', Some('=')) => two(&mut chars, "<="),
                    ('>', Some('=')) => two(&mut chars, ">="),
                    ('<', Some('>')) => two(&mut chars, "<>"),
                    ('!', Some('=')) => two(&mut chars, "!="),
                    ('<', Some('<')) => two(&mut chars, "<<"),
                    ('>', Some('>')) => two(&mut chars, ">>"),
                    ('+', _) => Tok::Op("+"),
                    ('-', _) => Tok::Op("-"),
                    ('*', _) => Tok::Op("*"),
                    ('/', _) => Tok::Op("/"),
                    ('%', _) => Tok::Op("%"),
                    ('=', _) => Tok::Op("="),
                    ('<', _) => Tok::Op("<"),
                    ('>', _) => Tok::Op(">"),
                    ('&', _) => Tok::Op("&"),
                    ('|', _) => Tok::Op("|"),
                    ('#', _) => Tok::Op("#"),
                    ('~', _) => Tok::Op("~"),
                    (other, _) => {
                        return Err(LexError {
                            why: format!("unexpected character {other:?}"),
                            at,
                        })
                    }
                }
            }
        };
        out.push(Token { tok, at });
    }
    Ok(out)
}

/// A numeric constant's token (`s`, at `at`): an integer when it is all digits, else a
/// double.
fn number(s: &str, at: usize) -> Result<Tok, LexError> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        match s.parse::<i64>() {
            Ok(n) => Ok(Tok::Int(n)),
            Err(_) if s.trim_start_matches('0') == "9223372036854775808" => Ok(Tok::MaxIntPlusOne),
            Err(_) => Err(LexError {
                why: format!("bigint constant overflow ({s}); integers must fit in 64 bits"),
                at,
            }),
        }
    } else {
        let d: f64 = s.parse().map_err(|_| LexError {
            why: format!("{s} is not a number"),
            at,
        })?;
        // pgbench refuses a constant strtod overflows (ERANGE) rather than
        // run with infinity.
        if d.is_infinite() {
            return Err(LexError {
                why: format!("double constant overflow ({s}); doubles must be below 1.8E308"),
                at,
            });
        }
        Ok(Tok::Double(d))
    }
}

/// A word's token: a keyword (in any case) or an identifier (a function's name).
fn keyword_or_ident(word: &str) -> Tok {
    match word.to_ascii_lowercase().as_str() {
        "null" => Tok::Null,
        "true" => Tok::Bool(true),
        "false" => Tok::Bool(false),
        "and" => Tok::And,
        "or" => Tok::Or,
        "not" => Tok::Not,
        "is" => Tok::Is,
        "isnull" => Tok::IsNull,
        "notnull" => Tok::NotNull,
        "case" => Tok::Case,
        "when" => Tok::When,
        "then" => Tok::Then,
        "else" => Tok::Else,
        "end" => Tok::End,
        _ => Tok::Ident(word.to_string()),
    }
}

/// The end of a number starting at `start`: `digits[.digits][e[+-]digits]` or
/// `.digits[e[+-]digits]`, as exprscan.l's patterns; `start` when there is none.
fn number_end(text: &str, start: usize) -> usize {
    let b = text.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let int_digits = i > start;
    if i < b.len() && b[i] == b'.' {
        let after = digits(i + 1);
        if !int_digits && after == i + 1 {
            return start;
        }
        i = after;
    } else if !int_digits {
        return start;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let end = digits(j);
        if end > j {
            i = end;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_words_and_operators() {
        assert_eq!(
            toks("1 2.5 .5 1e3 1.e2 :x_1 random( , ) <= <> != << >> ~ #"),
            vec![
                Tok::Int(1),
                Tok::Double(2.5),
                Tok::Double(0.5),
                Tok::Double(1000.0),
                Tok::Double(100.0),
                Tok::Var("x_1".into()),
                Tok::Ident("random".into()),
                Tok::Open,
                Tok::Comma,
                Tok::Close,
                Tok::Op("<="),
                Tok::Op("<>"),
                Tok::Op("!="),
                Tok::Op("<<"),
                Tok::Op(">>"),
                Tok::Op("~"),
                Tok::Op("#"),
            ]
        );
        assert_eq!(
            toks("NULL True and OR not IS isnull NotNull case when then else end"),
            vec![
                Tok::Null,
                Tok::Bool(true),
                Tok::And,
                Tok::Or,
                Tok::Not,
                Tok::Is,
                Tok::IsNull,
                Tok::NotNull,
                Tok::Case,
                Tok::When,
                Tok::Then,
                Tok::Else,
                Tok::End
            ]
        );
        assert_eq!(toks("9223372036854775808"), vec![Tok::MaxIntPlusOne]);
    }

    #[test]
    fn bad_input_is_an_error_with_its_place() {
        let e = tokenize("1 + 99999999999999999999").unwrap_err();
        assert_eq!(e.at, 4);
        assert!(e.why.contains("overflow"), "{}", e.why);
        assert_eq!(tokenize("1 $ 2").unwrap_err().at, 2);
        assert!(tokenize(": x").is_err());
        assert!(tokenize(".").is_err());
        assert!(tokenize("!").is_err());
        // pgbench's 002 TAP cases: a double constant past f64's range is refused.
        for big in ["1.0E309", ".1E310"] {
            let e = tokenize(big).unwrap_err();
            assert!(e.why.contains("double constant overflow"), "{big}: {}", e.why);
        }
        assert_eq!(toks("1.7E308"), [Tok::Double(1.7e308)]);
    }
}
