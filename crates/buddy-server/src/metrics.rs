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
pub(crate) fn observe_turn(reason: StopReason, stats: &TurnStats, provider: &str, key: &str) {
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

/// A provider that reports how long each model call takes to start streaming.
pub(crate) struct TimedProvider {
    pub inner: std::sync::Arc<dyn buddy_core::Provider>,
}

impl buddy_core::Provider for TimedProvider {
    fn name(&self) -> &str {
        self.inner.name()
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
