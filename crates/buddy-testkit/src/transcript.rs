use std::fmt::Write;

use buddy_core::ChatEvent;

/// A stable, readable rendering of a turn's events for snapshot tests: text deltas are
/// joined, timings and token counts left out.
///
/// A sub-agent's events (`Agent`) are rendered the same way, each run of them under the
/// same path indented and prefixed with that path (`  [researcher] call …`).
pub fn transcript(events: &[ChatEvent]) -> String {
    let mut out = String::new();
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut String| {
        if !text.is_empty() {
            let _ = writeln!(out, "text: {text:?}");
            text.clear();
        }
    };
    let mut nested: Vec<ChatEvent> = Vec::new();
    let mut nested_path: Vec<String> = Vec::new();
    let flush_nested = |nested: &mut Vec<ChatEvent>, path: &[String], out: &mut String| {
        if nested.is_empty() {
            return;
        }
        let prefix = format!("{}[{}] ", "  ".repeat(path.len()), path.join(" › "));
        for line in transcript(nested).lines() {
            let _ = writeln!(out, "{prefix}{line}");
        }
        nested.clear();
    };
    for event in events {
        if let ChatEvent::Agent { path, event } = event {
            let names: Vec<String> = path.iter().map(|h| h.agent.clone()).collect();
            flush(&mut text, &mut out);
            if names != nested_path {
                flush_nested(&mut nested, &nested_path, &mut out);
                nested_path = names;
            }
            nested.push((**event).clone());
            continue;
        }
        flush_nested(&mut nested, &nested_path, &mut out);
        if let ChatEvent::TextDelta { text: t } = event {
            text.push_str(t);
            continue;
        }
        flush(&mut text, &mut out);
        event_line(&mut out, event);
    }
    flush_nested(&mut nested, &nested_path, &mut out);
    flush(&mut text, &mut out);
    out
}

/// The line for one event that is neither text nor a sub-agent's.
fn event_line(out: &mut String, event: &ChatEvent) {
    let _ = match event {
        ChatEvent::ToolCallStart {
            id,
            name,
            arguments,
        } => writeln!(out, "call {id} {name} {arguments}"),
        ChatEvent::ToolCallResult {
            id,
            content,
            is_error,
            ..
        } => {
            let mark = if *is_error { "error" } else { "ok" };
            writeln!(out, "result {id} {mark}: {content:?}")
        }
        ChatEvent::ToolPolling {
            id, check, wait_ms, ..
        } => writeln!(out, "poll {id}: check {check} after {wait_ms} ms"),
        ChatEvent::ToolProgress {
            id,
            progress,
            total,
            message,
            status,
            ..
        } => writeln!(
            out,
            "progress {id}: {progress:?}/{total:?} {status:?} {message:?}"
        ),
        ChatEvent::ToolSampling {
            id,
            server,
            input_tokens,
            output_tokens,
            refused,
            ..
        } => match refused {
            Some(why) => writeln!(out, "sampling {id} [{server}] refused: {why}"),
            None => writeln!(
                out,
                "sampling {id} [{server}]: {input_tokens} in, {output_tokens} out"
            ),
        },
        ChatEvent::GuardTripped {
            guard,
            action,
            skill,
            ..
        } => writeln!(
            out,
            "guard {} {}{}",
            guard.as_str(),
            action.as_str(),
            skill
                .as_deref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default()
        ),
        ChatEvent::IterationStats {
            model_call,
            finish_reason,
            tool_calls_requested,
            tools_offered,
            ..
        } => {
            let finish = finish_reason
                .as_ref()
                .map_or_else(|| "none".to_owned(), |f| format!("{f:?}"));
            writeln!(
                out,
                "model call {model_call}: finish {finish}, {tool_calls_requested} call(s) requested, {tools_offered} tool(s) offered"
            )
        }
        ChatEvent::Done { reason, stats, .. } => writeln!(
            out,
            "done {reason}: {} model calls, {} tool calls",
            stats.model_calls, stats.tool_calls
        ),
        ChatEvent::Error {
            reason,
            message,
            stats,
        } => writeln!(
            out,
            "error {reason}: {message} ({} model calls, {} tool calls)",
            stats.model_calls, stats.tool_calls
        ),
        _ => writeln!(out, "{event:?}"),
    };
}
