//! Bounded property runs of every parser of outside text or bytes: targets (key=value
//! and URIs, with redaction), pgbench-style scripts, suite files, the PostgreSQL
//! backend reader and the MySQL packet reader (greetings and query replies). Each runs a few hundred generated inputs on every test run; a
//! failure prints the smallest input proptest finds. The property is always the same:
//! an error or a value, never a panic or a stall, and never a password in a message.

use std::time::Duration;

use proptest::prelude::*;

use connbench::experiment::suite::Suite;
use connbench::proto::{self, Endpoint, PhaseCursor};
use connbench::targets::{redact, Target};
use connbench::workload::Script;

/// `cases` inputs per property on every test run; `bench/fuzz.sh` raises it with
/// PROPTEST_CASES for long runs (each run draws new inputs from a fresh seed).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        // Found failures become explicit regression tests, not files beside the source.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A value in libpq's key=value syntax: bare with backslash escapes, or single-quoted
/// with `\'` and `\\`.
fn quoted(v: &str, quote: bool) -> String {
    let escaped: String = v
        .chars()
        .flat_map(|c| match c {
            '\'' | '\\' => vec!['\\', c],
            ' ' if !quote => vec!['\\', ' '],
            c => vec![c],
        })
        .collect();
    if quote {
        format!("'{escaped}'")
    } else {
        escaped
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn any_text_as_a_target_is_a_value_or_an_error(s in "\\PC{0,60}") {
        let _ = Target::parse(&s);
        let _ = redact(&s);
    }

    #[test]
    fn a_password_never_appears_in_a_targets_errors_or_redaction(
        secret in "Zq[A-Za-z0-9' \\\\]{6,14}",
        quote in any::<bool>(),
        before in prop::collection::vec(("[a-z_]{1,9}", "[ -~]{0,8}"), 0..3),
        after in prop::collection::vec(("[a-z_]{1,9}", "[ -~]{0,8}"), 0..3),
        truncate in 0usize..3,
    ) {
        let pairs = |v: &[(String, String)]| -> String {
            v.iter().map(|(k, x)| format!("{k}={} ", quoted(x, true))).collect()
        };
        let mut text = format!("{}password={} {}", pairs(&before), quoted(&secret, quote), pairs(&after));
        // Cut the text short: an unterminated quote, a key without its value.
        for _ in 0..truncate {
            text.pop();
        }
        let core = &secret[2..];
        prop_assert!(!redact(&text).contains(core), "redact({text:?}) = {:?}", redact(&text));
        if let Err(e) = Target::parse(&text) {
            prop_assert!(!e.to_string().contains(core), "{text:?}: {e}");
        }
    }

    #[test]
    fn any_script_parses_or_names_its_error(
        lines in prop::collection::vec(
            prop_oneof![
                "\\\\set [a-z]{1,3} [-+*/%() 0-9a-z:]{0,24}",
                "\\\\set [a-z]{1,2} random\\([-0-9:a-z, *]{0,16}\\)",
                "\\\\sleep [0-9a-z :]{0,8}",
                "SELECT [ -~]{0,20};",
                "[ -~]{0,20}",
                // The whole language: conditionals, row storing, compounds, shells,
                // pipelines, every operator and keyword, and any text at all.
                "\\\\(if|elif) [-+*/%()<>=!~#&|,.0-9a-z: ]{0,24}",
                "\\\\(else|endif|startpipeline|syncpipeline|endpipeline|gset|aset)( [a-z_]{0,3})?",
                "\\\\set [a-z]{1,2} (CASE WHEN|NOT|[a-z_]{2,9}\\(|:[a-z]{1,2}|IS|NULL|true|[0-9.e]{1,5}|[-+*/%()<>=!~#&|, ]){0,10}",
                "SELECT [ -~]{0,10} (\\\\;|\\\\gset|\\\\aset) [ -~]{0,10}",
                "\\\\(shell|setshell) [ -~]{0,16}",
                "['\"$/*-]{1,4}[ -~]{0,10}",
                ".{0,30}",
            ],
            0..8,
        )
    ) {
        let text = lines.join("\n");
        match Script::parse("fuzz.sql", &text) {
            Ok(script) => {
                // Whatever parses evaluates to a value or an error, never a panic:
                // overflow, division by zero and shifts included.
                use connbench::script::{eval::eval, Command, Prng, Value, Vars};
                let mut vars = Vars::new(script.variables.len());
                for (i, v) in [Value::Int(i64::MIN), Value::Int(-1), Value::Double(f64::NAN), Value::Null]
                    .into_iter()
                    .cycle()
                    .take(script.variables.len())
                    .enumerate()
                {
                    vars.set(i, v);
                }
                let mut rng = Prng::new(1);
                for c in &script.commands {
                    if let Command::Set { expr, .. } | Command::If { cond: expr, .. } | Command::Elif { cond: expr, .. } = c {
                        let _ = eval(expr, &vars, &mut rng, &mut |_| {});
                    }
                }
            }
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.sql"), "{e}"),
        }
    }

    #[test]
    fn any_suite_file_loads_or_names_its_error(
        lines in prop::collection::vec(
            prop_oneof![
                "(name|question|kind|figure|baseline|duration|warmup|repetitions|noise_threshold) = (\"[ -~&&[^\"\\\\]]{0,12}\"|-?[0-9]{1,4}(\\.[0-9])?)",
                "\\[(defaults|axes|quick|full)\\]",
                "\\[\\[cells\\]\\]",
                "(clients|target|workload|connection|rate|path|distance|pool_size) = (\"[ -~&&[^\"\\\\]]{0,10}\"|[0-9]{1,5}|\\[\"[a-z0-9]{0,5}\", \"[a-z0-9]{0,5}\"\\])",
            ],
            0..12,
        )
    ) {
        let _ = Suite::parse(&lines.join("\n"), "fuzz.toml");
    }
}

/// One layer of a deep expression: how it wraps the expression inside it.
#[derive(Debug, Clone)]
enum Layer {
    Paren,
    Minus,
    Not,
    Tilde,
    Abs,
    /// A call that takes more than three arguments (the evaluator's larger frame).
    Least,
    Case,
    /// `x + 1 + ... + 1`: a tree this much deeper, built without the parser recursing.
    Chain(usize),
}

impl Layer {
    fn wrap(&self, inner: &str) -> String {
        match self {
            Layer::Paren => format!("({inner})"),
            Layer::Minus => format!("-{inner}"),
            Layer::Not => format!("NOT {inner}"),
            Layer::Tilde => format!("~{inner}"),
            Layer::Abs => format!("abs({inner})"),
            Layer::Least => format!("least({inner}, 2, 3, 4)"),
            Layer::Case => format!("CASE WHEN true THEN {inner} ELSE 0 END"),
            Layer::Chain(k) => format!("({inner}){}", " + 1".repeat(*k)),
        }
    }

    /// (levels of the parser's recursion, levels of the tree) this layer adds.
    fn depth(&self) -> (usize, usize) {
        match self {
            Layer::Paren => (1, 0),
            Layer::Chain(k) => (1, *k),
            _ => (1, 1),
        }
    }
}

fn layer() -> impl Strategy<Value = Layer> {
    prop_oneof![
        Just(Layer::Paren),
        Just(Layer::Minus),
        Just(Layer::Not),
        Just(Layer::Tilde),
        Just(Layer::Abs),
        Just(Layer::Least),
        Just(Layer::Case),
        (0usize..300).prop_map(Layer::Chain),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// Deep and wide expressions (up to 600 layers, chains up to 300 long) in `\set`
    /// and `\if`: each parses (on a stack the main thread's size) and evaluates on a
    /// thread with a worker's stack (2 MiB), or is refused before the run naming the
    /// file, the line and the limit; never a stack overflow. It parses exactly when both
    /// its nesting and its tree are within the limit.
    #[test]
    fn deep_and_wide_expressions_run_or_are_refused_never_overflow(
        layers in prop::collection::vec(layer(), 0..600),
        at_if in any::<bool>(),
    ) {
        let expr = layers.iter().fold("1".to_string(), |inner, l| l.wrap(&inner));
        let (nesting, tree) = layers.iter().fold((1, 1), |(n, t), l| {
            let (dn, dt) = l.depth();
            (n + dn, t + dt)
        });
        let text = if at_if {
            format!("SELECT 1;\n\\if {expr}\nSELECT 2;\n\\endif\n")
        } else {
            format!("SELECT 1;\n\\set x {expr}\n")
        };
        let limit = connbench::script::value::MAX_DEPTH;
        // Parsed on a stack the main thread's size (8 MiB), where connbench parses scripts.
        let main = std::thread::Builder::new().stack_size(8 << 20);
        let parsed = main.spawn(move || Script::parse("deep.sql", &text)).unwrap().join().unwrap();
        match parsed {
            Ok(script) => {
                prop_assert!(nesting <= limit && tree <= limit, "parsed at {nesting}/{tree}");
                let worker = std::thread::Builder::new().stack_size(2 << 20);
                let evaluated = worker
                    .spawn(move || {
                        use connbench::script::{eval::eval, Command, EvalError, Prng, Vars};
                        let vars = Vars::new(script.variables.len());
                        // A value or an error (NOT 1 cannot coerce), never past the limit.
                        script.commands.iter().all(|c| match c {
                            Command::Set { expr, .. } | Command::If { cond: expr, .. } => {
                                eval(expr, &vars, &mut Prng::new(1), &mut |_| {}) != Err(EvalError::TooDeep)
                            }
                            _ => true,
                        })
                    })
                    .unwrap()
                    .join()
                    .unwrap();
                prop_assert!(evaluated, "{} layers", layers.len());
            }
            Err(e) => {
                prop_assert!(nesting > limit || tree > limit, "refused at {nesting}/{tree}: {e}");
                let e = e.to_string();
                prop_assert!(e.starts_with("deep.sql line 2: "), "{e}");
                prop_assert!(e.contains(&format!("nests deeper than {limit} levels")), "{e}");
                prop_assert!(!e.contains('\n') && e.len() < 400, "one short line: {e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn any_bytes_after_a_query_are_an_answer_or_an_error_never_a_panic_or_a_stall(
        reply in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            // Well-formed headers with arbitrary bodies reach deeper.
            (prop::sample::select(vec![b'C', b'D', b'E', b'T', b'Z', b'N', b'I', b'1', b'2', b'n', b'S']),
             // Bodies of a few bytes, where the length checks matter, half the time.
             prop_oneof![prop::collection::vec(any::<u8>(), 0..3), prop::collection::vec(any::<u8>(), 0..24)],
             0u32..40)
                .prop_map(|(tag, body, extra)| {
                    let len = (body.len() as u32 + 4).saturating_add(extra % 3);
                    let mut m = vec![tag];
                    m.extend_from_slice(&len.to_be_bytes());
                    m.extend_from_slice(&body);
                    m
                }),
        ]
    ) {
        let port = crate::hostile::serve_then(reply, false);
        let target = Target::parse(&format!("host=127.0.0.1 port={port} user=x dbname=x sslmode=disable")).unwrap();
        let ep = Endpoint::new(target).unwrap();
        let outcome = std::thread::spawn(move || {
            crate::common::runtime().block_on(async {
                tokio::time::timeout(Duration::from_secs(10), async {
                    // The peer's handshake is well formed: the connect must succeed, so
                    // every case reaches the reader under test.
                    let (mut session, _) = proto::connect(&ep, &PhaseCursor::default())
                        .await
                        .map_err(|e| format!("connect: {e}"))?;
                    let _ = session.simple_query("select 1").await;
                    Ok::<(), String>(())
                })
                .await
            })
        })
        .join();
        let outcome = outcome.map_err(|_| TestCaseError::fail("the reader panicked"))?;
        match outcome {
            Err(_) => prop_assert!(false, "the reader stalled past 10 s after the peer closed"),
            Ok(Err(e)) => prop_assert!(false, "{e}"),
            Ok(Ok(())) => {}
        }
    }
}

/// A MySQL peer for one connection: `greeting` as its first packet(s); OK to any
/// handshake response, then `reply` to the first command; then it closes. A client that
/// sends nothing (it waits for the rest of a greeting) is closed on after 20 ms: a local
/// client answers in microseconds, and a peer that closes early only makes the outcome an
/// error, which the properties accept (they look for panics and stalls).
fn mysql_peer(greeting: Vec<u8>, reply: Vec<u8>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = listener.accept() else { return };
        let _ = c.set_read_timeout(Some(Duration::from_millis(20)));
        let _ = c.write_all(&greeting);
        let packet = |c: &mut std::net::TcpStream| {
            let mut h = [0u8; 4];
            c.read_exact(&mut h).ok()?;
            let mut body = vec![0u8; h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16];
            c.read_exact(&mut body).ok()
        };
        if packet(&mut c).is_some() {
            let _ = c.write_all(&[7, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0]);
            if packet(&mut c).is_some() {
                let _ = c.write_all(&reply);
            }
        }
    });
    port
}

/// A well-formed MySQL 5.7-style greeting offering mysql_native_password.
fn mysql_greeting() -> Vec<u8> {
    let mut g = vec![10];
    g.extend_from_slice(b"5.7.0-fuzz\0");
    g.extend_from_slice(&1u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0020_0000 | 0x1 | 0x8 | 0x2000 | 0x0002_0000;
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(33);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0");
    g.extend_from_slice(b"mysql_native_password\0");
    let n = g.len() as u32;
    let mut p = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, 0];
    p.extend_from_slice(&g);
    p
}

/// Bytes framed as MySQL packets (a valid header most of the time, so the parsers behind
/// the framing are reached), or raw.
fn mysql_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        prop::collection::vec(
            (
                prop::sample::select(vec![0x00u8, 0x01, 0x02, 0xfb, 0xfc, 0xfd, 0xfe, 0xff, 10]),
                prop::collection::vec(any::<u8>(), 0..20),
                0u8..4,
            )
                .prop_map(|(first, body, seq)| {
                    let n = body.len() as u32 + 1;
                    let mut p = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
                    p.push(first);
                    p.extend_from_slice(&body);
                    p
                }),
            1..6,
        )
        .prop_map(|ps| ps.concat()),
    ]
}

