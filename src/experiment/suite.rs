//! Suites: a declared experiment matrix, validated, and expanded into a plan.
//!
//! A suite file (TOML) names the question, the kind of run (`connect` or `load`), the
//! settings every cell starts from (`[defaults]`), and axes to cross (`[axes]`): each axis
//! is a setting with a list of values, and every combination is a cell. The plan runs a
//! discarded pre-warm pass, then `repetitions` rounds; with `order = "interleaved"` (the
//! default) every round visits every cell in a freshly shuffled order, so drift on the
//! machine spreads over all cells instead of landing on whichever ran last. Unknown keys,
//! unknown axes and bad values are errors that name the key and the suite.
//!
//! Example:
//!
//! ```toml
//! name = "transport"
//! question = "Is a Unix socket faster than TCP for TPC-B-like load?"
//! kind = "load"
//! duration = "10s"
//! warmup = "2s"
//! repetitions = 5
//! baseline = "target=tcp"
//!
//! [defaults]
//! clients = 5
//!
//! [axes]
//! target = ["unix", "tcp"]
//! ```

use std::time::Duration;

use anyhow::{bail, Result};
use serde::Deserialize;

mod file;

pub use super::suggest::did_you_mean;
use crate::options::cell::Settings;
use crate::rng::Rng;

/// What each cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Connect,
    Load,
}

/// How a round visits the cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Every round visits all cells in a new random order.
    #[default]
    Interleaved,
    /// Every round visits the cells in declaration order.
    Sequential,
}

/// The settings a cell can vary, and their names in suite files.
pub const SETTINGS: &[&str] = &[
    "target",
    "path",
    "distance",
    "netpath",
    "sslmode",
    "connection",
    "pool_size",
    "pool_max_lifetime",
    "pool_idle_timeout",
    "clients",
    "threads",
    "workload",
    "tables",
    "scale",
    "sysbench",
    "mode",
    "rate",
    "connect_rate",
    "think",
    "samples",
    "query",
    "interval",
    "fault",
    "fault_at",
    "server_cpus",
    "restore",
    // Labels of the user's own instances' sizes, not settings of the run: `cpus` is the
    // number a size curve draws, `size` its label ("2 vCPU").
    "cpus",
    "size",
];

/// The built-in suites: one per experiment our users run by hand.
pub const BUILTIN: &[(&str, &str)] = &[
    ("connect", include_str!("../../suites/connect.toml")),
    ("transport", include_str!("../../suites/transport.toml")),
    ("scaling", include_str!("../../suites/scaling.toml")),
    ("pooling", include_str!("../../suites/pooling.toml")),
    ("distance", include_str!("../../suites/distance.toml")),
    ("netpath", include_str!("../../suites/netpath.toml")),
    ("engines", include_str!("../../suites/engines.toml")),
    ("faults", include_str!("../../suites/faults.toml")),
];

/// A built-in suite's text by name, or a suite file's text by path.
pub fn load_text(name_or_path: &str) -> Result<(String, String)> {
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return Ok((name.to_string(), text.to_string()));
    }
    match std::fs::read_to_string(name_or_path) {
        Ok(text) => Ok((name_or_path.to_string(), text)),
        Err(e) => bail!(
            "no built-in suite named {name_or_path:?} and no readable file there ({e}){}; built-in suites: {}",
            did_you_mean(name_or_path, BUILTIN.iter().map(|(n, _)| *n)),
            BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Which set of lengths a suite runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lengths {
    /// The suite's own lengths.
    #[default]
    Full,
    /// The `[quick]` overrides: short enough for `connbench lab --quick`.
    Quick,
}

fn default_true() -> bool {
    true
}

fn default_noise_threshold() -> f64 {
    0.02
}

fn default_max_rounds() -> u32 {
    30
}

fn default_repetitions() -> u32 {
    5
}

/// One combination of axis values.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    /// `axis=value` pairs in axis order, e.g. `target=unix clients=8`.
    pub name: String,
    /// The axis values of this cell (a target's password redacted).
    pub axes: Vec<(String, String)>,
    /// Defaults overlaid with the axis values. Written out (JSON, the store) with a
    /// target's password redacted; only the running process holds it.
    #[serde(serialize_with = "ser_redacted_settings")]
    #[schemars(with = "Settings")]
    pub settings: Settings,
    /// The cell this one is compared with, when not the suite's baseline: the suite
    /// file's `versus = "LABEL"`, the cell of that label with the same axis values (so
    /// "a short pool lifetime against a long one" is asked at every distance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<usize>,
}

/// Serialises a cell's settings with the password of a `target` conninfo redacted.
fn ser_redacted_settings<S: serde::Serializer>(settings: &Settings, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(settings.len()))?;
    for (k, v) in settings {
        if k == "target" {
            m.serialize_entry(k, &crate::targets::redact(v))?;
        } else {
            m.serialize_entry(k, v)?;
        }
    }
    m.end()
}

