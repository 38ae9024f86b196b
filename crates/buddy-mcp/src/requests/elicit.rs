//! A server's elicitation, answered by the person behind the asking call: the form of
//! an `elicitation/create` request turned into buddy's [`ElicitationRequest`], the
//! call's [`Elicitor`] asked, and the answer turned back into MCP's `ElicitResult`.
//!
//! Two ways in: an `input_required` round of a call or task (2026-07-28), which names
//! its call; and a server-initiated `elicitation/create` (2025-11-25), which does not:
//! it goes to the one call of that server in flight ([`Askers`]), and is declined when
//! none or several are.

use std::sync::{Arc, Mutex};

use buddy_core::{ElicitationAnswer, ElicitationRequest, Elicitor};
use rmcp::model::ElicitRequestParams;
use serde_json::{Value, json};

use crate::requests::caller::Caller;

/// The calls of one server in flight, each with its caller, in the order they began.
#[derive(Debug, Default)]
pub(crate) struct Askers {
    calls: Mutex<Vec<(u64, Caller)>>,
    next: std::sync::atomic::AtomicU64,
}

/// Takes a call off [`Askers`] when it ends (or is dropped).
pub(crate) struct Asking<'a> {
    askers: &'a Askers,
    id: u64,
}

impl Askers {
    /// Notes a call in flight made by `caller`.
    pub(crate) fn enter(&self, caller: Caller) -> Asking<'_> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.lock().push((id, caller));
        Asking { askers: self, id }
    }

    /// The elicitor of the only call in flight; `None` when there is none or several (a
    /// server-initiated request does not say which call it belongs to).
    pub(crate) fn only(&self) -> Option<Arc<dyn Elicitor>> {
        match self.lock().as_slice() {
            [(_, caller)] => caller.elicitor.clone(),
            _ => None,
        }
    }

    /// The caller of the oldest call in flight, if any: a server-initiated sampling
    /// request is drawn from its turn's budget (`buddy run` and `buddy chat`, the only
    /// ones that answer sampling, run one turn at a time, and a turn's calls and its
    /// sub-agents' share one pool).
    pub(crate) fn oldest(&self) -> Option<Caller> {
        self.lock().first().map(|(_, caller)| caller.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Caller)>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.askers.lock().retain(|(id, _)| *id != self.id);
    }
}

/// buddy's request from the params of an `elicitation/create`; `None` for what it
/// cannot show (URL mode: buddy shows forms, it opens no browser). The fields keep the
/// order the server wrote them in (`order`): the schema as a JSON value sorts them.
pub(crate) fn request_of(server: &str, params: &ElicitRequestParams) -> Option<ElicitationRequest> {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = params
    else {
        return None;
    };
    let order = match &requested_schema.property_order {
        Some(order) => order.clone(),
        None => requested_schema.properties.keys().cloned().collect(),
    };
    Some(ElicitationRequest {
        server: server.to_owned(),
        message: message.clone(),
        schema: serde_json::to_value(requested_schema)
            .unwrap_or_else(|_| json!({"type": "object", "properties": {}})),
        order,
    })
}

/// Asks `elicitor` (declining when there is nobody, or the request cannot be shown) and
/// returns the `ElicitResult` JSON for the server.
pub(crate) async fn answer(
    server: &str,
    params: &ElicitRequestParams,
    elicitor: Option<&dyn Elicitor>,
) -> Value {
    let answer = match (request_of(server, params), elicitor) {
        (Some(request), Some(elicitor)) => elicitor.ask(request).await,
        _ => ElicitationAnswer::Decline,
    };
    tracing::info!(server, action = answer.action(), "MCP elicitation answered");
    match answer {
        ElicitationAnswer::Accept { content } => json!({"action": "accept", "content": content}),
        other => json!({"action": other.action()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::BoxFuture;

    #[derive(Debug)]
    struct Says(ElicitationAnswer);

    impl Elicitor for Says {
        fn ask(&self, _: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    fn params(wire: &str) -> ElicitRequestParams {
        serde_json::from_str(wire).unwrap()
    }

    #[derive(Debug, Default)]
    struct Keeps(Mutex<Vec<ElicitationRequest>>);

    impl Elicitor for Keeps {
        fn ask(&self, request: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer> {
            self.0.lock().unwrap().push(request);
            Box::pin(async { ElicitationAnswer::Decline })
        }
    }

    #[tokio::test]
    async fn a_forms_fields_keep_the_order_the_server_wrote() {
        let wire = r#"{"mode": "form", "message": "Who?", "requestedSchema": {"type": "object",
            "properties": {"name": {"type": "string"}, "plan": {"type": "string", "enum": ["a", "b"]},
                           "age": {"type": "integer"}, "newsletter": {"type": "boolean"}}}}"#;
        let keeps = Keeps::default();
        answer("s", &params(wire), Some(&keeps)).await;
        let asked = keeps.0.lock().unwrap();
        assert_eq!(asked[0].order, ["name", "plan", "age", "newsletter"]);
        assert_eq!(asked[0].message, "Who?");
        assert_eq!(
            asked[0].schema["properties"]["plan"]["enum"],
            json!(["a", "b"])
        );
    }

    #[tokio::test]
    async fn a_form_is_asked_and_a_url_or_nobody_declined() {
        let form = params(
            r#"{"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}"#,
        );
        let content = json!({"name": "Ada"}).as_object().cloned().unwrap();
        let ada = Says(ElicitationAnswer::Accept { content });
        assert_eq!(
            answer("s", &form, Some(&ada)).await,
            json!({"action": "accept", "content": {"name": "Ada"}})
        );
        assert_eq!(answer("s", &form, None).await, json!({"action": "decline"}));
        let url = params(
            r#"{"mode": "url", "message": "Sign in", "url": "https://example.com", "elicitationId": "1"}"#,
        );
        assert_eq!(
            answer("s", &url, Some(&ada)).await,
            json!({"action": "decline"})
        );
        let cancel = Says(ElicitationAnswer::Cancel);
        assert_eq!(
            answer("s", &form, Some(&cancel)).await,
            json!({"action": "cancel"})
        );
    }

    #[test]
    fn only_a_single_call_in_flight_gets_a_server_initiated_question() {
        let askers = Askers::default();
        assert!(askers.only().is_none());
        let asking = |answer| Caller {
            elicitor: Some(Arc::new(Says(answer))),
            ..Caller::default()
        };
        let one = askers.enter(asking(ElicitationAnswer::Decline));
        assert!(askers.only().is_some());
        let two = askers.enter(asking(ElicitationAnswer::Cancel));
        assert!(
            askers.only().is_none(),
            "two calls: which one asks is unknown"
        );
        drop(one);
        assert!(askers.only().is_some());
        drop(two);
        assert!(askers.only().is_none());
    }
}
