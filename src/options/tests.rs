use std::time::Duration;

use super::load::check_aggregate_interval;
use super::*;
use crate::dataset::pgbench::{TableChoice, Tables};
use crate::host::Source;
use crate::load::plan::Policy;
use crate::targets::Target;
use crate::workload::Builtin;

#[test]
fn seeds_are_pgbench_s_words_or_numbers() {
    assert_eq!(parse_seed("time").unwrap(), SeedArg(None));
    assert_eq!(parse_seed("42").unwrap(), SeedArg(Some(42)));
    // rand draws from the kernel: two draws are a number each, and differ.
    let (a, b) = (
        parse_seed("rand").unwrap().0.unwrap(),
        parse_seed("rand").unwrap().0.unwrap(),
    );
    assert_ne!(a, b);
    assert!(parse_seed("-1").unwrap_err().contains("\"rand\""));
}

#[test]
fn a_server_connbench_did_not_start_is_not_measured_and_says_why() {
    let remote = Target::parse("host=db.example.com dbname=x user=u").unwrap();
    let a = accounting(&remote, None, None).unwrap();
    assert_eq!(a.server, None);
    assert_eq!(a.server_not_measured.as_deref(), Some("not measured (remote)"));
    for local in [
        "host=/tmp dbname=x user=u",
        "host=127.0.0.1 dbname=x user=u",
        "host=localhost dbname=x user=u",
    ] {
        let a = accounting(&Target::parse(local).unwrap(), None, None).unwrap();
        assert!(a.server_not_measured.unwrap().contains("--server-pid"), "{local}");
    }
    // A source the user names must be readable now, or the run does not start.
    let me = Source::Tree(std::process::id());
    assert_eq!(
        accounting(&remote, None, Some(me.clone())).unwrap().server,
        Some(me)
    );
    assert!(accounting(&remote, None, Some(Source::Tree(u32::MAX))).is_err());
}

#[test]
fn an_aggregate_interval_divides_the_run_as_pgbench_requires() {
    let s = Duration::from_secs;
    assert!(check_aggregate_interval(1, s(3)).is_ok());
    assert!(check_aggregate_interval(5, s(10)).is_ok());
    let e = check_aggregate_interval(2, s(3)).unwrap_err().to_string();
    assert!(e.contains("-T 3s") && e.contains("multiple of 2 s"), "{e}");
    let e = check_aggregate_interval(1, Duration::from_millis(2500))
        .unwrap_err()
        .to_string();
    assert!(e.contains("-T 2.5s"), "{e}");
    let e = check_aggregate_interval(10, s(5)).unwrap_err().to_string();
    assert!(e.contains("longer than the run"), "{e}");
}

#[test]
fn every_bad_value_names_its_setting() {
    assert!(parse_rate("0").unwrap_err().contains("invalid rate \"0\""));
    assert!(parse_rate("nan").is_err());
    assert!(parse_pool_size("0").unwrap_err().contains("pool_size"));
    assert!(parse_clients("0").unwrap_err().contains("clients"));
    assert!(parse_length("100000000000000000000000s")
        .unwrap_err()
        .contains("duration"));
    assert!(parse_length("1e20").unwrap_err().contains("duration"));
    assert!(parse_length("0").is_err());
    assert_eq!(parse_length("2.5"), Ok(Duration::from_millis(2500)));
    assert_eq!(parse_length("3s"), Ok(Duration::from_secs(3)));
    assert!(parse_sslmode("sometimes").unwrap_err().contains("sslmode"));
    assert!(parse_period("0").is_err());
}

#[test]
fn a_latency_limit_is_milliseconds_bare_as_in_pgbench_or_a_duration() {
    assert_eq!(parse_latency_limit("50"), Ok(Duration::from_millis(50)));
    assert_eq!(parse_latency_limit("0.5"), Ok(Duration::from_micros(500)));
    assert_eq!(parse_latency_limit("2s"), Ok(Duration::from_secs(2)));
    for bad in ["0", "0ms", "-1", "nan", "inf", "soon"] {
        let e = parse_latency_limit(bad).unwrap_err();
        assert!(e.contains("latency limit") && e.contains(bad), "{bad}: {e}");
    }
}

#[test]
fn suite_settings_go_through_the_same_parsers() {
    let mut s = Settings::new();
    s.insert("rate".into(), "0".into());
    let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("setting rate: {}", parse_rate("0").unwrap_err())
    );
    let mut s = Settings::new();
    s.insert("pool_size".into(), "0".into());
    let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
    assert!(e.to_string().contains("pool_size"), "{e}");
}

#[test]
fn a_cell_s_connect_rate_is_the_flag_s_and_reaches_its_plan() {
    let mut s = Settings::new();
    s.insert("connect_rate".into(), "20/s".into());
    let o = LoadOptions::from_settings(&s, None, None, "connbench").unwrap();
    assert_eq!((o.connect_rate, o.connect_rate()), (Some(20.0), Some(20.0)));
    let endpoint = crate::proto::Endpoint::new(Target::parse("host=/tmp dbname=x").unwrap()).unwrap();
    let dataset = Dataset {
        tables: o.assumed_tables(),
        scale: 1,
    };
    let plan = o.plan(endpoint, &dataset, None, None).unwrap();
    assert_eq!(plan.connect_rate, Some(20.0));
    // Without it, a cell's default is the flag's: paced from 1,000 clients only.
    s.clear();
    s.insert("clients".into(), "1000".into());
    let o = LoadOptions::from_settings(&s, None, None, "connbench").unwrap();
    assert_eq!(
        (o.connect_rate, o.connect_rate()),
        (None, Some(crate::load::connecting::DEFAULT_CONNECT_RATE))
    );
    // A bad one is refused naming the setting, its value, what it paces and the fix.
    for bad in ["0", "-5/s", "fast", "inf"] {
        s.insert("connect_rate".into(), bad.into());
        let e = LoadOptions::from_settings(&s, None, None, "connbench")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("setting connect_rate: {}", parse_connect_rate(bad).unwrap_err())
        );
        for said in [
            format!("{bad:?}"),
            "the connect ramp".into(),
            "before the measurement".into(),
            "e.g. 2000 or 2000/s".into(),
        ] {
            assert!(e.contains(&said), "{said} not in: {e}");
        }
    }
}