/// A validated suite.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize, schemars::JsonSchema)]
pub struct Suite {
    pub name: String,
    pub question: String,
    pub kind: Kind,
    #[serde(
        serialize_with = "crate::units::ser_opt_duration_s",
        deserialize_with = "crate::units::de_opt_duration_s"
    )]
    #[schemars(with = "Option<f64>")]
    pub duration: Option<Duration>,
    #[serde(
        serialize_with = "crate::units::ser_opt_duration_s",
        deserialize_with = "crate::units::de_opt_duration_s"
    )]
    #[schemars(with = "Option<f64>")]
    pub warmup: Option<Duration>,
    pub prewarm: bool,
    pub repetitions: u32,
    pub order: Order,
    /// Load suites: the turn each cell of a round gets when the round's cells take turns
    /// (`crate::load::slices`); `None` runs them one after another.
    #[serde(
        default,
        serialize_with = "crate::units::ser_opt_duration_s",
        deserialize_with = "crate::units::de_opt_duration_s"
    )]
    #[schemars(with = "Option<f64>")]
    pub slice: Option<Duration>,
    pub seed: u64,
    /// The figure compared between cells, and which way is better.
    pub figure: String,
    pub better: crate::stats::compare::Better,
    /// A ratio within 1 ± this is "the same".
    #[serde(default = "default_noise_threshold")]
    pub noise_threshold: f64,
    /// The wall-clock budget of an adaptive run (`--budget`); `None` runs exactly
    /// `repetitions` rounds.
    #[serde(default)]
    pub budget_s: Option<f64>,
    /// With a budget: an answer also needs its ratio's interval within ± this fraction.
    #[serde(default)]
    pub precision: Option<f64>,
    /// The suite file's `budget`: what `connbench run` uses when not given `--budget`.
    #[serde(default)]
    pub run_budget_s: Option<f64>,
    /// The most rounds an adaptive run may reach.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    /// The most looks an adaptive run may take, fixed once its first round's time is
    /// known ([`Suite::planned_looks`]); `None` before that, and in runs stored before
    /// looks were capped (their looks spend 6/(π² j²) of α).
    #[serde(default)]
    pub looks: Option<u32>,
    pub cells: Vec<Cell>,
    /// Index of the baseline cell.
    pub baseline: usize,
    /// Whether `lab --quick` runs it: a suite without a `[quick]` section runs only in
    /// `lab --full`.
    #[serde(default = "default_true")]
    pub quick_lab: bool,
}

/// The figures a repetition reports, by kind, and which way is better.
pub const LOAD_FIGURES: &[&str] = &[
    "tps",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_max_ms",
    // A trace cell's (see experiment::replayed).
    "intended_to_answer_mean_ms",
    "intended_to_answer_p50_ms",
    "intended_to_answer_p99_ms",
    // A faults cell's (see stats::fault).
    "recovery_s",
    "longest_stall_s",
    "failed_transactions",
    "reconnects_per_s_peak",
];
pub const CONNECT_FIGURES: &[&str] = &["total_mean_us", "total_p50_us", "total_p99_us"];

/// One step of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    pub cell: usize,
    /// 0 for the pre-warm pass (discarded), then 1..=repetitions.
    pub repetition: u32,
}

impl Step {
    pub fn is_prewarm(self) -> bool {
        self.repetition == 0
    }
}

