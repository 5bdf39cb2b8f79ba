//! sysbench 1.0's OLTP workloads (`oltp_read_write` and its seven siblings) as built-in
//! scripts for connbench's interpreter, on sysbench's tables (`sbtest1..N`).
//!
//! The spec is sysbench's own `oltp_common.lua` and the eight `oltp_*.lua` scripts: each
//! transaction sends the same statements, in the same order, with the same parameters
//! (`--sysbench point-selects=10`, ...) and ids drawn from the same distributions
//! (`special` by default, `uniform`, `gaussian`, `pareto`). The workloads are generated
//! as scripts rather than written as native code, so they run through the same executor
//! as pgbench's built-ins: every query mode, `-r`, retries, logs and pooling come for
//! free, and the hot path stays the executor's allocation-free one. The two things
//! pgbench's language lacks are connbench extensions of it: the `sysbench_special`,
//! `sysbench_gaussian` and `sysbench_pareto` functions, and `\randstring` for sysbench's
//! random `c` and `pad` strings.
//!
//! sysbench chooses one table per group of statements (`sysbench.rand.uniform(1,
//! tables)`); a script cannot name a table by variable in a prepared statement, so a
//! group on several tables is an `\if` chain with one prepared statement per table, as
//! sysbench prepares one per table.
//!
//! The tables the scripts read are `dataset::sysbench`'s, one stage up.

use std::fmt::Write as _;

use crate::workload::QueryMode;

/// The errors sysbench rolls a transaction back on and goes on from (it stops on any
/// other): on PostgreSQL a deadlock, a unique violation or a serialization failure
/// (drv_pgsql.c, `pgsql_check_status`); on MySQL its default `--mysql-ignore-errors`,
/// 1213 (deadlock), 1020 (record changed) and 1205 (lock wait timeout). An oltp-*
/// workload's client counts them failed and goes on, as sysbench's thread does.
pub const IGNORABLE: &[&str] = &["40P01", "23505", "40001", "1213", "1020", "1205"];

/// sysbench's `c` value: 10 groups of 11 random digits (119 characters).
pub const C_TEMPLATE: &str = "###########-###########-###########-###########-###########-\
                          ###########-###########-###########-###########-###########";
/// sysbench's `pad` value: 5 groups (59 characters).
pub const PAD_TEMPLATE: &str = "###########-###########-###########-###########-###########";

/// The eight OLTP workloads, as sysbench names its scripts (with `-` for `_`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Oltp {
    PointSelect,
    ReadOnly,
    ReadWrite,
    WriteOnly,
    UpdateIndex,
    UpdateNonIndex,
    Insert,
    Delete,
}

impl Oltp {
    pub const ALL: [Oltp; 8] = [
        Oltp::PointSelect,
        Oltp::ReadOnly,
        Oltp::ReadWrite,
        Oltp::WriteOnly,
        Oltp::UpdateIndex,
        Oltp::UpdateNonIndex,
        Oltp::Insert,
        Oltp::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Oltp::PointSelect => "oltp-point-select",
            Oltp::ReadOnly => "oltp-read-only",
            Oltp::ReadWrite => "oltp-read-write",
            Oltp::WriteOnly => "oltp-write-only",
            Oltp::UpdateIndex => "oltp-update-index",
            Oltp::UpdateNonIndex => "oltp-update-non-index",
            Oltp::Insert => "oltp-insert",
            Oltp::Delete => "oltp-delete",
        }
    }
}

/// sysbench's `--rand-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandType {
    Special,
    Uniform,
    Gaussian,
    Pareto,
}

/// sysbench's options for its OLTP scripts and its random numbers, with its defaults.
/// `tables` and `table_size` are `None` when not given: then they are read from the
/// tables found (all of `sbtest1..N`; the marker's size, else `max(id)` of sbtest1).
#[derive(Debug, Clone, PartialEq)]
pub struct SysbenchOptions {
    pub tables: Option<u32>,
    pub table_size: Option<u32>,
    pub range_size: u32,
    pub point_selects: u32,
    pub simple_ranges: u32,
    pub sum_ranges: u32,
    pub order_ranges: u32,
    pub distinct_ranges: u32,
    pub index_updates: u32,
    pub non_index_updates: u32,
    pub delete_inserts: u32,
    pub range_selects: bool,
    pub skip_trx: bool,
    pub rand_type: RandType,
    pub rand_spec_iter: u32,
    pub rand_spec_pct: u32,
    pub rand_spec_res: u32,
    pub rand_pareto_h: f64,
}

