//! The turns `buddy bench iteration` measures: which tool the scripted model calls, how
//! many times, what the tool answers and how the mock streams its replies. Both loops
//! (the bare client and buddy) use the same workload, so they do the same work.

use std::fmt::Write as _;

use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
use serde::Serialize;
use serde_json::{Value, json};

/// The scenario's (and the raw loop's) user message.
pub const PROMPT: &str = "Look up every item on the list and sum their prices.";

/// Bytes of one page `read_page` returns in the paging workload.
const PAGE_BYTES: usize = 4096;

/// Characters per streamed event in the chunked workload (about one token of English).
const CHUNK_CHARS: usize = 4;

/// One kind of turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// 8 `lookup` calls with one-line results, one a round, then an answer; the mock
    /// writes each reply at once (9 model calls; the benchmark's first workload).
    Lookup,
    /// 12 `read_page` calls, each answered with a 4 KB page, so the history grows to 26
    /// messages and ~50 KB: what a turn paging through a document sends.
    Paging,
    /// As `lookup` with longer texts, the text and the arguments streamed 4 characters
    /// to an event and each event written on its own, as a hosted model sends tokens.
    Chunked,
}

impl Workload {
    /// Every workload, in the order the benchmark runs them.
    pub const ALL: [Workload; 3] = [Workload::Lookup, Workload::Paging, Workload::Chunked];

    /// Its name, as `--workload` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Lookup => "lookup",
            Workload::Paging => "paging",
            Workload::Chunked => "chunked",
        }
    }

    /// Tool calls per turn when `--calls` does not say.
    pub fn default_calls(self) -> usize {
        match self {
            Workload::Lookup | Workload::Chunked => 8,
            Workload::Paging => 12,
        }
    }

    /// The tool's name.
    fn tool(self) -> &'static str {
        match self {
            Workload::Paging => "read_page",
            Workload::Lookup | Workload::Chunked => "lookup",
        }
    }

    /// The arguments of round `n`'s call.
    fn arguments(self, n: usize) -> Value {
        match self {
            Workload::Paging => json!({"page": n}),
            Workload::Lookup | Workload::Chunked => json!({"item": format!("item-{n}")}),
        }
    }

    /// What the model says beside round `n`'s call.
    fn round_text(self, n: usize) -> String {
        match self {
            Workload::Lookup => format!("Checking item {n}."),
            Workload::Paging => format!("Reading page {n}."),
            // Under the loop judge's 80 characters: a longer text said again every round
            // is a repeated answer, rightly stopped.
            Workload::Chunked => {
                format!("Checking item {n} next: I will look it up and note its price.")
            }
        }
    }

    /// The model's answer after `calls` rounds.
    fn answer(self, calls: usize) -> String {
        match self {
            Workload::Lookup => format!(
                "I looked up all {calls} items; {} is the dearest.",
                item(calls)
            ),
            Workload::Paging => {
                format!(
                    "I read all {calls} pages; the last line says: {}",
                    line(calls, 0)
                )
            }
            Workload::Chunked => format!(
                "I looked up all {calls} items one by one in the catalogue. The dearest is the last: {}. \
                 Every item is in stock and ships within five days, so the whole list can be ordered today.",
                item(calls)
            ),
        }
    }

    /// The tool's answer to `args`, on both sides: different every round, as a real
    /// tool's would be (identical results would rightly trip buddy's guards).
    pub fn result(self, args: &Value) -> String {
        match self {
            Workload::Paging => page(args["page"].as_u64().unwrap_or(0) as usize),
            Workload::Lookup | Workload::Chunked => item(
                args["item"]
                    .as_str()
                    .and_then(|item| item.strip_prefix("item-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
            ),
        }
    }

    /// The tool as both loops offer it (and the scenario declares it).
    pub fn tool_spec(self) -> Value {
        let spec = BenchTool(self).spec();
        json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters})
    }

    /// The scripted model, named `model`: `calls` rounds of one call each, then an answer
    /// (a scenario file of `buddy mock-server`, which checks it as it loads it).
    pub fn scenario(self, model: &str, calls: usize) -> Value {
        let mut rules: Vec<Value> = (1..=calls)
            .map(|round| {
                json!({"when": {"round": round}, "reply": {
                    "text": self.round_text(round),
                    "tool_calls": [{"name": self.tool(), "arguments": self.arguments(round)}]
                }})
            })
            .collect();
        rules.push(json!({"when": {}, "reply": {"text": self.answer(calls)}}));
        let mut text = json!({
            "name": model,
            "description": format!("Benchmark ({}): one call per round, then an answer.", self.as_str()),
            "prompt": PROMPT,
            "tools": [self.tool_spec()],
            "policy": {},
            "expect": {"stop_reason": "completed", "model_calls": calls + 1, "tool_calls": calls},
            "rules": rules,
        });
        if self == Workload::Chunked {
            text["wire_chunk_chars"] = json!(CHUNK_CHARS);
        }
        text
    }
}

