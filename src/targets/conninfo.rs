//! Conninfo text: libpq's `key=value` strings and `postgres://` URIs (and the
//! `mysql://` form's shared syntax) parsed into raw key/value pairs, the keys checked
//! against the ones connbench knows, and the text redacted for messages. Apart from
//! [`super::Target`] because it is pure string handling: it knows no defaults, no
//! environment and no validation of values.

use std::collections::BTreeMap;

use super::{is_target_name, TargetError};

/// Keys connbench understands (libpq's names, plus `label`).
pub(super) const KNOWN_KEYS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "sslmode",
    "sslrootcert",
    "sslsni",
    "channel_binding",
    "connect_timeout",
    "application_name",
    "options",
    "label",
];

/// libpq keys that change nothing connbench measures, accepted so that a conninfo copied
/// from an application works unchanged.
pub(super) const IGNORED_KEYS: &[&str] = &[
    "client_encoding",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "target_session_attrs",
];

/// libpq keys connbench does not implement; named in the error rather than ignored,
/// because ignoring them would measure a different connection than the user asked for.
pub(super) const UNSUPPORTED_KEYS: &[&str] = &[
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "sslnegotiation",
    "requirepeer",
    "require_auth",
    "krbsrvname",
    "gsslib",
    "gssencmode",
    "gssdelegation",
    "service",
    "replication",
    "load_balance_hosts",
    "tcp_user_timeout",
];

