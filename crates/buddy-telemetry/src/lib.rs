//! buddy-telemetry: a turn's spans — `invoke_agent` (one per sub-agent too, under the
//! tool call that started it), `chat` per model call, `execute_tool`
//! per tool call — exported over OTLP (HTTP/protobuf), following the OpenTelemetry GenAI
//! semantic conventions, with W3C trace context taken from callers and sent on.
//!
//! Off unless configured: an engine without an observer pays nothing for it.

mod config;
mod export;
mod propagate;
pub mod semconv;
mod spans;

pub use config::{TelemetryConfig, TelemetryError};
pub use export::Telemetry;
pub use propagate::valid_traceparent;
pub use spans::TurnScope;
