//! The flags of `record` (an application's traffic into a trace) and `trace` (what a
//! trace says the application does).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub const RECORD_EXAMPLES: &str = "\
Examples:
  connbench record --listen 127.0.0.1:6543 --upstream 127.0.0.1:5432 --out app.trace.gz
  connbench record --listen /tmp/app/.s.PGSQL.5432 --upstream tcp --out app.trace   # in front of the sandbox's PostgreSQL (mkdir -p /tmp/app first)
  connbench record --listen 127.0.0.1:6543 --upstream db.example.com:5432 --upstream-tls --out app.trace.gz
  connbench record --engine mysql --listen 127.0.0.1:3307 --upstream 127.0.0.1:3306 --out shop.trace.gz --redact-values
  connbench record --listen 127.0.0.1:6543 --upstream tcp --listen-tls --out app.trace.gz   # the app keeps sslmode=require
  connbench record --listen db.local:6543 --upstream db:5432 --listen-cert app.crt --listen-key app.key --out app.trace.gz
Then point the application at --listen (only its address changes), stop with Ctrl-C, and read it
with `connbench trace FILE`. Without --listen-tls the recorder reads plaintext only: an application
asking for TLS is answered N (sslmode=prefer goes on in plaintext; require fails). With it, the
recorder answers TLS with a certificate of its own: generated, signed by a CA it writes to
FILE.ca.crt beside the trace (sslmode=verify-full sslrootcert=FILE.ca.crt, mariadb --ssl-ca), or
--listen-cert/--listen-key; the private key is never written.

From a capture taken beside the database instead (no change to the application):
  tcpdump -i eth0 -s 0 -w db.pcap tcp port 5432          # Ctrl-C when enough is captured
  connbench record --from-pcap db.pcap --out app.trace.gz
  connbench record --from-pcap shop.pcapng --engine mysql --port 3307 --out shop.trace.gz
Times are then the wire's at the capture point; connections open before the capture began
are decoded from their first whole message (PostgreSQL) or counted (MySQL).";

pub const TRACE_EXAMPLES: &str = "\
Examples:
  connbench trace app.trace.gz
  connbench trace app.trace.gz --rtt 1ms --rtt 50ms --top 20
  connbench trace app.trace.gz --json > app.json
  connbench trace app.trace.gz --html app.html";

/// The wire protocol spoken through the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// PostgreSQL's protocol (PostgreSQL, PgBouncer, pgpool).
    Postgres,
    /// MySQL's protocol (MySQL, MariaDB).
    Mysql,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where the application connects: host:port (port 0 picks one) or a Unix socket path.
    #[arg(long, value_name = "ADDR", required_unless_present = "from_pcap")]
    pub listen: Option<String>,
    /// Where every connection goes: host:port, a Unix socket path, or a running sandbox's
    /// target name (tcp, unix, mariadb_tcp, ...).
    #[arg(long, value_name = "ADDR", required_unless_present = "from_pcap")]
    pub upstream: Option<String>,
    /// Read a packet capture instead of relaying: a `tcpdump -w` file (pcap or pcapng;
    /// Ethernet, Linux cooked, loopback or raw IP) of the database's traffic, written as
    /// the same trace with the capture's timestamps.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["listen", "upstream", "upstream_tls"])]
    pub from_pcap: Option<PathBuf>,
    /// With --from-pcap: the server's TCP port (guessed when not given: the port answering
    /// a startup or greeting, else 5432/6432 for PostgreSQL, 3306 for MySQL).
    #[arg(long, value_name = "N", requires = "from_pcap")]
    pub port: Option<u16>,
    /// TLS from the recorder to the server (PostgreSQL, host:port upstream), the app's
    /// plaintext carried inside, as a cloud SQL proxy does: how an application whose
    /// database requires TLS is recorded (the app connects with sslmode=prefer/disable).
    #[arg(long)]
    pub upstream_tls: bool,
    /// TLS from the application, terminated by the recorder with a certificate of its own
    /// (generated for the --listen host and localhost, signed by a CA it generates and
    /// writes beside the trace as OUT.ca.crt, never over a file), so an application that
    /// requires TLS (sslmode=require or verify-full, ssl-mode=REQUIRED) is recorded as it
    /// runs; the plaintext inside is decoded. PostgreSQL: its SSLRequest is answered S,
    /// the upstream stays as configured (plaintext, or --upstream-tls). MySQL/MariaDB: the
    /// server's TLS offer is kept and an application's TLS is carried on to the server
    /// (the recorder a TLS client to it, not verifying its certificate).
    #[arg(long)]
    pub listen_tls: bool,
    /// With --listen-tls: the recorder's certificate (PEM, the chain after it) instead of
    /// a generated one; needs --listen-key. Implies --listen-tls.
    #[arg(long, value_name = "FILE")]
    pub listen_cert: Option<PathBuf>,
    /// The private key (PEM) of --listen-cert's certificate; read, never written anywhere.
    #[arg(long, value_name = "FILE")]
    pub listen_key: Option<PathBuf>,
    /// The trace to write (JSON Lines; gzip when it ends in .gz). Never overwritten.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The wire protocol (a sandbox target name sets it).
    #[arg(long, value_enum, default_value = "postgres")]
    pub engine: EngineArg,
    /// Keep parameter types and sizes but not their values; literals in SQL text become
    /// placeholders; error messages are left out.
    #[arg(long)]
    pub redact_values: bool,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The trace `connbench record` wrote.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Predict at this added round trip (repeatable; default 1ms, 10ms, 50ms).
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub rtt: Vec<std::time::Duration>,
    /// Statements listed, by total time, and transaction shapes, by share of time.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long, conflicts_with = "html")]
    pub json: bool,
    /// Also write the report as one self-contained HTML page to FILE (never overwritten).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}
