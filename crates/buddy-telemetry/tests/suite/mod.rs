//! Spans as a backend receives them: exported over OTLP/HTTP to a loopback receiver and
//! decoded with the official protobuf messages.

mod cache_usage;
mod chat_span;
mod turn_status;
