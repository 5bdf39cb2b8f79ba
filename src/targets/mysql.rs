//! MySQL and MariaDB targets: `mysql://` and `mariadb://` URIs, and key=value strings
//! with MySQL's key names, resolved into the same validated [`Target`] as PostgreSQL's.
//!
//! The keys follow the `mysql`/`mariadb` clients' option names: `host`, `port`,
//! `socket`, `user`, `password`, `database`, `ssl-mode` (DISABLED, PREFERRED, REQUIRED,
//! VERIFY_CA, VERIFY_IDENTITY), `ssl-ca`, `defaults-file` (an option file whose
//! `[client]` group holds the password, as the sandbox writes) and `connect-timeout`.
//! As with the clients, `host=localhost` without a port or socket means the default Unix
//! socket. The password never leaves the type: it comes from the text, `MYSQL_PWD` or the
//! option file, and [`uri`] names the option file instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    bad, check_rootcert, default_user, is_label, parse_port, redact, Engine, Env, Host, SslMode, Target,
    TargetError,
};
use super::{ChannelBinding, TargetError::UnknownKey};

/// The keys a MySQL target takes. `dbname`, `sslmode` and `sslrootcert` are accepted as
/// synonyms, so a suite's settings work for both engines.
pub(super) const KEYS: &[&str] = &[
    "host",
    "port",
    "socket",
    "user",
    "password",
    "database",
    "ssl-mode",
    "ssl-ca",
    "defaults-file",
    "connect-timeout",
    "engine",
    "label",
];

/// Keys only a MySQL target has: a key=value string holding one of them is MySQL's.
const MYSQL_ONLY: &[&str] = &["socket", "database", "ssl-mode", "ssl-ca", "defaults-file"];

/// Where the MySQL and MariaDB clients look for the server's socket by default on Debian.
const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";

/// Whether key=value pairs describe a MySQL target.
pub(super) fn is_mysql_keyvalue(raw: &BTreeMap<String, String>) -> bool {
    raw.get("engine")
        .is_some_and(|e| matches!(e.as_str(), "mysql" | "mariadb"))
        || MYSQL_ONLY.iter().any(|k| raw.contains_key(*k))
}

/// Validates a MySQL target's raw pairs (from a URI or key=value text).
pub(super) fn resolve(
    mut raw: BTreeMap<String, String>,
    text: &str,
    env: &dyn Env,
) -> Result<Target, TargetError> {
    for (synonym, key) in [
        ("dbname", "database"),
        ("sslmode", "ssl-mode"),
        ("sslrootcert", "ssl-ca"),
    ] {
        if let Some(v) = raw.remove(synonym) {
            raw.entry(key.to_string()).or_insert(v);
        }
    }
    if let Some(key) = raw.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(UnknownKey {
            key: key.clone(),
            text: redact(text),
            known: KEYS.join(", "),
        });
    }
    if let Some(e) = raw
        .get("engine")
        .filter(|e| !matches!(e.as_str(), "mysql" | "mariadb"))
    {
        return Err(bad(
            "engine",
            e,
            "a MySQL target takes engine=mysql or engine=mariadb",
        ));
    }
    let get = |k: &str| raw.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let port = parse_port(get("port"), 3306)?;
    let host = match (get("socket"), get("host")) {
        (Some(s), _) => Host::Unix(PathBuf::from(s)),
        (None, Some("localhost")) if get("port").is_none() => Host::Unix(PathBuf::from(DEFAULT_SOCKET)),
        (None, Some(h)) => Host::Tcp(h.to_string()),
        (None, None) => Host::Unix(PathBuf::from(DEFAULT_SOCKET)),
    };
    let sslmode = match get("ssl-mode") {
        None => SslMode::Prefer,
        Some(m) => parse_ssl_mode(m)?,
    };
    let sslrootcert = get("ssl-ca").map(PathBuf::from);
    check_rootcert(sslmode, sslrootcert.clone()).map_err(|_| {
        bad(
            "ssl-ca",
            &sslrootcert
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            "ssl-mode VERIFY_CA and VERIFY_IDENTITY need ssl-ca=FILE, an existing CA certificate",
        )
    })?;
    let defaults_file = get("defaults-file").map(PathBuf::from);
    let from_file = match &defaults_file {
        Some(f) => option_file_client(f)?,
        None => BTreeMap::new(),
    };
    let user = match get("user").or(from_file.get("user").map(String::as_str)) {
        Some(u) => u.to_string(),
        None => default_user(env)?,
    };
    let password_in_text = get("password").is_some();
    let password = get("password")
        .map(str::to_string)
        .or_else(|| from_file.get("password").cloned())
        .or_else(|| env.var("MYSQL_PWD"));
    let connect_timeout = match get("connect-timeout") {
        None => None,
        Some(v) => match v.parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(Duration::from_secs(n)),
            Err(_) => return Err(bad("connect-timeout", v, "expected whole seconds")),
        },
    };
    let label = get("label").map(str::to_string);
    if let Some(l) = &label {
        if !is_label(l) {
            return Err(bad("label", l, "use letters, digits, '_', '-' or '.'"));
        }
    }
    Ok(Target {
        engine: Engine::Mysql,
        label,
        host,
        hostaddr: None,
        port,
        user,
        dbname: get("database").unwrap_or_default().to_string(),
        password,
        passfile: defaults_file,
        sslmode,
        sslrootcert,
        sslsni: true,
        channel_binding: ChannelBinding::Disable,
        connect_timeout,
        application_name: None,
        options: None,
        password_in_text,
    })
}