impl Suite {
    /// Parses and validates a suite file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Suite> {
        Suite::parse_profile(text, origin, Lengths::Full)
    }
    /// The same suite as an adaptive run: rounds are added within `budget` for answers
    /// still undecided (or, with `precision`, still wider than ± that fraction).
    pub fn adaptive(mut self, budget: Option<std::time::Duration>, precision: Option<f64>) -> Suite {
        self.budget_s = budget.map(|b| b.as_secs_f64());
        self.precision = budget.and(precision);
        self
    }

    /// The rounds an adaptive run's look `after` adds: half as many again (at least
    /// one), so looks come at 5, 8, 12, 18, 27 rounds for a minimum of 5. Few looks, each
    /// with more new data, spend α more usefully than a look after every round.
    pub fn next_batch(&self, after: u32) -> u32 {
        after.div_ceil(2).max(1)
    }

    /// Which look of an adaptive run the rounds up to `last_round` reached: 1 at the
    /// minimum, then one more per batch begun (a batch cut short by Ctrl-C counts, which
    /// errs on the careful side).
    pub fn look_at(&self, last_round: u32) -> u32 {
        let (mut n, mut look) = (self.repetitions, 1);
        while n < last_round {
            n += self.next_batch(n);
            look += 1;
        }
        look
    }

    /// The most looks an adaptive run can take, from its budget: the first after the
    /// minimum rounds (`rounds_left` of them still to run, `round_s` seconds each), then
    /// one per batch that fits what is left of `left_s` if only the baseline and one cell
    /// went on (`pair_s` seconds a round), within the cap of rounds. Decided from timing
    /// alone, before the first look, so the looks' shares of α are fixed before any
    /// answer is seen (compare::look_share); the cheapest continuation makes it the most
    /// looks the budget could reach.
    pub fn planned_looks(&self, left_s: f64, rounds_left: u32, round_s: f64, pair_s: f64) -> u32 {
        let mut left = left_s - f64::from(rounds_left) * round_s;
        let (mut n, mut looks) = (self.repetitions, 1);
        while n < self.max_rounds {
            let batch = self.next_batch(n).min(self.max_rounds - n);
            let cost = f64::from(batch) * pair_s;
            if cost > left {
                break;
            }
            left -= cost;
            n += batch;
            looks += 1;
        }
        looks
    }

    /// An estimate of the minimum plan's duration, for sharing a budget between suites:
    /// each step's duration and warm-up, or a connect's ~2 ms per sample.
    pub fn estimated_s(&self) -> f64 {
        let steps = (self.plan().len()) as f64;
        match self.kind {
            Kind::Load => {
                let d = self.duration.map(|d| d.as_secs_f64()).unwrap_or(10.0);
                let w = self.warmup.map(|d| d.as_secs_f64()).unwrap_or(0.0);
                steps * (d + w + 0.05)
            }
            Kind::Connect => {
                let samples: f64 = self
                    .cells
                    .iter()
                    .map(|c| {
                        c.settings
                            .get("samples")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(100.0)
                    })
                    .sum::<f64>()
                    / self.cells.len().max(1) as f64;
                // About 2.5 ms a connect on 2 cores, averaged over the paths (SCRAM and
                // TLS a few ms, PgBouncer a fraction).
                steps * samples * 0.0025
            }
        }
    }

    /// The steps of one added round (an adaptive run's): `cells` in an order shuffled
    /// with the suite's seed and the round, so a run can be reproduced.
    pub fn round(&self, repetition: u32, cells: &[usize]) -> Vec<Step> {
        let mut rng = Rng::new(self.seed ^ u64::from(repetition).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut order = cells.to_vec();
        if self.order == Order::Interleaved {
            for i in (1..order.len()).rev() {
                let j = rng.range(0, i as i64) as usize;
                order.swap(i, j);
            }
        }
        self.by_size(&order)
            .into_iter()
            .map(|cell| Step { cell, repetition })
            .collect()
    }

    /// The steps in run order: the pre-warm pass (when asked), then each round.
    pub fn plan(&self) -> Vec<Step> {
        let n = self.cells.len();
        let mut rng = Rng::new(self.seed);
        let mut steps = Vec::with_capacity(n * (self.repetitions as usize + 1));
        let mut order: Vec<usize> = (0..n).collect();
        if self.prewarm {
            steps.extend(
                self.by_size(&order)
                    .into_iter()
                    .map(|cell| Step { cell, repetition: 0 }),
            );
        }
        for repetition in 1..=self.repetitions {
            if self.order == Order::Interleaved {
                // Fisher–Yates with the suite's seed, so a plan can be reproduced.
                for i in (1..n).rev() {
                    let j = rng.range(0, i as i64) as usize;
                    order.swap(i, j);
                }
            }
            steps.extend(
                self.by_size(&order)
                    .into_iter()
                    .map(|cell| Step { cell, repetition }),
            );
        }
        steps
    }

    /// A round's order with the cells of one server size (`server_cpus`) side by side,
    /// the sizes in the order they first appear, when a round's cells take turns: the
    /// quota is the server's, set between measurements, so each size is one measurement
    /// whose cells take turns. Without slices the order is kept.
    fn by_size(&self, order: &[usize]) -> Vec<usize> {
        if self.slice.is_none() {
            return order.to_vec();
        }
        let size = |c: usize| self.cells[c].settings.get("server_cpus");
        let mut out: Vec<usize> = Vec::with_capacity(order.len());
        for &c in order {
            if out.contains(&c) {
                continue;
            }
            out.extend(order.iter().copied().filter(|&d| size(d) == size(c)));
        }
        out
    }
}

