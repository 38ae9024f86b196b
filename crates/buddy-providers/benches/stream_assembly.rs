//! Stream assembly throughput: buddy's SSE decoder plus tool-call assembly over a large
//! recorded-style stream with many tool-call fragments, beside a baseline that only
//! parses the same JSON chunks with `serde_json` (into `Value`). The ratio of the two
//! is the assembler's own cost.
//!
//! Run: `cargo bench -p buddy-providers --bench stream_assembly`

// Measurement code: a broken input should stop the benchmark loudly.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;

use buddy_core::{ProviderError, Token};
use buddy_providers::anthropic::AnthropicStreamParser;
use buddy_providers::openai::OpenAiStreamParser;
use buddy_providers::sse::{SseDecoder, SseEvent};
use buddy_testkit::{anthropic_sse, openai_sse};
use divan::Bencher;
use divan::counter::BytesCount;

fn main() {
    divan::main();
}

/// 60 tool calls of ~1.5 KB arguments each, sent in 4-character fragments (as OpenAI
/// does), after 4 KB of streamed text: about 8 MB of SSE in ~25,000 chunks.
fn arguments(i: usize) -> String {
    let body: Vec<String> = (0..40)
        .map(|k| format!("\"field_{k}\":\"value {i}-{k} with some text\""))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn calls() -> Vec<(String, String, String)> {
    (0..60)
        .map(|i| (format!("call_{i}"), format!("tool_{}", i % 7), arguments(i)))
        .collect()
}

fn text() -> String {
    "Streaming answer text, a few words at a time. ".repeat(90)
}

/// A testkit stream builder: text and (id, name, arguments) calls to an SSE body.
type WireFormat = fn(&str, &[(&str, &str, &str)]) -> String;

/// The same calls and text in one wire format.
fn body(format: WireFormat) -> Vec<u8> {
    let calls = calls();
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    format(&text(), &borrowed).into_bytes()
}

/// The JSON payloads of every `data:` line, for the baseline.
fn data_lines(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .map(str::to_owned)
        .collect()
}

/// The baseline: only parse every data line's JSON into a `serde_json::Value`.
fn baseline(bencher: Bencher, body: Vec<u8>) {
    let lines = data_lines(&body);
    bencher.counter(BytesCount::of_slice(&body)).bench(|| {
        let mut n = 0;
        for line in divan::black_box(&lines) {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            n += usize::from(value.is_object());
        }
        n
    });
}

/// Decodes `body` in network-sized reads and feeds every event to a parser.
fn assemble<P>(
    body: &[u8],
    mut parser: P,
    event: fn(&mut P, &SseEvent, &mut VecDeque<Token>) -> Result<bool, ProviderError>,
    end: fn(&mut P, &mut VecDeque<Token>) -> Result<(), ProviderError>,
) -> usize {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    let mut out = VecDeque::new();
    for chunk in body.chunks(16 * 1024) {
        decoder.push(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            event(&mut parser, &e, &mut out).unwrap();
        }
    }
    decoder.finish(&mut events).unwrap();
    for e in events.drain(..) {
        event(&mut parser, &e, &mut out).unwrap();
    }
    end(&mut parser, &mut out).unwrap();
    out.len()
}

fn assemble_openai(body: &[u8]) -> usize {
    let parser = OpenAiStreamParser::new("bench", "http://127.0.0.1");
    assemble(
        body,
        parser,
        OpenAiStreamParser::event,
        OpenAiStreamParser::end,
    )
}

fn assemble_anthropic(body: &[u8]) -> usize {
    let parser = AnthropicStreamParser::new("bench", "http://127.0.0.1");
    assemble(
        body,
        parser,
        AnthropicStreamParser::event,
        AnthropicStreamParser::end,
    )
}

#[divan::bench]
fn openai_assembler(bencher: Bencher) {
    let body = body(openai_sse);
    assert!(assemble_openai(&body) > 60);
    bencher
        .counter(BytesCount::of_slice(&body))
        .bench(|| assemble_openai(divan::black_box(&body)));
}

#[divan::bench]
fn openai_baseline_serde_json_only(bencher: Bencher) {
    baseline(bencher, body(openai_sse));
}

#[divan::bench]
fn anthropic_assembler(bencher: Bencher) {
    let body = body(anthropic_sse);
    assert!(assemble_anthropic(&body) > 60);
    bencher
        .counter(BytesCount::of_slice(&body))
        .bench(|| assemble_anthropic(divan::black_box(&body)));
}

#[divan::bench]
fn anthropic_baseline_serde_json_only(bencher: Bencher) {
    baseline(bencher, body(anthropic_sse));
}

/// 100,000 distinct tool calls in one reply, each an id-and-name piece plus an argument
/// piece: assembly is linear (an index map), so this takes milliseconds, not seconds.
#[divan::bench(sample_count = 10)]
fn hundred_thousand_calls(bencher: Bencher) {
    use buddy_providers::tool_call_assembler::{ToolCallAssembler, ToolCallDelta};
    let ids: Vec<String> = (0..100_000).map(|i| format!("call_{i}")).collect();
    bencher.bench(|| {
        let mut assembler = ToolCallAssembler::default();
        for (i, id) in ids.iter().enumerate() {
            let index = Some(i as i64);
            assembler.push(ToolCallDelta {
                index,
                id: Some(id),
                name: Some("get_time"),
                arguments: Some(""),
            });
            assembler.push(ToolCallDelta {
                index,
                id: None,
                name: None,
                arguments: Some("{}"),
            });
        }
        let (calls, _) = assembler.finish();
        assert_eq!(calls.len(), 100_000);
        calls
    });
}

/// A typical tool-call reply: a short sentence, then one call with ~80 characters of
/// arguments, about 30 SSE events as OpenAI streams them.
fn typical_call() -> (&'static str, &'static str, String) {
    (
        "call_1",
        "get_weather",
        r#"{"city":"Paris","units":"metric","days":3,"include":["wind","rain","humidity"]}"#
            .to_owned(),
    )
}

const TYPICAL_TEXT: &str = "Let me check the weather for you.";

/// The streamed reply through buddy's decoder and OpenAI parser: what streaming costs.
#[divan::bench]
fn typical_reply_streamed(bencher: Bencher) {
    let (id, name, args) = typical_call();
    let body = openai_sse(TYPICAL_TEXT, &[(id, name, args.as_str())]).into_bytes();
    bencher.bench(|| {
        let mut decoder = SseDecoder::default();
        let mut parser = OpenAiStreamParser::new("bench", "http://127.0.0.1/v1");
        let (mut events, mut out) = (Vec::new(), VecDeque::new());
        decoder.push(&body, &mut events).unwrap();
        for event in &events {
            if parser.event(event, &mut out).unwrap() {
                break;
            }
        }
        parser.end(&mut out).unwrap();
        out
    });
}

/// The same reply as one JSON body through the non-streamed parser.
#[divan::bench]
fn typical_reply_whole(bencher: Bencher) {
    let (id, name, args) = typical_call();
    let body = serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": TYPICAL_TEXT,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    })
    .to_string();
    bencher.bench(|| {
        buddy_providers::openai::parse_response("bench", "http://127.0.0.1/v1", &body).unwrap()
    });
}
