//! What `buddy judge` prints: a line for each run buddy would have stopped (or whose
//! answer it would not have taken), with the guard and its evidence, and a table per
//! source — false stops on solved runs, loops caught, model calls saved on unsolved runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use buddy_engine::{LONG_LOOP_REPEATS, LOOP_REPEATS, Outcome, RunJudgement};
use serde::Serialize;

/// One judged run, as `--json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct JudgedRun {
    pub id: String,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    #[serde(flatten)]
    pub judgement: RunJudgement,
    /// Whether it is a loop of [`LOOP_REPEATS`] identical calls stopped by the last of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_caught: Option<bool>,
    /// Whether it is a loop of [`LONG_LOOP_REPEATS`] identical calls with nothing new,
    /// ended by the last of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_loop_ended: Option<bool>,
}

/// The figures of one source (or of all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub runs: u32,
    pub solved: u32,
    pub unsolved: u32,
    /// Runs that could not be read or replayed.
    pub unreadable: u32,
    /// Solved runs buddy would have stopped, or whose answer it would not have taken.
    pub false_stops: u32,
    /// Of those, the ones whose agent did something new after buddy's stop (the others
    /// only repeated themselves to their end: stopping them lost no work).
    pub false_stops_losing_work: u32,
    /// Solved runs where buddy would have withheld a call's run but let the turn go on.
    pub solved_altered: u32,
    /// Solved runs that would have hit a model-call or tool-call cap.
    pub solved_capped: u32,
    /// Runs with [`LOOP_REPEATS`] or more identical calls in a row, and of those the ones
    /// stopped by the last of them.
    pub loops: u32,
    pub loops_caught: u32,
    /// Of those, the ones whose repeated calls also got the same result each time.
    pub loops_same_result: u32,
    pub loops_same_result_caught: u32,
    /// Runs in which buddy would have warned the model (a note beside a result).
    pub warned: u32,
    /// Runs with [`LONG_LOOP_REPEATS`] or more identical calls in a row that brought
    /// nothing new, and of those the ones ended by the last of them.
    pub long_loops: u32,
    pub long_loops_ended: u32,
    /// Unsolved runs buddy would have stopped, their model calls, and the model calls
    /// after buddy's stop (less its own Finalize call).
    pub unsolved_stopped: u32,
    pub unsolved_model_calls: u64,
    pub unsolved_calls_saved: u64,
}

impl Tally {
    /// Counts one judged run.
    pub fn add(&mut self, run: &JudgedRun) {
        let j = &run.judgement;
        self.runs += 1;
        match run.success {
            Some(true) => {
                self.solved += 1;
                if j.outcome.breaks_run() {
                    self.false_stops += 1;
                    self.false_stops_losing_work +=
                        u32::from(j.actions_lost > 0 || j.outcome == Outcome::AnswerRejected);
                } else if j.outcome == Outcome::Altered {
                    self.solved_altered += 1;
                }
                if j.stop.as_ref().is_some_and(|s| {
                    matches!(
                        s.guard,
                        Some(
                            buddy_core::GuardKind::ModelCallLimit
                                | buddy_core::GuardKind::ToolCallLimit
                        )
                    )
                }) {
                    self.solved_capped += 1;
                }
            }
            Some(false) => {
                self.unsolved += 1;
                self.unsolved_model_calls += u64::from(j.model_calls);
                if j.outcome == Outcome::Stopped {
                    self.unsolved_stopped += 1;
                    self.unsolved_calls_saved += u64::from(j.model_calls_saved);
                }
            }
            None => {}
        }
        self.warned += u32::from(j.warned());
        if let Some(ended) = run.long_loop_ended {
            self.long_loops += 1;
            self.long_loops_ended += u32::from(ended);
        }
        if let Some(caught) = run.loop_caught {
            self.loops += 1;
            self.loops_caught += u32::from(caught);
            if j.repeats.same_result {
                self.loops_same_result += 1;
                self.loops_same_result_caught += u32::from(caught);
            }
        }
    }
}

/// Tallies by source, in name order, and over all.
#[derive(Debug, Default)]
pub struct Summary {
    pub by_source: BTreeMap<String, Tally>,
    pub all: Tally,
}

