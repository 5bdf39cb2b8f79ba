//! Reading a suite file: the TOML as written (`SuiteFile`, with the quick profile's
//! overrides), checked key by key and value by value, its lengths parsed, its cells
//! crossed from `[defaults]`, `[[cells]]` and `[axes]`, each cell given the cell it is
//! compared with, and its figure and baseline found. Apart from `suite`, which owns the
//! validated `Suite` and its plan: reading the file is most of the lines and none of the
//! plan.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{
    cell_cpus, default_max_rounds, default_noise_threshold, default_repetitions, default_true, did_you_mean,
    Cell, Kind, Lengths, Order, Settings, Suite, CONNECT_FIGURES, LOAD_FIGURES, SETTINGS,
};

/// A suite file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    question: String,
    kind: Kind,
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    warmup: Option<String>,
    #[serde(default = "default_true")]
    prewarm: bool,
    #[serde(default = "default_repetitions")]
    repetitions: u32,
    #[serde(default)]
    order: Order,
    /// Load suites: a round's cells take turns this long each (time slices) rather than
    /// running one after another.
    #[serde(default)]
    slices: Option<String>,
    #[serde(default)]
    baseline: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    figure: Option<String>,
    /// A ratio within 1 ± this is "the same" (a fraction: 0.02 is 2%).
    #[serde(default)]
    noise_threshold: Option<f64>,
    /// The most rounds an adaptive run (`--budget`) may reach.
    #[serde(default)]
    max_rounds: Option<u32>,
    /// The budget `connbench run` gives the full profile when no `--budget` is given:
    /// for a suite whose question is small against the machine's noise, so that a run
    /// adds rounds until it is answered rather than stopping at its repetitions.
    #[serde(default)]
    budget: Option<String>,
    #[serde(default)]
    defaults: toml::Table,
    #[serde(default)]
    axes: toml::Table,
    /// Explicit cells (each a table of settings with a `name`), for variants a cross
    /// product cannot express; crossed with `axes` when both are given.
    #[serde(default)]
    cells: Vec<toml::Table>,
    /// Overrides for the quick profile (`duration`, `warmup`, `repetitions`, and
    /// `defaults` settings).
    #[serde(default)]
    quick: Option<QuickFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuickFile {
    /// The question the quick profile's fewer cells ask, when not the full one's.
    question: Option<String>,
    duration: Option<String>,
    slices: Option<String>,
    warmup: Option<String>,
    repetitions: Option<u32>,
    prewarm: Option<bool>,
    #[serde(default)]
    defaults: toml::Table,
    /// Replaces `[axes]` entirely when given.
    axes: Option<toml::Table>,
    /// Replaces `[[cells]]` entirely when given: for settings whose quick value is not
    /// the full one's (a pool lifetime kept at its ratio to a shorter think time), so the
    /// cells can say so in their names.
    cells: Option<Vec<toml::Table>>,
}

impl Suite {
    /// Parses a suite with the given profile's lengths.
    pub fn parse_profile(text: &str, origin: &str, profile: Lengths) -> Result<Suite> {
        let mut file: SuiteFile = toml::from_str(text)
            .map_err(with_suggestion)
            .with_context(|| format!("cannot read suite {origin}"))?;
        let mut quick_lab = false;
        if profile == Lengths::Quick {
            if let Some(q) = file.quick.take() {
                quick_lab = true;
                file.apply_quick(q);
            }
        }
        let quick_lab = quick_lab || file.quick.is_some();
        let name = &file.name;
        let lengths = file.lengths(profile)?;
        let noise_threshold = match file.noise_threshold {
            None => default_noise_threshold(),
            Some(t) if t > 0.0 && t < 0.5 => t,
            Some(t) => {
                bail!("suite {name}: noise_threshold = {t}: give a fraction between 0 and 0.5 (0.02 is 2%)")
            }
        };
        let cells = file.cells()?;
        let (figure, better) = file.figure()?;
        let baseline = match &file.baseline {
            None => 0,
            Some(b) => find_cell(&cells, b).ok_or_else(|| {
                let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
                anyhow::anyhow!(
                    "suite {name}: baseline {b:?} matches no cell{}; cells: {}",
                    did_you_mean(b, names.iter().copied()),
                    names.join(", ")
                )
            })?,
        };
        Ok(Suite {
            quick_lab,
            name: file.name.clone(),
            question: file.question,
            kind: file.kind,
            duration: lengths.duration,
            warmup: lengths.warmup,
            prewarm: file.prewarm,
            repetitions: file.repetitions,
            order: file.order,
            slice: lengths.slice,
            seed: file.seed.unwrap_or(0x636f_6e6e_6265_6e63),
            figure,
            better,
            noise_threshold,
            budget_s: None,
            precision: None,
            run_budget_s: lengths.run_budget.map(|b| b.as_secs_f64()),
            max_rounds: file
                .max_rounds
                .unwrap_or(default_max_rounds())
                .max(file.repetitions),
            looks: None,
            cells,
            baseline,
        })
    }
}

