//! W3C trace context in and out: the parent a caller's `traceparent` names, and the
//! `traceparent` of one of buddy's spans.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The context a caller's `traceparent` (and `tracestate`) names; an empty context when
/// it is absent or malformed (the turn then starts a trace of its own).
pub(crate) fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let mut carrier = HashMap::new();
    if let Some(value) = traceparent.filter(|v| well_formed(v)) {
        carrier.insert("traceparent".to_owned(), value.to_owned());
    }
    if let Some(value) = tracestate {
        carrier.insert("tracestate".to_owned(), value.to_owned());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The `traceparent` that names the span of `cx`.
pub(crate) fn inject(cx: &Context) -> Option<String> {
    headers(cx).map(|t| t.traceparent)
}

/// The trace context headers of the span of `cx`: its `traceparent`, and the `tracestate`
/// it carries from the caller (none when the caller sent none).
pub(crate) fn headers(cx: &Context) -> Option<buddy_core::TraceContext> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    let traceparent = carrier.remove("traceparent")?;
    let tracestate = carrier.remove("tracestate").filter(|s| !s.is_empty());
    Some(buddy_core::TraceContext {
        traceparent,
        tracestate,
    })
}

/// The W3C shape: `version-traceid-parentid-flags`, lower-case hex of 2, 32, 16 and 2
/// digits (the propagator alone accepts shorter ids).
fn well_formed(value: &str) -> bool {
    let parts: Vec<&str> = value.trim().split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() >= 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && (parts[0] != "00" || parts.len() == 4)
}

/// True when `value` is a `traceparent` header buddy can continue a trace from.
pub fn valid_traceparent(value: &str) -> bool {
    extract(Some(value), None).span().span_context().is_valid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_tracestate_goes_on_with_the_trace() {
        let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = extract(Some(given), Some("vendor=abc,other=1"));
        let out = headers(&cx).unwrap();
        assert!(out.traceparent.contains("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(out.tracestate.as_deref(), Some("vendor=abc,other=1"));
        assert_eq!(
            headers(&extract(Some(given), None)).unwrap().tracestate,
            None
        );
    }

    #[test]
    fn a_traceparent_goes_in_and_comes_out_with_the_same_trace() {
        let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(valid_traceparent(given));
        let cx = extract(Some(given), Some("rojo=00f067aa0ba902b7"));
        let span = cx.span();
        let parent = span.span_context();
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(parent.is_remote());
        assert_eq!(inject(&cx).as_deref(), Some(given));
    }

    #[test]
    fn malformed_or_zero_traceparents_are_not_continued() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "not a header",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(!valid_traceparent(bad), "{bad}");
        }
        assert_eq!(inject(&extract(None, None)), None);
    }
}
