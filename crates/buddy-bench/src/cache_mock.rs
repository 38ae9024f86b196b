//! The model server of `buddy bench cache`: an Anthropic Messages and an OpenAI Chat
//! Completions endpoint on 127.0.0.1 that play a fixed agent (it reads one file a round,
//! then answers) and simulate each provider's prompt cache from the requests themselves.
//!
//! - Anthropic: the request's blocks in the API's order (tools, system, then the message
//!   blocks, these seeded with `tool_choice`, whose change drops the message cache). At
//!   each `cache_control` breakpoint the prefix up to it is written (when it is at least
//!   1,024 tokens, the API's minimum); a later request reads the longest written prefix
//!   found at one of its breakpoints or up to 19 blocks before it (the 20-block lookback).
//!   Billed: reads 0.1×, writes 1.25× (5 minutes) or 2× (one hour), the rest 1×.
//! - OpenAI: automatic; the longest prefix (tools, then whole messages) an earlier request
//!   sent is read back, in 128-token steps from 1,024 on. Reads 0.1×, writes free.
//!
//! Tokens are bytes / 4 of each block's JSON; entries never expire (a turn's calls are
//! seconds apart). The bill is the mock's own, at Claude Sonnet 4.5's and GPT-5's list
//! prices, so buddy's cost figure can be checked against it.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Value, json};

/// The Anthropic model the mock answers as (its list price is buddy's built-in one).
pub const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// The OpenAI model the mock answers as.
pub const OPENAI_MODEL: &str = "gpt-5";

/// Anthropic's smallest cacheable prefix (Sonnet), in tokens.
const MIN_CACHED: u64 = 1_024;
/// Blocks a breakpoint looks back for an earlier entry (itself included).
const LOOKBACK: usize = 20;
/// OpenAI's cache granularity past its minimum.
const OPENAI_STEP: u64 = 128;

/// Dollars per million tokens: (input, cache read, 5-minute write, one-hour write, output).
const ANTHROPIC_PRICE: [f64; 5] = [3.0, 0.3, 3.75, 6.0, 15.0];
const OPENAI_PRICE: [f64; 5] = [1.25, 0.125, 1.25, 1.25, 10.0];

/// One call as the mock billed it.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Billed {
    /// Every input token, cached or not.
    pub input: u64,
    pub read: u64,
    pub written: u64,
    pub written_1h: u64,
    pub output: u64,
    /// What the call cost, and what it would have without the cache.
    pub dollars: f64,
    pub uncached_dollars: f64,
    /// The input's part of each.
    pub input_dollars: f64,
    pub uncached_input_dollars: f64,
}

/// What the mock saw and billed.
#[derive(Debug, Default)]
pub struct Ledger {
    pub calls: Vec<Billed>,
    /// Every `prompt_cache_key` the OpenAI endpoint received (`""` for none).
    pub keys: BTreeSet<String>,
    /// Requests whose `tool_choice` was `none` with the tools still sent.
    pub final_calls_with_tools: usize,
}

#[derive(Default)]
struct Mock {
    /// Tool rounds the agent makes before it answers.
    rounds: usize,
    /// Rounds made since the last answer.
    made: usize,
    /// Calls answered, for ids.
    served: usize,
    written: HashSet<u64>,
    ledger: Ledger,
}

/// A running mock; dropping it stops the server.
pub struct CacheMock {
    pub url: String,
    state: Arc<Mutex<Mock>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CacheMock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CacheMock {
    /// Starts a mock whose agent makes `rounds` tool rounds before each answer.
    pub async fn start(rounds: usize) -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(Mock {
            rounds,
            ..Mock::default()
        }));
        let app = Router::new()
            .route("/v1/messages", post(anthropic))
            .route("/v1/chat/completions", post(openai))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(CacheMock { url, state, task })
    }

    /// What the mock billed so far; it starts over (cache included).
    pub fn take(&self) -> Ledger {
        let mut mock = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        mock.written.clear();
        mock.made = 0;
        std::mem::take(&mut mock.ledger)
    }
}

/// Tokens of a piece of JSON, as the mock counts them.
fn tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

