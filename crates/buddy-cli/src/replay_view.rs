//! How `buddy replay` shows a replayed turn beside its recording, and a summary of many.

use std::collections::BTreeMap;
use std::fmt::Write;

use buddy_engine::{Beyond, Comparison, LoopPolicy, POLICY_FIELDS, Side, TripAt, Wanted};

/// Width of the label column and of the recorded column.
const LABEL: usize = 14;
const COLUMN: usize = 34;

/// The fields where `policy` differs from `recorded`, as `field = value (recorded x)`.
pub fn policy_changes(recorded: &LoopPolicy, policy: &LoopPolicy) -> Vec<String> {
    POLICY_FIELDS
        .iter()
        .filter_map(|f| {
            let (before, after) = (f.value_words(recorded), f.value_words(policy));
            (before != after).then(|| format!("{} = {after} (recorded {before})", f.name))
        })
        .collect()
}

/// The stop of a side, as one short phrase.
fn stop_words(side: &Side, beyond: Option<&Beyond>) -> String {
    match (side.reason, beyond) {
        (Some(reason), Some(b)) if b.wanted == Wanted::FinalAnswer => {
            format!("{reason}, its final answer beyond the recording")
        }
        (_, Some(b)) => format!("beyond the recording after call {}", b.after_model_call),
        (Some(reason), None) => reason.to_string(),
        (None, None) => "did not end".to_owned(),
    }
}

/// What sent a side to Finalize, as one short phrase.
fn stopped_by_words(side: &Side) -> String {
    match &side.stopped_by {
        Some(s) if s.detail.is_empty() => s.guard.as_str().to_owned(),
        Some(s) => format!("{}: {}", s.guard.as_str(), s.detail),
        None => "—".to_owned(),
    }
}

/// `text` cut to `width` characters.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let cut: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{cut}…")
}

fn row(out: &mut String, label: &str, recorded: &str, replayed: &str) {
    let _ = writeln!(
        out,
        "  {label:<LABEL$}{:<COLUMN$}  {replayed}",
        fit(recorded, COLUMN)
    );
}

fn trips_line(trips: &[TripAt]) -> String {
    trips
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A replayed turn beside its recording. `title` names the turn.
pub fn side_by_side(title: &str, comparison: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    let (recorded, replayed) = (&comparison.recorded, &comparison.replayed);
    row(&mut out, "", "recorded", "replayed");
    row(
        &mut out,
        "stop",
        &stop_words(recorded, None),
        &stop_words(replayed, comparison.beyond.as_ref()),
    );
    row(
        &mut out,
        "model calls",
        &recorded.model_calls.to_string(),
        &replayed.model_calls.to_string(),
    );
    row(
        &mut out,
        "tool calls",
        &recorded.tool_calls.to_string(),
        &replayed.tool_calls.to_string(),
    );
    row(
        &mut out,
        "stopped by",
        &stopped_by_words(recorded),
        &stopped_by_words(replayed),
    );
    if let Some(stopped) = &replayed.stopped_by {
        for evidence in &stopped.evidence {
            let _ = writeln!(
                out,
                "  {:<LABEL$}{:<COLUMN$}  evidence: {} {} {} → {}",
                "",
                "",
                evidence.call_id,
                evidence.name,
                fit(&evidence.arguments, 60),
                fit(&evidence.result.replace('\n', " "), 60)
            );
        }
    }
    if let Some(beyond) = &comparison.beyond {
        let _ = writeln!(out, "  beyond the recording: {}", beyond.why);
    }
    if comparison.only_recorded.is_empty() && comparison.only_replayed.is_empty() {
        let _ = writeln!(out, "  guard trips: the same ({})", recorded.trips.len());
    } else {
        if !comparison.only_recorded.is_empty() {
            let _ = writeln!(
                out,
                "  trips only in the recording: {}",
                trips_line(&comparison.only_recorded)
            );
        }
        if !comparison.only_replayed.is_empty() {
            let _ = writeln!(
                out,
                "  trips only in the replay: {}",
                trips_line(&comparison.only_replayed)
            );
        }
    }
    for caveat in &comparison.caveats {
        let _ = writeln!(out, "  note: {caveat}");
    }
    let verdict = if comparison.same_stop {
        "= same stop, same calls"
    } else {
        "≠ the stop changes"
    };
    let _ = writeln!(out, "  {verdict}");
    out
}

/// Many replays counted: how many stop as recorded, and the changes by reason.
#[derive(Debug, Default)]
pub struct Summary {
    pub replayed: usize,
    pub same: usize,
    /// (recorded stop, replayed stop) → turns.
    pub changed: BTreeMap<(String, String), usize>,
    /// A few changed turns, to look at with `buddy replay CONVERSATION --turn TURN`.
    pub examples: Vec<String>,
    /// Turns that could not be replayed, and why.
    pub skipped: Vec<(String, String)>,
}

/// Changed turns listed by name in a summary.
const EXAMPLES: usize = 20;

impl Summary {
    /// Counts one replayed turn, named `name`.
    pub fn add(&mut self, name: &str, comparison: &Comparison) {
        self.replayed += 1;
        if comparison.same_stop {
            self.same += 1;
            return;
        }
        let recorded = stop_words(&comparison.recorded, None);
        let replayed = stop_words(&comparison.replayed, comparison.beyond.as_ref());
        let replayed = match comparison.beyond.as_ref().map(|b| b.wanted) {
            Some(Wanted::Reply | Wanted::ToolResult) => "beyond the recording".to_owned(),
            _ => replayed,
        };
        if self.examples.len() < EXAMPLES {
            self.examples
                .push(format!("{name}: {recorded} → {replayed}"));
        }
        *self.changed.entry((recorded, replayed)).or_default() += 1;
    }

    /// The summary as text; `elapsed` is how long the replays took.
    pub fn text(&self, elapsed: std::time::Duration, policy: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "replayed {} turn(s) in {:.2} s {policy}",
            self.replayed,
            elapsed.as_secs_f64()
        );
        let _ = writeln!(out, "  {:>6} stop as recorded", self.same);
        let changed: usize = self.changed.values().sum();
        let _ = writeln!(out, "  {changed:>6} stop differently");
        for ((from, to), n) in &self.changed {
            let _ = writeln!(out, "  {n:>6}   {from} → {to}");
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(out, "  {:>6} could not be replayed", self.skipped.len());
            for (name, why) in self.skipped.iter().take(EXAMPLES) {
                let _ = writeln!(out, "           {name}: {why}");
            }
        }
        if !self.examples.is_empty() {
            let _ = writeln!(out, "changed turns:");
            for example in &self.examples {
                let _ = writeln!(out, "  {example}");
            }
        }
        out
    }
}