/// A cell's size in cores: the sandbox's quota (`server_cpus`), else the label of the
/// user's own instance (`cpus`).
pub fn cell_cpus(settings: &Settings) -> Option<f64> {
    settings
        .get("server_cpus")
        .or_else(|| settings.get("cpus"))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSPORT: &str = r#"
name = "transport"
question = "Is a Unix socket faster than TCP?"
kind = "load"
duration = "10s"
warmup = "2s"
repetitions = 3
baseline = "target=tcp"

[defaults]
clients = 5
workload = "tpcb-like"

[axes]
target = ["unix", "tcp"]
connection = ["persistent", "per-transaction"]
"#;

    #[test]
    fn axes_cross_into_named_cells() {
        let s = Suite::parse(TRANSPORT, "transport.toml").unwrap();
        let names: Vec<&str> = s.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "target=unix connection=persistent",
                "target=unix connection=per-transaction",
                "target=tcp connection=persistent",
                "target=tcp connection=per-transaction",
            ]
        );
        assert_eq!(s.baseline, 2, "the first cell with target=tcp");
        assert_eq!(s.cells[1].settings["clients"], "5");
        assert_eq!(s.cells[1].settings["connection"], "per-transaction");
        assert_eq!(s.duration, Some(Duration::from_secs(10)));
        assert!(s.prewarm, "pre-warm is on unless turned off");
    }

    #[test]
    fn a_suite_budget_is_for_run_on_the_full_profile_only() {
        let builtin = load_text("transport").unwrap().1;
        let full = Suite::parse_profile(&builtin, "transport", Lengths::Full).unwrap();
        assert_eq!(full.run_budget_s, Some(1500.0), "transport sets budget = \"25m\"");
        assert_eq!(
            full.budget_s, None,
            "a budget is only applied by `run`, via adaptive()"
        );
        let quick = Suite::parse_profile(&builtin, "transport", Lengths::Quick).unwrap();
        assert_eq!(
            quick.run_budget_s, None,
            "the quick profile's budget is the lab's share"
        );
        assert_eq!(Suite::parse(TRANSPORT, "t").unwrap().run_budget_s, None);
        let bad = TRANSPORT.replace("baseline", "budget = \"soon\"\nbaseline");
        let e = Suite::parse(&bad, "t").unwrap_err().to_string();
        assert!(e.contains("budget"), "{e}");
    }

    #[test]
    fn interleaved_plans_visit_every_cell_each_round_in_shuffled_order() {
        let s = Suite::parse(TRANSPORT, "t").unwrap();
        let plan = s.plan();
        assert_eq!(plan.len(), 4 * 4, "a pre-warm pass and 3 rounds of 4 cells");
        assert!(plan[..4].iter().all(|st| st.is_prewarm()));
        let mut orders = Vec::new();
        for round in 1..=3 {
            let mut cells: Vec<usize> = plan
                .iter()
                .filter(|st| st.repetition == round)
                .map(|st| st.cell)
                .collect();
            orders.push(cells.clone());
            cells.sort();
            assert_eq!(cells, [0, 1, 2, 3], "round {round} visits every cell once");
        }
        assert!(
            orders.windows(2).any(|w| w[0] != w[1]),
            "orders change between rounds: {orders:?}"
        );
        assert_eq!(plan, s.plan(), "the same seed gives the same plan");
        let seq = Suite::parse(
            &TRANSPORT.replace("baseline", "order = \"sequential\"\nbaseline"),
            "t",
        )
        .unwrap();
        assert!(seq
            .plan()
            .iter()
            .filter(|st| st.repetition == 2)
            .map(|st| st.cell)
            .eq(0..4));
    }

    /// Looks at 8, 12, 18, 27 and 30 rounds for a minimum of 8; the budget after the
    /// minimum decides how many of them a run could reach, at the cheapest continuation.
    #[test]
    fn planned_looks_count_the_batches_the_budget_could_reach() {
        let mut s = Suite::parse(TRANSPORT, "t").unwrap();
        s.repetitions = 8;
        s.max_rounds = 30;
        // 8 rounds of 4 s leave 68 of 100 s; batches of 4, 6, 9 and 3 rounds at 1 s each
        // (22 s) all fit: five looks.
        assert_eq!(s.planned_looks(100.0, 8, 4.0, 1.0), 5);
        // 8 s left: the batch of 4 fits, the next of 6 does not.
        assert_eq!(s.planned_looks(40.0, 8, 4.0, 1.0), 2);
        // The minimum alone overruns the budget: one look, which spends all of α.
        assert_eq!(s.planned_looks(20.0, 8, 4.0, 1.0), 1);
        // The cap of rounds ends the looks however large the budget.
        s.max_rounds = 12;
        assert_eq!(s.planned_looks(1e6, 8, 4.0, 1.0), 2);
    }

    #[test]
    fn explicit_cells_for_variants() {
        let text = r#"
name = "thinktime"
question = "What does a pool's lifetime cost?"
kind = "load"
duration = "5s"
figure = "latency_mean_ms"
baseline = "no pool"
[defaults]
clients = 1
think = "100ms"
[[cells]]
name = "no pool"
connection = "per-transaction"
[[cells]]
name = "pool 5s"
connection = "pool"
pool_max_lifetime = "5s"
"#;
        let s = Suite::parse(text, "t").unwrap();
        let names: Vec<&str> = s.cells.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["no pool", "pool 5s"]);
        assert_eq!(s.cells[1].settings["pool_max_lifetime"], "5s");
        assert_eq!(s.cells[1].settings["think"], "100ms");
        assert_eq!(s.figure, "latency_mean_ms");
        assert_eq!(s.better, crate::stats::compare::Better::Lower);
        assert_eq!(s.baseline, 0);
        let bad = text.replace("latency_mean_ms", "happiness");
        assert!(format!("{:#}", Suite::parse(&bad, "t").unwrap_err()).contains("figure \"happiness\""));
    }

    #[test]
    fn builtin_suites_parse_in_both_profiles() {
        for (name, text) in BUILTIN {
            for profile in [Lengths::Full, Lengths::Quick] {
                let s = Suite::parse_profile(text, name, profile).unwrap_or_else(|e| panic!("{name}: {e:#}"));
                assert!(!s.cells.is_empty(), "{name}");
                assert!(
                    s.cells.iter().all(|c| c.settings.contains_key("target")),
                    "{name}: every cell has a target"
                );
            }
        }
        let full = Suite::parse_profile(BUILTIN[2].1, "scaling", Lengths::Full).unwrap();
        let quick = Suite::parse_profile(BUILTIN[2].1, "scaling", Lengths::Quick).unwrap();
        assert_eq!(
            (full.cells.len(), quick.cells.len()),
            (48, 12),
            "the quick profile narrows the axes"
        );
        // Both profiles ask the size question: every larger size against 0.5 core, and
        // the baseline at 0.5 core.
        for s in [&full, &quick] {
            assert_eq!(s.cells[s.baseline].settings["server_cpus"], "0.5");
            for c in &s.cells {
                let smallest = c.settings["server_cpus"] == "0.5";
                assert_eq!(c.versus.is_none(), smallest, "{}", c.name);
            }
        }
        assert_ne!(
            full.question, quick.question,
            "the quick profile asks fewer questions"
        );
        assert!(load_text("nope")
            .unwrap_err()
            .to_string()
            .contains("built-in suites: connect, transport"));
    }

    #[test]
    fn the_scaling_suite_runs_every_client_count_on_tables_whose_scale_holds_it() {
        // tpcb-like updates one of `scale` branches rows per transaction: more clients
        // than that queue on the rows' locks. The full profile at the experiment's 100.
        for (profile, want) in [(Lengths::Full, 100), (Lengths::Quick, 8)] {
            let s = Suite::parse_profile(BUILTIN[2].1, "scaling", profile).unwrap();
            for c in &s.cells {
                let o =
                    crate::options::LoadOptions::from_settings(&c.settings, None, None, "connbench").unwrap();
                let scale = crate::options::dataset_scale(&c.settings).unwrap();
                assert_eq!(scale, Some(want), "{}", c.name);
                assert!(want as usize >= o.clients, "{}", c.name);
                assert_eq!(o.schema, format!("connbench_scale{want}"));
                assert_eq!(o.scale_warning(o.clients, i64::from(want)), None);
            }
        }
    }

    #[test]
    fn mistakes_are_named() {
        let e = |text: &str| format!("{:#}", Suite::parse(text, "bad.toml").unwrap_err());
        assert!(e(&TRANSPORT.replace("clients = 5", "clients = 5\ncolour = 1"))
            .contains("unknown setting \"colour\" in [defaults]"));
        assert!(e(&TRANSPORT.replace("target = [", "flavour = ["))
            .contains("unknown setting \"flavour\" in [axes]"));
        assert!(e(&TRANSPORT.replace("target=tcp", "target=tls"))
            .contains("baseline \"target=tls\" matches no cell"));
        assert!(e(&TRANSPORT.replace("repetitions = 3", "repetitions = 0")).contains("give at least 1"));
        assert!(e(&TRANSPORT.replace("\"10s\"", "\"10 parsecs\"")).contains("duration"));
        assert!(e(&TRANSPORT.replace("duration = \"10s\"\n", "")).contains("a load suite needs duration"));
        assert!(e(&TRANSPORT.replace("kind = \"load\"", "kind = \"dance\""))
            .contains("cannot read suite bad.toml"));
        assert!(e(&format!("{TRANSPORT}\nsurprise = true\n")).contains("surprise"));
    }

    #[test]
    fn a_mistyped_key_gets_the_near_one() {
        let e = |text: &str| format!("{:#}", Suite::parse(text, "bad.toml").unwrap_err());
        // A setting in [defaults] and in [axes], a top-level key, a baseline.
        let err = e(&TRANSPORT.replace("clients = 5", "client = 5"));
        assert!(
            err.contains("unknown setting \"client\" in [defaults]; did you mean \"clients\"?"),
            "{err}"
        );
        let err = e(&TRANSPORT.replace("target = [", "targte = ["));
        assert!(err.contains("did you mean \"target\"?"), "{err}");
        let err = e(&TRANSPORT.replace("duration = ", "duraton = "));
        assert!(
            err.contains("unknown field `duraton`") && err.contains("did you mean \"duration\"?"),
            "{err}"
        );
        let err = e(&TRANSPORT.replace("target=tcp", "target=tcp connection=persistnet"));
        assert!(
            err.contains("did you mean \"target=tcp connection=persistent\"?"),
            "{err}"
        );
        // Nothing near: no guess, the list only.
        let err = e(&TRANSPORT.replace("clients = 5", "colour = 5"));
        assert!(!err.contains("did you mean"), "{err}");
        assert!(err.contains("known settings: target,"), "{err}");
        let err = format!("{:#}", load_text("transprot").unwrap_err());
        assert!(err.contains("did you mean \"transport\"?"), "{err}");
    }
}