/// A suite's lengths, parsed and checked.
struct ParsedLengths {
    duration: Option<Duration>,
    warmup: Option<Duration>,
    slice: Option<Duration>,
    /// The budget `run` gives the full profile (none on the quick profile).
    run_budget: Option<Duration>,
}

impl SuiteFile {
    /// The quick profile's overrides in place of the full profile's values.
    fn apply_quick(&mut self, q: QuickFile) {
        if let Some(question) = q.question {
            self.question = question;
        }
        self.duration = q.duration.or(self.duration.take());
        self.slices = q.slices.or(self.slices.take());
        self.warmup = q.warmup.or(self.warmup.take());
        self.repetitions = q.repetitions.unwrap_or(self.repetitions);
        self.prewarm = q.prewarm.unwrap_or(self.prewarm);
        for (k, v) in q.defaults {
            self.defaults.insert(k, v);
        }
        if let Some(axes) = q.axes {
            self.axes = axes;
        }
        if let Some(cells) = q.cells {
            self.cells = cells;
        }
    }

    /// The repetitions, durations, slices and budget, checked.
    fn lengths(&self, profile: Lengths) -> Result<ParsedLengths> {
        let name = &self.name;
        if self.repetitions == 0 {
            bail!("suite {name}: repetitions = 0; give at least 1 (5 or more to see a confidence interval narrow)");
        }
        let parse_d = |key: &str, v: &Option<String>| -> Result<Option<Duration>> {
            v.as_deref()
                .map(|t| {
                    crate::units::parse_duration(t).map_err(|e| anyhow::anyhow!("suite {name}: {key}: {e}"))
                })
                .transpose()
        };
        let duration = parse_d("duration", &self.duration)?;
        let warmup = parse_d("warmup", &self.warmup)?;
        let slice = parse_d("slices", &self.slices)?;
        if let Some(d) = slice {
            if self.kind != Kind::Load {
                bail!("suite {name}: slices is for load suites (connect suites already interleave connection by connection)");
            }
            if d < Duration::from_millis(20) || d > Duration::from_secs(10) {
                bail!(
                    "suite {name}: slices = {}: give a turn between 20ms and 10s (100ms is a good start)",
                    crate::units::format_duration(d)
                );
            }
        }
        // The quick profile's budget is the lab's to share; the suite's own is for `run`.
        let run_budget = match profile {
            Lengths::Full => parse_d("budget", &self.budget)?,
            Lengths::Quick => None,
        };
        if self.kind == Kind::Load && duration.is_none() {
            bail!("suite {name}: a load suite needs duration = \"10s\" (or another length)");
        }
        Ok(ParsedLengths {
            duration,
            warmup,
            slice,
            run_budget,
        })
    }