/// FNV-1a of `bytes` continuing from `seed`.
fn hash(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A block without its `cache_control` (the mark is not part of the prefix).
fn unmarked(block: &Value) -> (Value, Option<bool>) {
    let mut block = block.clone();
    let mark = block
        .as_object_mut()
        .and_then(|o| o.remove("cache_control"))
        .map(|c| c.get("ttl").and_then(Value::as_str) == Some("1h"));
    (block, mark)
}

/// One block of a request: its prefix hash, the tokens up to and with it, its mark.
struct Unit {
    hash: u64,
    through: u64,
    one_hour: Option<bool>,
}

/// The request's blocks in the Messages API's order.
fn anthropic_units(body: &Value) -> Vec<Unit> {
    let mut units = Vec::new();
    let (mut h, mut through) = (0xcbf2_9ce4_8422_2325_u64, 0);
    let mut push = |block: &Value, seed: &str, units: &mut Vec<Unit>| {
        let (block, mark) = unmarked(block);
        h = hash(hash(h, seed.as_bytes()), block.to_string().as_bytes());
        through += tokens(&block);
        units.push(Unit {
            hash: h,
            through,
            one_hour: mark,
        });
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool, "tool", &mut units);
    }
    match &body["system"] {
        Value::String(text) => push(&json!({"type": "text", "text": text}), "system", &mut units),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, "system", &mut units)),
        _ => {}
    }
    let choice = body["tool_choice"].to_string();
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let role = message["role"].as_str().unwrap_or("");
        let seed = if i == 0 {
            format!("{choice}{role}")
        } else {
            role.to_owned()
        };
        match &message["content"] {
            Value::String(text) => push(&json!({"type": "text", "text": text}), &seed, &mut units),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &seed, &mut units)),
            _ => {}
        }
    }
    units
}

/// The prompt cache's answer to an Anthropic request: (read, written, written for an hour).
fn anthropic_cache(units: &[Unit], written: &mut HashSet<u64>) -> (u64, u64, u64) {
    let points: Vec<usize> = (0..units.len())
        .filter(|&i| units[i].one_hour.is_some())
        .collect();
    let read = points
        .iter()
        .filter_map(|&b| {
            (b.saturating_sub(LOOKBACK - 1)..=b)
                .rev()
                .find(|&p| written.contains(&units[p].hash))
                .map(|p| units[p].through)
        })
        .max()
        .unwrap_or(0);
    let Some(&last) = points.last() else {
        return (0, 0, 0);
    };
    for &b in &points {
        if units[b].through >= MIN_CACHED {
            written.insert(units[b].hash);
        }
    }
    let write = units[last].through.saturating_sub(read);
    if units[last].through < MIN_CACHED {
        return (read, 0, 0);
    }
    let one_hour = if units[last].one_hour == Some(true) {
        write
    } else {
        0
    };
    (read, write, one_hour)
}

/// The OpenAI request's prefix units: the tools, then each whole message.
fn openai_units(body: &Value) -> Vec<Unit> {
    let mut units = Vec::new();
    let (mut h, mut through) = (
        hash(0xcbf2_9ce4_8422_2325, body["tools"].to_string().as_bytes()),
        tokens(&body["tools"]),
    );
    for message in body["messages"].as_array().into_iter().flatten() {
        h = hash(h, message.to_string().as_bytes());
        through += tokens(message);
        units.push(Unit {
            hash: h,
            through,
            one_hour: None,
        });
    }
    units
}

/// The tool call or the answer the agent gives next.
fn next_move(mock: &mut Mock) -> Option<(String, String)> {
    mock.served += 1;
    if mock.made < mock.rounds {
        mock.made += 1;
        let n = mock.served;
        Some((format!("call_{n}"), format!("src/module_{n}.rs")))
    } else {
        mock.made = 0;
        None
    }
}

/// Books a call and returns it.
fn book(
    mock: &mut Mock,
    price: [f64; 5],
    input: u64,
    cache: (u64, u64, u64),
    output: u64,
) -> Billed {
    let (read, written, written_1h) = cache;
    let plain = input - read - written;
    let input_dollars = (plain as f64 * price[0]
        + read as f64 * price[1]
        + (written - written_1h) as f64 * price[2]
        + written_1h as f64 * price[3])
        / 1e6;
    let uncached_input_dollars = input as f64 * price[0] / 1e6;
    let out = output as f64 * price[4] / 1e6;
    let billed = Billed {
        input,
        read,
        written,
        written_1h,
        output,
        dollars: input_dollars + out,
        uncached_dollars: uncached_input_dollars + out,
        input_dollars,
        uncached_input_dollars,
    };
    mock.ledger.calls.push(billed);
    billed
}