/// Quotes a conninfo value when it needs it (libpq: single quotes, `\'` and `\\`).
pub(super) fn quote(v: &str) -> String {
    if !v.is_empty() && !v.contains([' ', '\'', '\\', '\t', '\n']) {
        return v.to_string();
    }
    let mut s = String::with_capacity(v.len() + 2);
    s.push('\'');
    for c in v.chars() {
        if c == '\'' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('\'');
    s
}

/// Splits `NAME=conninfo` into its name and conninfo. A leading `key=` that is a
/// conninfo key is part of the conninfo, so `host=/tmp port=5` stays whole; the name form
/// needs a non-key name followed by a URI or by text that holds another `=`.
pub fn split_label(text: &str) -> (Option<&str>, &str) {
    let text = text.trim();
    if let Some((name, rest)) = text.split_once('=') {
        let rest_is_target = is_uri(rest) || is_mysql_uri(rest) || rest.contains('=');
        if is_target_name(name) && rest_is_target {
            return (Some(name), rest);
        }
    }
    (None, text)
}

pub(super) fn is_mysql_uri(s: &str) -> bool {
    s.starts_with("mysql://") || s.starts_with("mariadb://")
}

pub(super) fn is_uri(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

pub(super) fn check_keys(raw: &BTreeMap<String, String>, text: &str) -> Result<(), TargetError> {
    for key in raw.keys() {
        if KNOWN_KEYS.contains(&key.as_str()) || IGNORED_KEYS.contains(&key.as_str()) {
            continue;
        }
        if UNSUPPORTED_KEYS.contains(&key.as_str()) {
            return Err(TargetError::Unsupported {
                key: key.clone(),
                text: redact(text),
            });
        }
        return Err(TargetError::UnknownKey {
            key: key.clone(),
            text: redact(text),
            known: KNOWN_KEYS.join(", "),
        });
    }
    Ok(())
}

/// The target text with any password value replaced, for error messages.
pub fn redact(text: &str) -> String {
    let uri = |s: &str| is_uri(s) || is_mysql_uri(s);
    if uri(text) || text.split_once('=').is_some_and(|(_, r)| uri(r)) {
        // postgres://user:secret@host -> postgres://user:***@host
        if let Some(scheme_end) = text.find("://") {
            let after = &text[scheme_end + 3..];
            let auth_end = after.find(['/', '?']).unwrap_or(after.len());
            if let Some(at) = after[..auth_end].rfind('@') {
                if let Some(colon) = after[..at].find(':') {
                    let start = scheme_end + 3 + colon + 1;
                    let end = scheme_end + 3 + at;
                    let mut out = text.to_string();
                    out.replace_range(start..end, "***");
                    return redact_query_password(&out);
                }
            }
        }
        return redact_query_password(text);
    }
    redact_keyvalue(text)
}

/// Replaces every `password` value in key=value text, as written (quotes and escapes
/// included), with `***`. It looks for the word itself rather than tokenizing, so text
/// that does not parse, or parses into other keys (a stray quote before it), is
/// redacted too, to its end when a quote is left open.
fn redact_keyvalue(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("password") {
        let mut i = from + found + "password".len();
        from = i;
        let rest = &text[i..];
        let skipped = rest.len() - rest.trim_start().len();
        i += skipped;
        if !text[i..].starts_with('=') {
            continue;
        }
        i += 1;
        i += text[i..].len() - text[i..].trim_start().len();
        let value_start = i;
        let mut chars = text[i..].char_indices();
        let mut value_end = text.len();
        if text[i..].starts_with('\'') {
            chars.next();
            while let Some((j, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        value_end = i + j + 1;
                        break;
                    }
                    _ => {}
                }
            }
        } else {
            while let Some((j, c)) = chars.next() {
                if c.is_whitespace() {
                    value_end = i + j;
                    break;
                }
                if c == '\\' {
                    chars.next();
                }
            }
        }
        if value_end > value_start {
            out.push_str(&text[copied..value_start]);
            out.push_str("***");
            copied = value_end;
        }
        from = value_end.max(from);
    }
    out.push_str(&text[copied..]);
    out
}

fn redact_query_password(text: &str) -> String {
    match text.find("password=") {
        Some(i) if text[..i].contains('?') => {
            let end = text[i..].find('&').map(|e| i + e).unwrap_or(text.len());
            let mut out = text.to_string();
            out.replace_range(i + "password=".len()..end, "***");
            out
        }
        _ => text.to_string(),
    }
}

/// Parses a target body (URI or key=value) into raw pairs.
pub fn parse_raw(text: &str) -> Result<BTreeMap<String, String>, TargetError> {
    let pairs = if is_uri(text) || is_mysql_uri(text) {
        parse_uri(text)?
    } else {
        parse_keyvalue(text)?
    };
    // libpq: a later key overrides an earlier one.
    Ok(pairs.into_iter().collect())
}

/// libpq keyword/value syntax: `key = value` pairs separated by whitespace; values may be
/// single-quoted, with `\'` and `\\` as escapes.
fn parse_keyvalue(text: &str) -> Result<Vec<(String, String)>, TargetError> {
    let syntax = |why: &str| TargetError::Syntax {
        text: redact(text),
        why: why.to_string(),
    };
    // A token is named in an error only when the text holds no password: a stray quote
    // can make the parser read part of a password as a key.
    let shown = |token: &str| {
        if text.contains("password") {
            "a key".to_string()
        } else {
            format!("{token:?}")
        }
    };
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(syntax(&format!("missing \"=\" after {}", shown(&key))));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e) => value.push(e),
                        None => break,
                    },
                    '\'' => {
                        closed = true;
                        break;
                    }
                    _ => value.push(c),
                }
            }
            if !closed {
                return Err(syntax(&format!("unterminated quoted value for {}", shown(&key))));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(e) = chars.next() {
                        value.push(e);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `postgres[ql]://[user[:password]@][host][:port][/dbname][?key=value&...]`
fn parse_uri(text: &str) -> Result<Vec<(String, String)>, TargetError> {
    let syntax = |why: String| TargetError::Syntax {
        text: redact(text),
        why,
    };
    let rest = text.split_once("://").map(|(_, r)| r).unwrap_or_default();
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match main.find('/') {
        Some(i) => (&main[..i], Some(&main[i + 1..])),
        None => (main, None),
    };
    let mut out = Vec::new();
    let hostport = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let (user, pass) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                out.push(("user".into(), percent_decode(user).map_err(syntax)?));
            }
            if let Some(p) = pass {
                out.push(("password".into(), percent_decode(p).map_err(syntax)?));
            }
            &authority[at + 1..]
        }
        None => authority,
    };
    if hostport.contains(',') {
        return Err(syntax(
            "several hosts in one URI are not supported; give one target per host".into(),
        ));
    }
    let (host, port) = if let Some(stripped) = hostport.strip_prefix('[') {
        let close = stripped
            .find(']')
            .ok_or_else(|| syntax("missing \"]\" after an IPv6 address".into()))?;
        let host = &stripped[..close];
        if host.is_empty() {
            // libpq: "IPv6 host address may not be empty in URI".
            return Err(syntax(
                "the IPv6 host between \"[\" and \"]\" is empty (libpq refuses it too); \
                 write an address such as [::1], or leave the brackets out for the default socket"
                    .into(),
            ));
        }
        let after = &stripped[close + 1..];
        if let Some(c) = after.chars().next().filter(|&c| c != ':') {
            // libpq: "unexpected character ... (expected ":" or "/")".
            return Err(syntax(format!(
                "unexpected {c:?} after the IPv6 host [{host}]: libpq expects \":\" and a port, \
                 or \"/\" and a database name, there"
            )));
        }
        (host, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if !host.is_empty() {
        out.push(("host".into(), percent_decode(host).map_err(syntax)?));
    }
    if let Some(p) = port.filter(|p| !p.is_empty()) {
        out.push(("port".into(), p.to_string()));
    }
    if let Some(db) = path.filter(|p| !p.is_empty()) {
        out.push(("dbname".into(), percent_decode(db).map_err(syntax)?));
    }
    if let Some(q) = query {
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| syntax(format!("URI parameter {pair:?} has no \"=\"")))?;
            out.push((
                percent_decode(k).map_err(syntax)?,
                percent_decode(v).map_err(syntax)?,
            ));
        }
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-encoding at {:?}", &s[i..]))?;
            if hex == 0 {
                // libpq: "forbidden value %00 in percent-encoded value".
                return Err("%00 (a NUL byte) is not allowed in a URI, as in libpq".into());
            }
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-encoding is not UTF-8".to_string())
}