impl Summary {
    /// Counts one judged run.
    pub fn add(&mut self, run: &JudgedRun) {
        self.by_source
            .entry(run.source.clone())
            .or_default()
            .add(run);
        self.all.add(run);
    }

    /// Counts a run that could not be read or judged.
    pub fn unreadable(&mut self, source: &str) {
        self.by_source
            .entry(source.to_owned())
            .or_default()
            .unreadable += 1;
        self.all.unreadable += 1;
    }

    /// The table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:>6} {:>7} {:>16} {:>10} {:>8} {:>7} {:>7} {:>16} {:>12} {:>16} {:>18} {:>22}",
            "source",
            "runs",
            "solved",
            "false stops",
            "lose work",
            "altered",
            "capped",
            "warned",
            format!("loops ({LOOP_REPEATS}+ same)"),
            "any results",
            format!("{LONG_LOOP_REPEATS}+ ended"),
            "unsolved stopped",
            "calls saved (unsolved)"
        );
        let mut rows: Vec<(&str, &Tally)> = self
            .by_source
            .iter()
            .map(|(name, tally)| (name.as_str(), tally))
            .collect();
        if self.by_source.len() > 1 {
            rows.push(("all", &self.all));
        }
        for (name, t) in rows {
            let _ = writeln!(
                out,
                "{:<24} {:>6} {:>7} {:>16} {:>10} {:>8} {:>7} {:>7} {:>16} {:>12} {:>16} {:>18} {:>22}",
                name,
                t.runs,
                t.solved,
                format!(
                    "{} ({})",
                    t.false_stops,
                    percent(t.false_stops.into(), t.solved.into())
                ),
                t.false_stops_losing_work,
                t.solved_altered,
                t.solved_capped,
                t.warned,
                format!(
                    "{} of {} caught",
                    t.loops_same_result_caught, t.loops_same_result
                ),
                format!("{} of {}", t.loops_caught, t.loops),
                format!("{} of {}", t.long_loops_ended, t.long_loops),
                format!("{} of {}", t.unsolved_stopped, t.unsolved),
                format!(
                    "{} of {} ({})",
                    t.unsolved_calls_saved,
                    t.unsolved_model_calls,
                    percent(t.unsolved_calls_saved, t.unsolved_model_calls)
                ),
            );
        }
        let unreadable = self.all.unreadable;
        if unreadable > 0 {
            let _ = writeln!(
                out,
                "{unreadable} run(s) could not be read or replayed (listed above)"
            );
        }
        out
    }
}

/// What each column of the table means, in the table's order: (its heading, a sentence a
/// reader understands without the README). Printed under the table as its legend.
pub fn columns() -> [(String, String); 13] {
    [
        col(
            "source",
            "the file (or the `source` field) the runs came from; `all` sums them",
        ),
        col("runs", "runs judged"),
        col(
            "solved",
            "runs labelled solved (`success: true`); the others are unsolved or unlabelled",
        ),
        col(
            "false stops",
            "solved runs buddy would have stopped before their end, or whose answer it would \
             have rejected (share of solved runs); stopping such a run is a mistake only if \
             the run still had work to do, which the next column says",
        ),
        col(
            "lose work",
            "of the false stops, those that did something new after buddy's stop (or whose \
             answer it rejected); the others only repeated calls until they ended, so \
             stopping them lost nothing",
        ),
        col(
            "altered",
            "solved runs buddy would have changed but not stopped (a repeated call answered \
             from its earlier result, a reply asked for again)",
        ),
        col(
            "capped",
            "solved runs that would have reached the model-call or tool-call limit",
        ),
        col(
            "warned",
            "runs where buddy would have put a warning beside a result and gone on",
        ),
        col(
            format!("loops ({LOOP_REPEATS}+ same)"),
            format!(
                "runs that made one call with the same arguments and got the same result \
                 {LOOP_REPEATS} or more times in a row; \"caught\": stopped at the {LOOP_REPEATS}th"
            ),
        ),
        col(
            "any results",
            format!(
                "the same for {LOOP_REPEATS} or more identical calls in a row whatever their \
                 results, and how many buddy stopped at the {LOOP_REPEATS}th"
            ),
        ),
        col(
            format!("{LONG_LOOP_REPEATS}+ ended"),
            format!(
                "runs that made one call {LONG_LOOP_REPEATS} or more times in a row with \
                 nothing new, and how many buddy ended at the {LONG_LOOP_REPEATS}th"
            ),
        ),
        col(
            "unsolved stopped",
            "unsolved runs buddy would have stopped, of all unsolved runs",
        ),
        col(
            "calls saved (unsolved)",
            "model calls unsolved runs made after buddy's stop (less the one call buddy makes \
             to answer), of all their model calls",
        ),
    ]
}