async fn anthropic(State(state): State<Arc<Mutex<Mock>>>, Json(body): Json<Value>) -> Json<Value> {
    let mut mock = state.lock().unwrap_or_else(PoisonError::into_inner);
    let units = anthropic_units(&body);
    let input = units.last().map_or(0, |u| u.through);
    let cache = anthropic_cache(&units, &mut mock.written);
    if body["tool_choice"]["type"] == "none" && body["tools"].is_array() {
        mock.ledger.final_calls_with_tools += 1;
    }
    let (content, stop) = match next_move(&mut mock) {
        Some((id, path)) => (
            json!([{"type": "text", "text": format!("Reading {path}.")},
                   {"type": "tool_use", "id": id, "name": "read_file", "input": {"path": path}}]),
            "tool_use",
        ),
        None => (
            json!([{"type": "text", "text": "Every module is read: they define the items the task asked for."}]),
            "end_turn",
        ),
    };
    let output = tokens(&content);
    let billed = book(&mut mock, ANTHROPIC_PRICE, input, cache, output);
    Json(json!({
        "id": format!("msg_{}", mock.served), "type": "message", "role": "assistant",
        "model": ANTHROPIC_MODEL, "content": content, "stop_reason": stop,
        "usage": {
            "input_tokens": input - billed.read - billed.written,
            "cache_read_input_tokens": billed.read,
            "cache_creation_input_tokens": billed.written,
            "cache_creation": {
                "ephemeral_5m_input_tokens": billed.written - billed.written_1h,
                "ephemeral_1h_input_tokens": billed.written_1h,
            },
            "output_tokens": output,
        },
    }))
}

async fn openai(State(state): State<Arc<Mutex<Mock>>>, Json(body): Json<Value>) -> Json<Value> {
    let mut mock = state.lock().unwrap_or_else(PoisonError::into_inner);
    let key = body["prompt_cache_key"].as_str().unwrap_or("").to_owned();
    mock.ledger.keys.insert(key);
    if body["tool_choice"] == "none" && body["tools"].is_array() {
        mock.ledger.final_calls_with_tools += 1;
    }
    let units = openai_units(&body);
    let input = units.last().map_or(0, |u| u.through);
    let hit = units
        .iter()
        .rev()
        .find(|u| mock.written.contains(&u.hash))
        .map_or(0, |u| u.through);
    let read = if hit >= MIN_CACHED {
        hit / OPENAI_STEP * OPENAI_STEP
    } else {
        0
    };
    for unit in &units {
        mock.written.insert(unit.hash);
    }
    let message = match next_move(&mut mock) {
        Some((id, path)) => json!({"role": "assistant", "content": format!("Reading {path}."),
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read_file", "arguments": json!({"path": path}).to_string()}}]}),
        None => json!({"role": "assistant",
            "content": "Every module is read: they define the items the task asked for."}),
    };
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    let output = tokens(&message);
    book(&mut mock, OPENAI_PRICE, input, (read, 0, 0), output);
    Json(json!({
        "id": format!("chatcmpl-{}", mock.served), "object": "chat.completion", "model": OPENAI_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output,
                  "prompt_tokens_details": {"cached_tokens": read}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(messages: usize, marks: &[usize]) -> Value {
        let big = "x".repeat(8_000);
        let mut blocks: Vec<Value> = (0..messages)
            .map(|i| json!({"type": "text", "text": format!("{i}{big}")}))
            .collect();
        for &m in marks {
            blocks[m]["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({"system": "s", "messages": [{"role": "user", "content": blocks}]})
    }

    #[test]
    fn a_prefix_written_at_a_breakpoint_is_read_back_within_the_lookback() {
        let mut written = HashSet::new();
        let first = anthropic_units(&body(3, &[2]));
        let (read, write, _) = anthropic_cache(&first, &mut written);
        assert_eq!((read, write), (0, first[3].through));
        // The same prefix and two more blocks, marked last: the first's entry is found.
        let second = anthropic_units(&body(5, &[4]));
        let (read, write, _) = anthropic_cache(&second, &mut written);
        assert_eq!(read, first[3].through);
        assert_eq!(write, second[5].through - first[3].through);
        // Without a breakpoint nothing is read or written.
        assert_eq!(
            anthropic_cache(&anthropic_units(&body(5, &[])), &mut written),
            (0, 0, 0)
        );
        // Beyond the lookback, the entry is not found.
        let far = anthropic_units(&body(30, &[29]));
        let (read, _, _) = anthropic_cache(&far, &mut HashSet::from([first[3].hash]));
        assert_eq!(read, 0);
    }
}
