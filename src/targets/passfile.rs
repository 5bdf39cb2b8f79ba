//! The passfile (`~/.pgpass`, `passfile=`, `PGPASSFILE`): the password for a target
//! looked up as libpq does. Apart because it is the one place a target reads a file.

use std::path::Path;

use super::{default_socket_dir, Host, Target, TargetError};

/// Looks the password up in a passfile (`host:port:db:user:password`, `*` matches any,
/// `\` escapes), like libpq: the first matching line wins; a missing file means none.
pub(super) fn password_from_file(path: &Path, t: &Target) -> Result<Option<String>, TargetError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(TargetError::Passfile {
                path: path.display().to_string(),
                why: e.to_string(),
            })
        }
    };
    // libpq matches Unix-socket connections in the default directory as "localhost".
    let host = match &t.host {
        Host::Tcp(h) => h.clone(),
        Host::Unix(d) if d == &default_socket_dir() => "localhost".to_string(),
        Host::Unix(d) => d.display().to_string(),
    };
    let port = t.port.to_string();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        if fields.len() < 5 {
            continue;
        }
        let wanted = [host.as_str(), port.as_str(), t.dbname.as_str(), t.user.as_str()];
        if fields[..4].iter().zip(wanted).all(|(f, w)| f == "*" || f == w) {
            return Ok(Some(fields[4..].join(":")));
        }
    }
    Ok(None)
}

fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(e) = chars.next() {
                    fields.last_mut().unwrap().push(e);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}