/// `lookup`'s one-line answer for item `n`.
fn item(n: usize) -> String {
    format!(
        "item {n} found: price {}.{:02} EUR, {} in stock, ships in {} days",
        3 + n * 7 % 40,
        n * 37 % 100,
        n * 13 % 50,
        1 + n % 5
    )
}

/// Line `i` of page `n`.
fn line(n: usize, i: usize) -> String {
    let k = n * 101 + i;
    format!(
        "{n:03}.{i:02} order {k}: {} units of part P-{:05} at {}.{:02} EUR, delivered to depot {} on day {}",
        1 + k * 7 % 90,
        k * 7919 % 100_000,
        2 + k * 13 % 400,
        k * 37 % 100,
        1 + k % 17,
        1 + k * 3 % 28
    )
}

/// Page `n`: numbered lines up to `PAGE_BYTES`.
fn page(n: usize) -> String {
    let mut out = String::with_capacity(PAGE_BYTES + 128);
    let _ = writeln!(out, "Page {n} of the order book");
    let mut i = 0;
    while out.len() < PAGE_BYTES {
        out.push_str(&line(n, i));
        out.push('\n');
        i += 1;
    }
    out
}

/// The workload's tool on buddy's side: the same answer the raw loop computes.
pub struct BenchTool(pub Workload);

impl Skill for BenchTool {
    fn name(&self) -> &str {
        self.0.tool()
    }

    fn description(&self) -> &str {
        match self.0 {
            Workload::Paging => "Read one page of the order book.",
            Workload::Lookup | Workload::Chunked => "Look an item up in the catalogue.",
        }
    }

    fn parameters(&self) -> Value {
        match self.0 {
            Workload::Paging => {
                json!({"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]})
            }
            Workload::Lookup | Workload::Chunked => {
                json!({"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]})
            }
        }
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move { Ok(self.0.result(&args)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_plays_its_calls_then_answers() {
        for workload in Workload::ALL {
            let calls = workload.default_calls();
            let scenario = workload.scenario("m", calls);
            assert_eq!(
                scenario["rules"].as_array().map(Vec::len),
                Some(calls + 1),
                "{workload:?}"
            );
            assert_eq!(
                scenario["wire_chunk_chars"].as_u64(),
                (workload == Workload::Chunked).then_some(CHUNK_CHARS as u64)
            );
        }
    }

    #[test]
    fn pages_are_large_and_all_different() {
        let pages: Vec<String> = (1..=12).map(page).collect();
        assert!(pages.iter().all(|p| p.len() >= PAGE_BYTES));
        let distinct: std::collections::HashSet<&String> = pages.iter().collect();
        assert_eq!(distinct.len(), pages.len());
        assert_eq!(Workload::Paging.result(&json!({"page": 3})), pages[2]);
        assert!(
            Workload::Lookup
                .result(&json!({"item": "item-3"}))
                .starts_with("item 3 found")
        );
    }
}