/// MySQL's `--ssl-mode` names (any case), or libpq's, onto the shared [`SslMode`].
fn parse_ssl_mode(m: &str) -> Result<SslMode, TargetError> {
    Ok(match m.to_ascii_uppercase().replace('-', "_").as_str() {
        "DISABLED" | "DISABLE" => SslMode::Disable,
        "PREFERRED" | "PREFER" => SslMode::Prefer,
        "REQUIRED" | "REQUIRE" => SslMode::Require,
        "VERIFY_CA" => SslMode::VerifyCa,
        "VERIFY_IDENTITY" | "VERIFY_FULL" => SslMode::VerifyFull,
        _ => {
            return Err(bad(
                "ssl-mode",
                m,
                "expected DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
            ))
        }
    })
}

pub(super) fn ssl_mode_name(m: SslMode) -> &'static str {
    match m {
        SslMode::Disable => "DISABLED",
        SslMode::Prefer => "PREFERRED",
        SslMode::Require => "REQUIRED",
        SslMode::VerifyCa => "VERIFY_CA",
        SslMode::VerifyFull => "VERIFY_IDENTITY",
    }
}

/// The `user` and `password` of an option file's client groups (`[client]`, `[mysql]`,
/// `[mariadb]`, `[client-mariadb]`), later groups winning, as the clients read them.
fn option_file_client(path: &Path) -> Result<BTreeMap<String, String>, TargetError> {
    let text = std::fs::read_to_string(path).map_err(|e| TargetError::OptionFile {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    let mut out = BTreeMap::new();
    let mut in_client = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(group) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_client = matches!(group.trim(), "client" | "mysql" | "mariadb" | "client-mariadb");
            continue;
        }
        if !in_client {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let k = k.trim().replace('_', "-");
            if k == "user" || k == "password" {
                let v = v.trim();
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                    .unwrap_or(v);
                out.insert(k, v.to_string());
            }
        }
    }
    Ok(out)
}

