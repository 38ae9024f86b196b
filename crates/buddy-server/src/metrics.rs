//! Prometheus metrics: turns by stop reason, model and tool calls per turn, guard trips,
//! provider latency (time to the first token of each model call), tokens.

use std::sync::OnceLock;

use buddy_core::{ChatEvent, StopReason, TurnStats};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder once (every server in the process shares it).
pub(crate) fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Suffix("_per_turn".into()),
                    &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 25.0, 50.0],
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
                        &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0],
                    )
                });
            match builder.map(|b| b.install_recorder()) {
                Ok(Ok(handle)) => Some(handle),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics buckets rejected");
                    None
                }
            }
        })
        .as_ref()
}

/// The exposition `text` without the series labelled with another key than `name`, so
/// one tenant cannot read another's name or usage.
pub(crate) fn only_key(text: &str, name: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let other = !line.starts_with('#') && label(line, "key").is_some_and(|value| value != name);
        if !other {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The unescaped value of label `wanted` in one sample line, if the line has it.
fn label(line: &str, wanted: &str) -> Option<String> {
    let open = line.find('{')?;
    let mut rest = &line[open + 1..];
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.starts_with('}') || rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let label_name = rest[..eq].trim();
        rest = rest[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        if label_name == wanted {
            return Some(value);
        }
        rest = &rest[end + 1..];
    }
}

/// Counts a connection shed to make room, or not admitted.
pub(crate) fn shed(why: crate::conn::Shed) {
    metrics::counter!("buddy_connections_shed_total", "reason" => why.as_str()).increment(1);
}

/// Records one event of a turn.
pub(crate) fn observe_event(event: &ChatEvent, provider: &str) {
    match event {
        ChatEvent::GuardTripped { guard, action, .. } => {
            metrics::counter!("buddy_guard_trips_total", "guard" => guard.as_str(), "action" => action.as_str())
                .increment(1);
        }
        ChatEvent::IterationStats { .. } => {
            metrics::counter!("buddy_model_calls_total", "provider" => provider.to_owned())
                .increment(1);
        }
        _ => {}
    }
}

/// Records a finished turn.
pub(crate) fn observe_turn(
    reason: StopReason,
    stats: &TurnStats,
    provider: &str,
    model: &str,
    key: &str,
) {
    if let Some(cost) = stats.cost_usd {
        observe_cost(cost, provider, model, key);
    }
    metrics::counter!("buddy_turns_total", "stop_reason" => reason.as_str()).increment(1);
    metrics::counter!("buddy_key_turns_total", "key" => key.to_owned()).increment(1);
    metrics::counter!("buddy_key_tokens_total", "key" => key.to_owned())
        .increment(stats.input_tokens + stats.output_tokens);
    metrics::histogram!("buddy_model_calls_per_turn").record(f64::from(stats.model_calls));
    metrics::histogram!("buddy_tool_calls_per_turn").record(f64::from(stats.tool_calls));
    metrics::histogram!("buddy_turn_duration_seconds", "provider" => provider.to_owned())
        .record(stats.elapsed_ms as f64 / 1000.0);
    metrics::counter!("buddy_tokens_total", "direction" => "input").increment(stats.input_tokens);
    metrics::counter!("buddy_tokens_total", "direction" => "output").increment(stats.output_tokens);
}

/// Records what a key's model call (a turn's, a compaction's) cost.
pub(crate) fn observe_cost(cost: buddy_core::Usd, provider: &str, model: &str, key: &str) {
    // A gauge only ever increased: Prometheus counters take whole numbers here.
    metrics::gauge!("buddy_cost_usd_total", "provider" => provider.to_owned(), "model" => model.to_owned())
        .increment(cost.dollars());
    metrics::gauge!("buddy_key_cost_usd_total", "key" => key.to_owned()).increment(cost.dollars());
}

/// A provider that reports how long each model call takes to start streaming.
pub(crate) struct TimedProvider {
    pub inner: std::sync::Arc<dyn buddy_core::Provider>,
}

impl buddy_core::Provider for TimedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn unsupported(&self, sampling: &buddy_core::Sampling) -> Option<String> {
        self.inner.unsupported(sampling)
    }

    fn refuses(&self, attachment: &buddy_core::Attachment) -> Option<String> {
        self.inner.refuses(attachment)
    }

    fn stream<'a>(
        &'a self,
        request: buddy_core::CompletionRequest<'a>,
    ) -> buddy_core::BoxFuture<'a, Result<buddy_core::TokenStream, buddy_core::ProviderError>> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let result = self.inner.stream(request).await;
            let outcome = if result.is_ok() { "ok" } else { "error" };
            metrics::histogram!("buddy_provider_first_token_seconds", "provider" => self.inner.name().to_owned(), "outcome" => outcome)
                .record(started.elapsed().as_secs_f64());
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE buddy_key_turns_total counter\n\
buddy_key_turns_total{key=\"alice\"} 3\n\
buddy_key_turns_total{key=\"bob\"} 1\n\
buddy_key_turns_total{key=\"ali\\\"ce\"} 9\n\
buddy_guard_trips_total{guard=\"key\",action=\"stop\"} 2\n\
buddy_x{a=\"b\",key=\"bob\"} 5\n\
buddy_turns_total{stop_reason=\"final_answer\"} 4\n";

    #[test]
    fn a_key_sees_its_own_series_and_the_shared_ones_only() {
        let seen = only_key(TEXT, "alice");
        assert!(seen.contains("{key=\"alice\"} 3"), "{seen}");
        assert!(!seen.contains("bob"), "{seen}");
        assert!(
            !seen.contains("} 9"),
            "an escaped name is another name: {seen}"
        );
        assert!(
            seen.contains("guard=\"key\""),
            "a label value `key` is not the key label"
        );
        assert!(seen.contains("final_answer"));
        assert!(seen.contains("# TYPE buddy_key_turns_total"));
    }

    #[test]
    fn escaped_label_values_are_read_whole() {
        let line = "m{key=\"ali\\\"ce\",x=\"1\"} 9";
        assert_eq!(label(line, "key").as_deref(), Some("ali\"ce"));
        assert_eq!(label(line, "x").as_deref(), Some("1"));
        assert_eq!(label("m 1", "key"), None);
    }
}