    /// The cells: `[[cells]]` (or the defaults alone) crossed with the axes, each with
    /// the cell it is compared with.
    fn cells(&self) -> Result<Vec<Cell>> {
        let name = &self.name;
        let mut defaults = Settings::new();
        for (k, v) in &self.defaults {
            check_setting(k, name, "defaults")?;
            defaults.insert(k.clone(), toml_value_text(k, v, name)?);
        }
        let mut axes: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in &self.axes {
            check_setting(k, name, "axes")?;
            let values = match v {
                toml::Value::Array(items) => items
                    .iter()
                    .map(|i| toml_value_text(k, i, name))
                    .collect::<Result<Vec<_>>>()?,
                other => vec![toml_value_text(k, other, name)?],
            };
            if values.is_empty() {
                bail!("suite {name}: axis {k} has no values");
            }
            axes.push((k.clone(), values));
        }
        let mut bases = Vec::new();
        for (i, t) in self.cells.iter().enumerate() {
            let mut settings = defaults.clone();
            let mut label = None;
            let mut versus = None;
            for (k, v) in t {
                if k == "name" {
                    label = Some(toml_value_text(k, v, name)?);
                    continue;
                }
                if k == "versus" {
                    versus = Some(toml_value_text(k, v, name)?);
                    continue;
                }
                check_setting(k, name, "cells")?;
                settings.insert(k.clone(), toml_value_text(k, v, name)?);
            }
            let label = label
                .ok_or_else(|| anyhow::anyhow!("suite {name}: [[cells]] entry {} has no name", i + 1))?;
            bases.push((label, settings, versus));
        }
        if bases.is_empty() {
            bases.push((String::new(), defaults.clone(), None));
        }
        let mut cells = Vec::new();
        for (label, settings, _) in &bases {
            for mut c in cross(&axes, settings) {
                if !label.is_empty() {
                    c.name = if c.axes.is_empty() {
                        label.clone()
                    } else {
                        format!("{label} {}", c.name)
                    };
                    c.axes.insert(0, ("cell".to_string(), label.clone()));
                }
                cells.push(c);
            }
        }
        resolve_versus(&mut cells, &bases, name)?;
        for c in &cells {
            if let Some(v) = c.settings.get("cpus") {
                crate::sandbox::cgroup::parse_cpus(v)
                    .map_err(|e| anyhow::anyhow!("suite {name}: cell {}: cpus = {v:?}: {e}", c.name))?;
            }
        }
        versus_smallest_size(&mut cells);
        Ok(cells)
    }

    /// The figure cells are compared on, and which way is better.
    fn figure(&self) -> Result<(String, crate::stats::compare::Better)> {
        let figures = match self.kind {
            Kind::Load => LOAD_FIGURES,
            Kind::Connect => CONNECT_FIGURES,
        };
        let figure = self.figure.clone().unwrap_or_else(|| figures[0].to_string());
        // A trace cell's transaction shape (experiment::replayed) is named by its id.
        let shape = self.kind == Kind::Load && crate::experiment::replayed::is_shape_figure(&figure);
        if !figures.contains(&figure.as_str()) && !shape {
            bail!(
                "suite {}: figure {figure:?} is not one a {:?} run reports; use one of {}",
                self.name,
                self.kind,
                figures.join(", ")
            );
        }
        let better = if figure == "tps" {
            crate::stats::compare::Better::Higher
        } else {
            crate::stats::compare::Better::Lower
        };
        Ok((figure, better))
    }
}

fn toml_value_text(key: &str, v: &toml::Value, suite: &str) -> Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => bail!(
            "suite {suite}: {key} holds a {}, not a single value (a string or a number)",
            other.type_str()
        ),
    })
}

fn check_setting(key: &str, suite: &str, section: &str) -> Result<()> {
    if !SETTINGS.contains(&key) {
        bail!(
            "suite {suite}: unknown setting {key:?} in [{section}]{}; known settings: {}",
            did_you_mean(key, SETTINGS.iter().copied()),
            SETTINGS.join(", ")
        );
    }
    Ok(())
}

/// serde's "unknown field `X`, expected one of `A`, `B`, ..." (a suite file's top-level
/// or `[quick]` key) with the near one added: `did you mean "A"?`.
fn with_suggestion(e: toml::de::Error) -> anyhow::Error {
    let message = e.message().to_string();
    let suggestion = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(unknown, rest)| {
            let expected: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
            did_you_mean(unknown, expected)
        })
        .unwrap_or_default();
    match suggestion.strip_prefix("; ") {
        Some(hint) => anyhow::anyhow!("{}\n{hint}", e.to_string().trim_end()),
        None => anyhow::Error::new(e),
    }
}