/// The target as a `mysql://` URI without its password (the option file, when one
/// supplied it, is named instead).
pub(super) fn uri(t: &Target) -> String {
    let host = match &t.host {
        Host::Tcp(h) if h.contains(':') => format!("[{h}]"),
        Host::Tcp(h) => h.clone(),
        Host::Unix(_) => "localhost".to_string(),
    };
    let mut s = format!("mysql://{}@{host}:{}/{}", t.user, t.port, t.dbname);
    s += &format!("?ssl-mode={}", ssl_mode_name(t.sslmode));
    if let Host::Unix(p) = &t.host {
        s += &format!("&socket={}", p.display());
    }
    if let Some(c) = &t.sslrootcert {
        s += &format!("&ssl-ca={}", c.display());
    }
    if !t.password_in_text {
        if let Some(f) = &t.passfile {
            s += &format!("&defaults-file={}", f.display());
        }
    }
    if let Some(d) = t.connect_timeout {
        s += &format!("&connect-timeout={}", d.as_secs());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Target, TargetError> {
        Target::parse_with_env(text, &BTreeMap::from([("USER".to_string(), "me".to_string())]))
    }

    #[test]
    fn uris_and_keyvalue_strings() {
        let t = parse("mysql://app:pw@db.example:3307/shop?ssl-mode=REQUIRED").unwrap();
        assert_eq!(t.engine, Engine::Mysql);
        assert_eq!(t.host, Host::Tcp("db.example".into()));
        assert_eq!(
            (t.port, t.user.as_str(), t.dbname.as_str()),
            (3307, "app", "shop")
        );
        assert_eq!(t.password(), Some("pw"));
        assert_eq!(t.sslmode, SslMode::Require);
        assert_eq!(t.transport(), "tls");
        let t = parse("mariadb://root@localhost/").unwrap();
        assert_eq!(t.socket_path(), Some(PathBuf::from(DEFAULT_SOCKET)));
        assert_eq!(t.port, 3306);
        let t = parse("socket=/tmp/m.sock user=u database=d").unwrap();
        assert_eq!(t.engine, Engine::Mysql);
        assert_eq!(t.socket_path(), Some(PathBuf::from("/tmp/m.sock")));
        assert_eq!(t.transport(), "unix");
        // A socket is named by its file alone: the port plays no part over it.
        let t = parse("mariadb://u@localhost:33219/d?socket=/tmp/cb-x/mysqld.sock").unwrap();
        assert_eq!(t.name(), "/tmp/cb-x/mysqld.sock");
        assert_eq!(
            parse("mysql://u@127.0.0.1:3307/d").unwrap().name(),
            "127.0.0.1:3307"
        );
        let t = parse("name=mysql://u@127.0.0.1:3306/d?ssl-mode=disabled").unwrap();
        assert_eq!(t.label.as_deref(), Some("name"));
        assert_eq!(t.transport(), "tcp");
    }

    #[test]
    fn option_file_gives_the_password_and_the_uri_names_it_not_the_password() {
        let dir = crate::scratch::make_temp_dir().unwrap();
        let f = dir.join("my.cnf");
        std::fs::write(
            &f,
            "[mysqld]\npassword=nope\n[client]\nuser=u\npassword=\"s3cret\"\n",
        )
        .unwrap();
        let text = format!("mysql://127.0.0.1:3306/d?defaults-file={}", f.display());
        let t = parse(&text).unwrap();
        assert_eq!((t.user.as_str(), t.password()), ("u", Some("s3cret")));
        let uri = t.conninfo();
        assert!(!uri.contains("s3cret") && uri.contains("defaults-file="), "{uri}");
        assert_eq!(parse(&uri).unwrap().password(), Some("s3cret"));
        let inline = parse("mysql://u:s3cret@h:1/d").unwrap().conninfo();
        assert!(!inline.contains("s3cret"), "{inline}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_values_name_the_key_and_never_the_password() {
        for (text, key) in [
            ("mysql://u:s3cret@h:0/d", "port"),
            ("mysql://u:s3cret@h/d?ssl-mode=sometimes", "ssl-mode"),
            ("mysql://u:s3cret@h/d?ssl-mode=VERIFY_CA", "ssl-ca"),
            ("mysql://u:s3cret@h/d?sslcert=x", "sslcert"),
            (
                "mysql://u:s3cret@h/d?defaults-file=/nonexistent/my.cnf",
                "/nonexistent/my.cnf",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key) && !e.contains("s3cret"), "{text}: {e}");
        }
    }
}