/// A column's heading and meaning, owned.
fn col(name: impl Into<String>, meaning: impl Into<String>) -> (String, String) {
    (name.into(), meaning.into())
}

/// The table's legend: each column's heading and what it counts, one line each.
pub fn legend() -> String {
    let columns = columns();
    let width = columns
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::from("\ncolumns:\n");
    for (name, meaning) in columns {
        let mut line = format!("  {name:<width$} ");
        for word in meaning.split_whitespace() {
            if line.chars().count() + 1 + word.chars().count() > LEGEND_WIDTH {
                let _ = writeln!(out, "{line}");
                line = " ".repeat(width + 3);
            }
            line.push(' ');
            line.push_str(word);
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The legend's lines are wrapped to this many characters.
const LEGEND_WIDTH: usize = 96;

/// `part` of `whole` as a percentage with one decimal, or `-` for none.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// The lines that say what buddy would have done to `run`; empty when it would have let
/// it be (or only `verbose` shows it).
pub fn run_lines(run: &JudgedRun, verbose: bool) -> String {
    let j = &run.judgement;
    if !verbose && !j.outcome.breaks_run() {
        return String::new();
    }
    let label = match run.success {
        Some(true) => "solved",
        Some(false) => "unsolved",
        None => "unlabelled",
    };
    let mut out = format!("[{label}] {}: {}", run.id, j.outcome.as_str());
    match &j.stop {
        Some(stop) => {
            let _ = write!(
                out,
                " after model call {} of {} (turn {})",
                stop.after_model_call, stop.of_model_calls, stop.turn
            );
            if let Some(reason) = stop.reason {
                let _ = write!(out, ", {}", reason.as_str());
            }
            if let Some(guard) = stop.guard {
                let _ = write!(out, " by {}", guard.as_str());
            }
            if !stop.detail.is_empty() {
                let _ = write!(out, ": {}", stop.detail);
            }
            out.push('\n');
            for e in &stop.evidence {
                let _ = writeln!(
                    out,
                    "    {} {} {} -> {}",
                    e.call_id,
                    e.name,
                    one_line(&e.arguments, 100),
                    one_line(&e.result, 80)
                );
            }
        }
        None => {
            let _ = writeln!(out, " ({} model calls)", j.model_calls);
        }
    }
    for i in &j.interventions {
        if verbose || i.action != buddy_core::GuardAction::Finalize {
            let skill = i
                .skill
                .as_deref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    call {}: {} {}{skill}",
                i.model_call,
                i.guard.as_str(),
                i.action.as_str()
            );
        }
    }
    out
}

/// `text` on one line, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return if flat.is_empty() {
            "(empty)".to_owned()
        } else {
            flat
        };
    }
    let cut: String = flat.chars().take(max).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_defines_every_column_of_the_table_in_its_order() {
        let table = Summary::default().table();
        let heading = table.lines().next().unwrap();
        let mut rest = heading;
        for (name, meaning) in columns() {
            let at = rest
                .find(name.as_str())
                .unwrap_or_else(|| panic!("{name} in {heading}"));
            rest = &rest[at + name.len()..];
            assert!(meaning.split_whitespace().count() >= 2, "{name}: {meaning}");
        }
        assert!(rest.trim().is_empty(), "a column without a legend: {rest}");
        let legend = legend();
        for (name, _) in columns() {
            assert!(legend.contains(&format!("  {name} ")), "{legend}");
        }
        assert!(
            legend.lines().all(|l| l.chars().count() <= LEGEND_WIDTH),
            "{legend}"
        );
    }
}