impl Default for SysbenchOptions {
    fn default() -> Self {
        SysbenchOptions {
            tables: None,
            table_size: None,
            range_size: 100,
            point_selects: 10,
            simple_ranges: 1,
            sum_ranges: 1,
            order_ranges: 1,
            distinct_ranges: 1,
            index_updates: 1,
            non_index_updates: 1,
            delete_inserts: 1,
            range_selects: true,
            skip_trx: false,
            rand_type: RandType::Special,
            rand_spec_iter: 12,
            rand_spec_pct: 1,
            rand_spec_res: 75,
            rand_pareto_h: 0.2,
        }
    }
}

/// The option names `--sysbench` takes: sysbench's own (`_` or `-` alike).
pub const NAMES: [&str; 18] = [
    "tables",
    "table-size",
    "range-size",
    "point-selects",
    "simple-ranges",
    "sum-ranges",
    "order-ranges",
    "distinct-ranges",
    "index-updates",
    "non-index-updates",
    "delete-inserts",
    "range-selects",
    "skip-trx",
    "rand-type",
    "rand-spec-iter",
    "rand-spec-pct",
    "rand-spec-res",
    "rand-pareto-h",
];

/// `--sysbench NAME=VALUE[,NAME=VALUE...]`, checked here so a bad one is a usage error.
pub fn parse_settings(v: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut probe = SysbenchOptions::default();
    for item in v.split(',').filter(|s| !s.trim().is_empty()) {
        let Some((k, val)) = item.split_once('=') else {
            return Err(format!(
                "invalid --sysbench {item:?}: use NAME=VALUE with sysbench's option names, e.g. table-size=100000"
            ));
        };
        probe.set(k.trim(), val.trim())?;
        out.push((k.trim().to_string(), val.trim().to_string()));
    }
    Ok(out)
}

fn number(name: &str, v: &str, min: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!(
            "invalid --sysbench {name}={v:?}: use a whole number of at least {min}"
        )),
    }
}

fn flag(name: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("invalid --sysbench {name}={v:?}: use on or off")),
    }
}

