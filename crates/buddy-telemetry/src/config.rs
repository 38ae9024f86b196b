//! Where traces go: `[telemetry]` in buddy.toml, or the standard `OTEL_*` variables.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("[telemetry] {0}")]
    Config(String),
    #[error(
        "buddy exports traces over OTLP/HTTP with protobuf only, but {var} = {value:?}: point the endpoint at the \
         collector's OTLP/HTTP port (usually 4318) and set {var}=http/protobuf or unset it"
    )]
    Protocol { var: &'static str, value: String },
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    #[error("telemetry needs a running tokio runtime to send its exports from")]
    NoRuntime,
}

/// How buddy exports its traces. Present in buddy.toml as `[telemetry]`; every field may
/// be left out, and what is left out comes from the standard OpenTelemetry variables.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// `false` switches telemetry off even when the `OTEL_*` variables are set.
    pub enabled: Option<bool>,
    /// The OTLP/HTTP endpoint: a base address (`http://127.0.0.1:4318`, `/v1/traces` is
    /// added) or the whole traces URL. Default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, then
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, then `http://localhost:4318`.
    pub endpoint: Option<String>,
    /// Headers sent with every export (an API key for a hosted backend). Added to
    /// `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of buddy's spans (default `OTEL_SERVICE_NAME`, else `buddy`).
    pub service_name: Option<String>,
    /// Put message contents, tool arguments and results on the spans (off by default:
    /// they may hold personal data). `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
    /// also switches it on.
    pub capture_content: bool,
    /// Time one export may take (default 10 s).
    pub timeout_secs: Option<f64>,
}

/// The environment variables that switch export on without a `[telemetry]` table.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

impl TelemetryConfig {
    /// The configuration to run with, from buddy.toml's table (if any) and the
    /// environment (`env` reads a variable); `None` when telemetry is off.
    pub fn resolve(
        file: Option<TelemetryConfig>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TelemetryConfig>, TelemetryError> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
            return Ok(None);
        }
        let mut config = match file {
            Some(config) if config.enabled == Some(false) => return Ok(None),
            Some(config) => config,
            None if ENDPOINT_VARS.iter().any(|v| set(v).is_some()) => TelemetryConfig::default(),
            None => return Ok(None),
        };
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(value) = set(var)
                && value.trim() != "http/protobuf"
            {
                return Err(TelemetryError::Protocol { var, value });
            }
        }
        if set("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        {
            config.capture_content = true;
        }
        if config.service_name.is_none() {
            config.service_name = set("OTEL_SERVICE_NAME");
        }
        if let Some(endpoint) = &config.endpoint {
            config.endpoint = Some(traces_url(endpoint)?);
        }
        for (name, value) in &config.headers {
            let valid_name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
            if !valid_name || reqwest::header::HeaderValue::from_str(value).is_err() {
                return Err(TelemetryError::Config(format!(
                    "headers: `{name}` is not a valid HTTP header (name or value); header names are letters, digits and -, values printable text"
                )));
            }
        }
        if let Some(secs) = config.timeout_secs
            && !(secs.is_finite() && secs > 0.0 && secs <= 600.0)
        {
            return Err(TelemetryError::Config(format!(
                "timeout_secs = {secs} must be a number of seconds above 0 and at most 600"
            )));
        }
        Ok(Some(config))
    }
}

/// The traces URL of an endpoint given in buddy.toml.
fn traces_url(endpoint: &str) -> Result<String, TelemetryError> {
    let endpoint = endpoint.trim();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(TelemetryError::Config(format!(
            "endpoint = {endpoint:?} must be an http:// or https:// address, like http://127.0.0.1:4318"
        )));
    }
    let base = endpoint.trim_end_matches('/');
    Ok(if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn off_unless_a_table_or_an_endpoint_variable_asks_for_it() {
        assert_eq!(TelemetryConfig::resolve(None, env(&[])).unwrap(), None);
        let from_env = TelemetryConfig::resolve(
            None,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
                ("OTEL_SERVICE_NAME", "agents"),
            ]),
        )
        .unwrap()
        .unwrap();
        // The exporter reads the endpoint variable itself (and adds /v1/traces).
        assert_eq!(from_env.endpoint, None);
        assert_eq!(from_env.service_name.as_deref(), Some("agents"));
        let file = TelemetryConfig {
            endpoint: Some("http://127.0.0.1:6006/".into()),
            ..TelemetryConfig::default()
        };
        let config = TelemetryConfig::resolve(Some(file.clone()), env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(
            config.endpoint.as_deref(),
            Some("http://127.0.0.1:6006/v1/traces")
        );
        let off = TelemetryConfig {
            enabled: Some(false),
            ..file.clone()
        };
        assert_eq!(TelemetryConfig::resolve(Some(off), env(&[])).unwrap(), None);
        for disabled in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                TelemetryConfig::resolve(Some(file.clone()), env(&[disabled])).unwrap(),
                None
            );
        }
    }

    #[test]
    fn grpc_bad_endpoints_and_timeouts_are_refused_with_what_to_change() {
        let file = TelemetryConfig::default();
        let grpc = TelemetryConfig::resolve(
            Some(file.clone()),
            env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
        )
        .unwrap_err()
        .to_string();
        assert!(grpc.contains("4318") && grpc.contains("grpc"), "{grpc}");
        let bad = TelemetryConfig {
            endpoint: Some("127.0.0.1:4318".into()),
            ..file.clone()
        };
        let message = TelemetryConfig::resolve(Some(bad), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(message.contains("http://"), "{message}");
        let slow = TelemetryConfig {
            timeout_secs: Some(0.0),
            ..file.clone()
        };
        assert!(TelemetryConfig::resolve(Some(slow), env(&[])).is_err());
        let header = TelemetryConfig {
            headers: [("bad header".to_owned(), "x".to_owned())].into(),
            ..file
        };
        let message = TelemetryConfig::resolve(Some(header), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(message.contains("`bad header`"), "{message}");
    }

    #[test]
    fn content_capture_is_opt_in_by_table_or_variable() {
        let config = TelemetryConfig::resolve(Some(TelemetryConfig::default()), env(&[]))
            .unwrap()
            .unwrap();
        assert!(!config.capture_content);
        let config = TelemetryConfig::resolve(
            Some(TelemetryConfig::default()),
            env(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")]),
        )
        .unwrap()
        .unwrap();
        assert!(config.capture_content);
    }
}