/// Runs a connect (and a query when it succeeds) against a peer within 10 s.
fn mysql_exchange(port: u16) -> Result<Result<(), String>, String> {
    let target = Target::parse(&format!("mysql://x:pw@127.0.0.1:{port}/x?ssl-mode=DISABLED")).unwrap();
    let ep = Endpoint::new(target).unwrap();
    std::thread::spawn(move || {
        crate::common::runtime().block_on(async {
            tokio::time::timeout(Duration::from_secs(10), async {
                if let Ok((mut session, _)) = proto::connect(&ep, &PhaseCursor::default()).await {
                    let _ = session.simple_query("select 1").await;
                    let _ = session.execute(proto::Statement::Simple("select 1"), &[]).await;
                }
            })
            .await
            .map_err(|_| "stalled past 10 s after the peer closed".to_string())
        })
    })
    .join()
    .map_err(|_| "the MySQL reader panicked".to_string())
}

/// Like [`config`], for properties that each open a socket to a peer thread (tens of
/// milliseconds a case, where the parsers take microseconds): a twentieth of
/// PROPTEST_CASES, so bench/fuzz.sh's rounds stay minutes long.
fn exchange_config(cases: u32) -> ProptestConfig {
    let scaled = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map(|n| (n / 20).max(1));
    ProptestConfig {
        cases: scaled.unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(exchange_config(128))]

    #[test]
    fn any_mysql_greeting_is_a_session_or_an_error_never_a_panic_or_a_stall(greeting in mysql_bytes()) {
        let port = mysql_peer(greeting, Vec::new());
        let outcome = mysql_exchange(port).map_err(TestCaseError::fail)?;
        prop_assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[test]
    fn any_mysql_reply_to_a_query_is_an_answer_or_an_error_never_a_panic_or_a_stall(reply in mysql_bytes()) {
        let port = mysql_peer(mysql_greeting(), reply);
        let outcome = mysql_exchange(port).map_err(TestCaseError::fail)?;
        prop_assert!(outcome.is_ok(), "{outcome:?}");
    }
}