impl SysbenchOptions {
    /// Options from `NAME=VALUE` pairs over sysbench's defaults.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<SysbenchOptions, String> {
        let mut o = SysbenchOptions::default();
        for (k, v) in pairs {
            o.set(k, v)?;
        }
        Ok(o)
    }

    /// Sets one option by sysbench's name.
    pub fn set(&mut self, name: &str, v: &str) -> Result<(), String> {
        let key = name.replace('_', "-");
        match key.as_str() {
            "tables" => self.tables = Some(number(name, v, 1)?),
            "table-size" => self.table_size = Some(number(name, v, 1)?),
            "range-size" => self.range_size = number(name, v, 1)?,
            "point-selects" => self.point_selects = number(name, v, 0)?,
            "simple-ranges" => self.simple_ranges = number(name, v, 0)?,
            "sum-ranges" => self.sum_ranges = number(name, v, 0)?,
            "order-ranges" => self.order_ranges = number(name, v, 0)?,
            "distinct-ranges" => self.distinct_ranges = number(name, v, 0)?,
            "index-updates" => self.index_updates = number(name, v, 0)?,
            "non-index-updates" => self.non_index_updates = number(name, v, 0)?,
            "delete-inserts" => self.delete_inserts = number(name, v, 0)?,
            "range-selects" => self.range_selects = flag(name, v)?,
            "skip-trx" => self.skip_trx = flag(name, v)?,
            "rand-type" => {
                self.rand_type = match v {
                    "special" => RandType::Special,
                    "uniform" => RandType::Uniform,
                    "gaussian" => RandType::Gaussian,
                    "pareto" => RandType::Pareto,
                    _ => {
                        return Err(format!(
                            "invalid --sysbench rand-type={v:?}: use special, uniform, gaussian or pareto \
                             (sysbench 1.0's; zipfian is sysbench 1.1's)"
                        ))
                    }
                }
            }
            "rand-spec-iter" => self.rand_spec_iter = number(name, v, 1)?,
            "rand-spec-pct" => {
                self.rand_spec_pct = number(name, v, 0)?;
                if self.rand_spec_pct > 100 {
                    return Err(format!(
                        "invalid --sysbench {name}={v}: use a percentage, 0 to 100"
                    ));
                }
            }
            "rand-spec-res" => {
                self.rand_spec_res = number(name, v, 0)?;
                if self.rand_spec_res >= 100 {
                    return Err(format!(
                        "invalid --sysbench {name}={v}: use a percentage below 100 (sysbench divides by 100 - res)"
                    ));
                }
            }
            "rand-pareto-h" => match v.parse::<f64>() {
                Ok(h) if h > 0.0 && h < 1.0 => self.rand_pareto_h = h,
                _ => {
                    return Err(format!(
                    "invalid --sysbench {name}={v:?}: use a number between 0 and 1 (sysbench's default: 0.2)"
                ))
                }
            },
            _ => {
                return Err(format!(
                    "unknown --sysbench option {name:?}: use one of {}",
                    NAMES.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// The expression that draws an id in 1..=size, as `sysbench.rand.default` does.
    fn id(&self, size: u32) -> String {
        match self.rand_type {
            RandType::Uniform => format!("random(1, {size})"),
            RandType::Gaussian => format!("sysbench_gaussian(1, {size}, {})", self.rand_spec_iter),
            RandType::Pareto => format!("sysbench_pareto(1, {size}, {:?})", self.rand_pareto_h),
            RandType::Special => format!(
                "sysbench_special(1, {size}, {}, {}, {})",
                self.rand_spec_iter, self.rand_spec_pct, self.rand_spec_res
            ),
        }
    }
}

/// The script of workload `w` on `tables` tables of `size` rows, for `mode`: in the
/// simple protocol a string is spliced into the SQL text, so `\randstring` makes it
/// with its quotes; a parameter goes without them.
pub fn script(w: Oltp, o: &SysbenchOptions, tables: u32, size: u32, mode: QueryMode) -> String {
    let q = if mode == QueryMode::Simple { "'" } else { "" };
    let id = o.id(size);
    let mut s = String::new();
    let trx = matches!(w, Oltp::ReadOnly | Oltp::ReadWrite | Oltp::WriteOnly) && !o.skip_trx;
    if trx {
        s.push_str("BEGIN;\n");
    }
    let reads = matches!(w, Oltp::ReadOnly | Oltp::ReadWrite);
    let writes = matches!(w, Oltp::ReadWrite | Oltp::WriteOnly);
    let point_selects = match w {
        Oltp::PointSelect => 1,
        _ if reads => o.point_selects,
        _ => 0,
    };
    group(&mut s, tables, point_selects, |s, t| {
        let _ = write!(s, "\\set id {id}\nSELECT c FROM sbtest{t} WHERE id=:id;\n");
    });
    if reads && o.range_selects {
        for (n, select) in [
            (
                o.simple_ranges,
                "SELECT c FROM sbtest{t} WHERE id BETWEEN :id AND :id2",
            ),
            (
                o.sum_ranges,
                "SELECT SUM(k) FROM sbtest{t} WHERE id BETWEEN :id AND :id2",
            ),
            (
                o.order_ranges,
                "SELECT c FROM sbtest{t} WHERE id BETWEEN :id AND :id2 ORDER BY c",
            ),
            (
                o.distinct_ranges,
                "SELECT DISTINCT c FROM sbtest{t} WHERE id BETWEEN :id AND :id2 ORDER BY c",
            ),
        ] {
            group(&mut s, tables, n, |s, t| {
                let _ = writeln!(
                    s,
                    "\\set id {id}\n\\set id2 :id + {}\n{};",
                    o.range_size - 1,
                    select.replace("{t}", &t.to_string())
                );
            });
        }
    }
    let index_updates = match w {
        Oltp::UpdateIndex => o.index_updates,
        _ if writes => o.index_updates,
        _ => 0,
    };
    group(&mut s, tables, index_updates, |s, t| {
        let _ = write!(s, "\\set id {id}\nUPDATE sbtest{t} SET k=k+1 WHERE id=:id;\n");
    });
    let non_index_updates = match w {
        Oltp::UpdateNonIndex => o.non_index_updates,
        _ if writes => o.non_index_updates,
        _ => 0,
    };
    group(&mut s, tables, non_index_updates, |s, t| {
        let _ = write!(
            s,
            "\\randstring c {q}{C_TEMPLATE}{q}\n\\set id {id}\nUPDATE sbtest{t} SET c=:c WHERE id=:id;\n"
        );
    });
    if writes {
        group(&mut s, tables, o.delete_inserts, |s, t| {
            let _ = write!(
                s,
                "\\set id {id}\n\\set k {id}\n\\randstring c {q}{C_TEMPLATE}{q}\n\\randstring pad {q}{PAD_TEMPLATE}{q}\n\
                 DELETE FROM sbtest{t} WHERE id=:id;\n\
                 INSERT INTO sbtest{t} (id, k, c, pad) VALUES (:id, :k, :c, :pad);\n"
            );
        });
    }
    match w {
        // sysbench's oltp_insert leaves the id to the table's SERIAL or AUTO_INCREMENT
        // (on MySQL it writes id 0, which AUTO_INCREMENT takes as "the next one": the
        // same statement to the server, Com_insert counts it the same).
        Oltp::Insert => group(&mut s, tables, 1, |s, t| {
            let _ = write!(
                s,
                "\\set k {id}\n\\randstring c {q}{C_TEMPLATE}{q}\n\\randstring pad {q}{PAD_TEMPLATE}{q}\n\
                 INSERT INTO sbtest{t} (k, c, pad) VALUES (:k, :c, :pad);\n"
            );
        }),
        Oltp::Delete => group(&mut s, tables, 1, |s, t| {
            let _ = write!(s, "\\set id {id}\nDELETE FROM sbtest{t} WHERE id=:id;\n");
        }),
        _ => {}
    }
    if trx {
        s.push_str("COMMIT;\n");
    }
    s
}

/// `n` repetitions of `body` on one table drawn uniformly, as sysbench's
/// `execute_*` functions draw one table per group.
fn group(s: &mut String, tables: u32, n: u32, body: impl Fn(&mut String, u32)) {
    if n == 0 {
        return;
    }
    if tables == 1 {
        for _ in 0..n {
            body(s, 1);
        }
        return;
    }
    let _ = writeln!(s, "\\set table random(1, {tables})");
    for t in 1..=tables {
        let _ = writeln!(s, "\\{} :table = {t}", if t == 1 { "if" } else { "elif" });
        for _ in 0..n {
            body(s, t);
        }
    }
    s.push_str("\\endif\n");
}

/// One id from the options' distribution, as the scripts draw them.
pub fn draw(rng: &mut crate::script::Prng, o: &SysbenchOptions, size: u32) -> u32 {
    let hi = i64::from(size);
    let v = match o.rand_type {
        RandType::Uniform => rng.uniform(1, hi),
        RandType::Gaussian => rng.sysbench_gaussian(1, hi, o.rand_spec_iter),
        RandType::Pareto => rng.sysbench_pareto(1, hi, o.rand_pareto_h),
        RandType::Special => rng.sysbench_special(
            1,
            hi,
            o.rand_spec_iter,
            f64::from(o.rand_spec_pct),
            f64::from(o.rand_spec_res),
        ),
    };
    v as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Command, Prng, Script};

    fn sql(s: &Script) -> Vec<String> {
        s.commands
            .iter()
            .filter_map(|c| match c {
                Command::Sql(q) => Some(q.placeholder_sql.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn read_write_sends_sysbench_s_statements_in_its_order() {
        let o = SysbenchOptions::default();
        let text = script(Oltp::ReadWrite, &o, 1, 10_000, QueryMode::Prepared);
        let s = Script::parse("oltp-read-write", &text).unwrap();
        let q = sql(&s);
        assert_eq!(q.len(), 1 + 10 + 4 + 1 + 1 + 2 + 1, "{q:#?}");
        assert_eq!(q[0], "BEGIN;");
        assert_eq!(q[1], "SELECT c FROM sbtest1 WHERE id=$1;");
        assert_eq!(q[11], "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2;");
        assert_eq!(q[12], "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2;");
        assert_eq!(
            q[14],
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c;"
        );
        assert_eq!(q[15], "UPDATE sbtest1 SET k=k+1 WHERE id=$1;");
        assert_eq!(q[16], "UPDATE sbtest1 SET c=$1 WHERE id=$2;");
        assert_eq!(q[17], "DELETE FROM sbtest1 WHERE id=$1;");
        assert_eq!(
            q[18],
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4);"
        );
        assert_eq!(q[19], "COMMIT;");
    }

    #[test]
    fn each_workload_has_sysbench_s_statement_count() {
        let o = SysbenchOptions::default();
        for (w, n) in [
            (Oltp::PointSelect, 1),
            (Oltp::ReadOnly, 16),
            (Oltp::ReadWrite, 20),
            (Oltp::WriteOnly, 6),
            (Oltp::UpdateIndex, 1),
            (Oltp::UpdateNonIndex, 1),
            (Oltp::Insert, 1),
            (Oltp::Delete, 1),
        ] {
            for mode in [QueryMode::Simple, QueryMode::Prepared] {
                let s = Script::parse(w.as_str(), &script(w, &o, 3, 100, mode)).unwrap();
                // Three tables: each group is an \if chain of three, one taken per run.
                assert_eq!(
                    s.statements(),
                    3 * n - if n > 2 { 4 } else { 0 },
                    "{}",
                    w.as_str()
                );
            }
        }
        let skip = SysbenchOptions {
            skip_trx: true,
            range_selects: false,
            ..SysbenchOptions::default()
        };
        let s = Script::parse("ro", &script(Oltp::ReadOnly, &skip, 1, 100, QueryMode::Simple)).unwrap();
        assert_eq!(sql(&s).len(), 10);
    }

    #[test]
    fn options_take_sysbench_s_names_and_refuse_the_rest_by_name() {
        let o = SysbenchOptions::from_pairs(
            &parse_settings("table_size=500,point-selects=3,skip-trx=on").unwrap(),
        )
        .unwrap();
        assert_eq!((o.table_size, o.point_selects, o.skip_trx), (Some(500), 3, true));
        let e = parse_settings("rand-type=zipfian").unwrap_err();
        assert!(e.contains("zipfian is sysbench 1.1's"), "{e}");
        let e = parse_settings("point_select=3").unwrap_err();
        assert!(e.contains("unknown --sysbench option \"point_select\""), "{e}");
        assert!(parse_settings("rand-spec-res=100")
            .unwrap_err()
            .contains("below 100"));
    }

    #[test]
    fn special_puts_three_quarters_of_draws_in_the_middle_percent() {
        let mut rng = Prng::new(7);
        let n = 100_000;
        let middle = (0..n)
            .map(|_| rng.sysbench_special(1, 10_000, 12, 1.0, 75.0))
            .filter(|v| (4_950..=5_051).contains(v))
            .count() as f64
            / n as f64;
        // 75% uniformly in the middle 1%, plus the gaussian part's small share of it.
        assert!((0.75..0.80).contains(&middle), "{middle}");
        let draws: Vec<i64> = (0..n).map(|_| rng.sysbench_pareto(1, 1000, 0.2)).collect();
        assert!(draws.iter().all(|v| (1..=1000).contains(v)));
        // Pareto with h = 0.2: 80% of the draws in the first 20% of the range.
        let low = draws.iter().filter(|&&v| v <= 200).count() as f64 / n as f64;
        assert!((0.78..0.82).contains(&low), "{low}");
        let mut c = String::new();
        rng.sysbench_string(C_TEMPLATE, &mut c);
        assert_eq!(c.len(), 119);
        assert!(c
            .split('-')
            .all(|g| g.len() == 11 && g.bytes().all(|b| b.is_ascii_digit())));
    }
}