/// Every combination of the axes, in declaration order (the last axis varies fastest).
fn cross(axes: &[(String, Vec<String>)], defaults: &Settings) -> Vec<Cell> {
    let mut cells = vec![Cell {
        name: String::new(),
        axes: Vec::new(),
        settings: defaults.clone(),
        versus: None,
    }];
    for (key, values) in axes {
        let mut next = Vec::with_capacity(cells.len() * values.len());
        for c in &cells {
            for v in values {
                let mut cell = c.clone();
                // Names and axis values are for display: a target's password stays in
                // the settings only, which are redacted wherever they are shown or stored.
                let shown = if key == "target" {
                    crate::targets::redact(v)
                } else {
                    v.clone()
                };
                cell.axes.push((key.clone(), shown));
                cell.settings.insert(key.clone(), v.clone());
                next.push(cell);
            }
        }
        cells = next;
    }
    for c in &mut cells {
        c.name = if c.axes.is_empty() {
            "all".to_string()
        } else {
            c.axes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
    }
    cells
}

/// Points each cell whose `[[cells]]` entry has `versus = "LABEL"` at the cell of that
/// label with the same axis values.
fn resolve_versus(
    cells: &mut [Cell],
    bases: &[(String, Settings, Option<String>)],
    suite: &str,
) -> Result<()> {
    let labels: Vec<&str> = bases.iter().map(|(l, _, _)| l.as_str()).collect();
    for (label, _, versus) in bases {
        let Some(versus) = versus else { continue };
        if versus == label {
            bail!("suite {suite}: cell {label:?} has versus = {versus:?}, itself; name another cell");
        }
        if !labels.contains(&versus.as_str()) {
            bail!(
                "suite {suite}: cell {label:?} has versus = {versus:?}, which names no cell{}; cells: {}",
                did_you_mean(versus, labels.iter().copied()),
                labels.join(", ")
            );
        }
        for i in 0..cells.len() {
            if cells[i].axes.first().map(|(_, l)| l) != Some(label) {
                continue;
            }
            let j = cells.iter().position(|c| {
                c.axes.first().map(|(_, l)| l) == Some(versus) && c.axes[1..] == cells[i].axes[1..]
            });
            cells[i].versus = j;
        }
    }
    Ok(())
}

/// A cell on a `server_cpus` axis is compared with the same cell at the smallest size
/// (unless its `versus` says otherwise), so the answer for a size is how it scaled: "2
/// cores: 3.55x the tps of 0.5 core". The smallest size's cells keep the baseline, which
/// a suite with a size axis names at the smallest size (the axis' first value).
///
/// A cell of the user's own instance labelled with `cpus` is compared likewise with the
/// smallest instance's cell of the same other settings (its target aside).
fn versus_smallest_size(cells: &mut [Cell]) {
    let size = |c: &Cell| cell_cpus(&c.settings);
    let others = |c: &Cell| -> Settings {
        let mut s = c.settings.clone();
        s.remove("server_cpus");
        if s.remove("cpus").is_some() {
            s.remove("target");
            s.remove("size");
        }
        s
    };
    for i in 0..cells.len() {
        if cells[i].versus.is_some() || size(&cells[i]).is_none() {
            continue;
        }
        let rest = others(&cells[i]);
        let smallest = (0..cells.len())
            .filter(|&j| size(&cells[j]).is_some() && others(&cells[j]) == rest)
            .min_by(|&a, &b| {
                size(&cells[a])
                    .unwrap_or(0.0)
                    .total_cmp(&size(&cells[b]).unwrap_or(0.0))
            });
        if let Some(j) = smallest.filter(|&j| size(&cells[j]) < size(&cells[i])) {
            cells[i].versus = Some(j);
        }
    }
}

/// The cell a baseline names: its full name, or `axis=value` pairs it contains.
fn find_cell(cells: &[Cell], wanted: &str) -> Option<usize> {
    if let Some(i) = cells.iter().position(|c| c.name == wanted) {
        return Some(i);
    }
    let parts: Vec<(&str, &str)> = wanted
        .split_whitespace()
        .filter_map(|p| p.split_once('='))
        .collect();
    if parts.is_empty() {
        return None;
    }
    cells.iter().position(|c| {
        parts
            .iter()
            .all(|(k, v)| c.axes.iter().any(|(ck, cv)| ck == k && cv == v))
    })
}
