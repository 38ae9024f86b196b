//! The exporter: spans are batched on the SDK's own thread and sent over OTLP/HTTP with
//! reqwest on the process's tokio runtime.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ServedBy, TurnObserver};
use bytes::Bytes;
use opentelemetry::InstrumentationScope;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tokio::runtime::Handle;

use crate::config::{TelemetryConfig, TelemetryError};
use crate::semconv;
use crate::spans::{TurnScope, TurnSpans};

/// buddy's tracing, started from a [`TelemetryConfig`]. Cheap to share behind an `Arc`.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    capture_content: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

/// Time one export may take when the configuration does not say.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response body read from the collector.
const RESPONSE_BYTES: usize = 1024 * 1024;

impl Telemetry {
    /// Starts the exporter; must be called on a tokio runtime, which sends the exports.
    pub fn start(config: &TelemetryConfig) -> Result<Self, TelemetryError> {
        let handle = Handle::try_current().map_err(|_| TelemetryError::NoRuntime)?;
        // reqwest is built without a default TLS provider; install ring's, as the
        // providers do (either one installed first is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = config
            .timeout_secs
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .unwrap_or(EXPORT_TIMEOUT);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("buddy/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(OnRuntime { client, handle })
            .with_timeout(timeout);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        if !config.headers.is_empty() {
            let headers: HashMap<String, String> = config
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            builder = builder.with_headers(headers);
        }
        let exporter = builder
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let mut resource = Resource::builder();
        if let Some(name) = &config.service_name {
            resource = resource.with_service_name(name.clone());
        } else if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("buddy");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let scope = InstrumentationScope::builder("buddy")
            .with_version(env!("CARGO_PKG_VERSION"))
            .with_schema_url(semconv::SCHEMA_URL)
            .build();
        let tracer = provider.tracer_with_scope(scope);
        Ok(Telemetry {
            provider,
            tracer,
            capture_content: config.capture_content,
        })
    }

    /// An observer that records one turn's spans; give it to `TurnRequest::with_observer`.
    /// Without the provider's [`ServedBy`], `gen_ai.provider.name` is `scope.provider` and
    /// the spans have no `server.address`: prefer [`Telemetry::turn_served`].
    pub fn turn(&self, scope: TurnScope<'_>) -> Arc<dyn TurnObserver> {
        self.turn_served(scope, None)
    }

    /// [`Telemetry::turn`] for a provider that says who serves it
    /// (`provider.served_by()`): the conventions' `gen_ai.provider.name` and the
    /// server's `server.address` / `server.port`.
    pub fn turn_served(
        &self,
        scope: TurnScope<'_>,
        served: Option<ServedBy<'_>>,
    ) -> Arc<dyn TurnObserver> {
        Arc::new(TurnSpans::start(
            self.tracer.clone(),
            self.capture_content,
            scope,
            served,
        ))
    }

    /// Sends every ended span now (before a short-lived process exits, or in tests).
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        let flushed = tokio::task::spawn_blocking(move || provider.force_flush()).await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!(error = %e, "could not export buddy's spans");
        }
    }

    /// Sends what is left and stops the exporter.
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = stopped {
            tracing::warn!(error = %e, "could not export buddy's last spans");
        }
    }
}

/// An OTLP HTTP client whose requests run on a tokio runtime, so the SDK's batch thread
/// (which has none) can await them.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    handle: Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let task = self.handle.spawn(async move {
            let mut response = client.execute(request).await?;
            let mut out = Response::builder().status(response.status());
            if let Some(headers) = out.headers_mut() {
                *headers = std::mem::take(response.headers_mut());
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > RESPONSE_BYTES {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, HttpError>(out.body(Bytes::from(body))?)
        });
        task.await?
    }
}