#[test]
fn a_cell_s_scale_names_its_own_tables_and_tpcb_like_above_the_scale_warns() {
    let mut s = Settings::new();
    s.insert("scale".into(), "8".into());
    let o = LoadOptions::from_settings(&s, None, None, "connbench").unwrap();
    assert_eq!(
        (o.schema.as_str(), o.tables),
        ("connbench_scale8", TableChoice::Connbench)
    );
    s.insert("tables".into(), "pgbench".into());
    let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
    assert!(e.to_string().contains("not tables = \"pgbench\""), "{e}");
    s.insert("scale".into(), "0".into());
    let e = LoadOptions::from_settings(&s, None, None, "connbench").unwrap_err();
    assert!(
        e.to_string().starts_with("setting scale: invalid scale \"0\""),
        "{e}"
    );
    // The warning: tpcb-like only, and only above the scale.
    let tpcb = LoadOptions::default();
    let w = tpcb.scale_warning(8, 1).unwrap();
    assert!(w.starts_with("tpcb-like with 8 clients on scale 1: "), "{w}");
    assert!(
        w.contains("connbench init TARGET -s 8") && !w.contains('\n'),
        "{w}"
    );
    assert_eq!(tpcb.scale_warning(8, 8), None);
    let select = LoadOptions {
        workloads: vec![Weighted {
            workload: Workload::Builtin(Builtin::SelectOnly),
            weight: 1,
        }],
        ..LoadOptions::default()
    };
    assert_eq!(select.scale_warning(8, 1), None);
}

#[test]
fn builtins_on_pgbench_s_tables_name_pgbench_s_tables_only() {
    for b in Builtin::ALL {
        let text = builtin_text(b, &Tables::Pgbench);
        assert!(!text.contains("pgbench."), "{text}");
        for word in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
            if ["accounts", "tellers", "branches", "history"]
                .iter()
                .any(|t| word.ends_with(t))
            {
                assert!(word.starts_with("pgbench_"), "{b:?}: {word} in {text}");
            }
        }
    }
    let select = builtin_text(Builtin::SelectOnly, &Tables::Pgbench);
    assert!(
        select.contains("SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"),
        "{select}"
    );
    assert!(builtin_text(Builtin::TpcbLike, &Tables::Connbench("s".into())).contains("s.tellers"));
}

#[test]
fn builtin_prefixes_name_one_script_as_pgbench_s_do() {
    assert_eq!(find_builtin("se"), Ok(Builtin::SelectOnly));
    assert_eq!(find_builtin("si"), Ok(Builtin::SimpleUpdate));
    assert_eq!(find_builtin("t"), Ok(Builtin::TpcbLike));
    assert_eq!(find_builtin("tpcb-like"), Ok(Builtin::TpcbLike));
    assert!(find_builtin("s").unwrap_err().contains("ambiguous"));
    assert!(find_builtin("").is_err());
    assert!(find_builtin("x").unwrap_err().contains("no built-in script"));
    let w = parse_builtin_weighted("se@3").unwrap();
    assert_eq!(
        (w.workload, w.weight),
        (Workload::Builtin(Builtin::SelectOnly), 3)
    );
    let f = parse_file_weighted("a@b.sql@2").unwrap();
    assert_eq!((f.workload, f.weight), (Workload::File("a@b.sql".into()), 2));
    assert!(parse_file_weighted("x.sql@").is_err());
    assert!(parse_builtin_weighted("se@99999999999").is_err());
}

#[test]
fn connect_only_refuses_other_policies() {
    let o = LoadOptions {
        workloads: vec![Weighted {
            workload: Workload::Builtin(Builtin::ConnectOnly),
            weight: 1,
        }],
        connection: Some(Connection::Pool),
        ..LoadOptions::default()
    };
    assert!(o.policy().unwrap_err().to_string().contains("per-transaction"));
    let o = LoadOptions {
        workloads: vec![Weighted {
            workload: Workload::Builtin(Builtin::ConnectOnly),
            weight: 1,
        }],
        ..LoadOptions::default()
    };
    assert_eq!(o.policy().unwrap(), Policy::PerTransaction);
}

#[test]
fn pool_size_is_split_over_threads_rounding_up() {
    let o = LoadOptions {
        connection: Some(Connection::Pool),
        pool: PoolOptions {
            size: 5,
            ..LoadOptions::default().pool
        },
        clients: 8,
        threads: 2,
        ..LoadOptions::default()
    };
    assert!(matches!(
        o.policy().unwrap(),
        Policy::Pool {
            size_per_thread: 3,
            ..
        }
    ));
}
