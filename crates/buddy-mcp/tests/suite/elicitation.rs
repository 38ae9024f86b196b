//! A server's elicitation reaches the person behind the call: over `input_required`
//! (2026-07-28) and as a server-initiated `elicitation/create` (2025-11-25); the
//! answer (accept with content, decline) goes back to the server, which shows it in the
//! tool's result.

use std::sync::Arc;

use buddy_core::{BoxFuture, ElicitationAnswer, ElicitationRequest, Elicitor};
use buddy_mcp::{McpServerConfig, McpSource};
use serde_json::json;

/// A stdio server: `signup` asks for a name over `input_required`, and answers with what
/// came back; `legacy` sends `elicitation/create` itself mid-call and answers the same
/// way. What it was asked to show is appended to the file argv[1].
const ASKING: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
FORM = {"type": "object", "properties": {"name": {"type": "string", "title": "Your name"}},
        "required": ["name"]}
def text(mid, t):
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": t}]}})
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None or method is None:
        continue
    if method == "initialize":
        log.write(json.dumps({"capabilities": params.get("capabilities")}) + "\n"); log.flush()
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "asking", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "signup", "inputSchema": {"type": "object"}},
            {"name": "legacy", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and params["name"] == "signup":
        answers = params.get("inputResponses")
        if answers is None:
            send({"jsonrpc": "2.0", "id": mid, "result": {"resultType": "input_required",
                  "inputRequests": {"who": {"method": "elicitation/create",
                      "params": {"mode": "form", "message": "Who signs up?", "requestedSchema": FORM}}},
                  "requestState": "s1"}})
        else:
            text(mid, "signup got " + json.dumps(answers["who"], sort_keys=True) + " state " + params.get("requestState", ""))
    elif method == "tools/call" and params["name"] == "legacy":
        send({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create",
              "params": {"message": "Who is it?", "requestedSchema": FORM}})
        reply = json.loads(sys.stdin.readline())
        text(mid, "legacy got " + json.dumps(reply.get("result"), sort_keys=True))
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

/// Answers every question with `answer`, keeping what it was asked.
#[derive(Debug)]
struct Person {
    answer: ElicitationAnswer,
    asked: std::sync::Mutex<Vec<ElicitationRequest>>,
}

impl Elicitor for Person {
    fn ask(&self, request: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(request);
        }
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

fn person(answer: ElicitationAnswer) -> Arc<Person> {
    Arc::new(Person {
        answer,
        asked: std::sync::Mutex::new(Vec::new()),
    })
}

fn ada() -> ElicitationAnswer {
    ElicitationAnswer::Accept {
        content: json!({"name": "Ada"}).as_object().cloned().unwrap(),
    }
}

async fn started(dir: &tempfile::TempDir) -> Arc<McpSource> {
    let log = dir.path().join("asked.jsonl").display().to_string();
    let source = McpSource::new(McpServerConfig::stdio(
        "asking",
        &["python3", "-c", ASKING, &log],
    ));
    source.start().await.unwrap();
    source
}

#[tokio::test]
async fn an_input_required_elicitation_is_put_to_the_person_and_the_answer_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let source = started(&dir).await;
    let accepting = person(ada());
    let text = source
        .call_asking("signup", json!({}), Some(accepting.clone()))
        .await
        .unwrap();
    assert_eq!(
        text,
        r#"signup got {"action": "accept", "content": {"name": "Ada"}} state s1"#
    );
    let asked = accepting.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [ElicitationRequest {
            server: "asking".to_owned(),
            message: "Who signs up?".to_owned(),
            schema: json!({"type": "object", "properties": {"name": {"type": "string", "title": "Your name"}}, "required": ["name"]}),
            order: vec!["name".to_owned()],
        }]
    );
    let declining = person(ElicitationAnswer::Decline);
    let text = source
        .call_asking("signup", json!({}), Some(declining))
        .await
        .unwrap();
    assert_eq!(text, r#"signup got {"action": "decline"} state s1"#);
    // Nobody to ask: declined.
    let text = source.call("signup", json!({})).await.unwrap();
    assert_eq!(text, r#"signup got {"action": "decline"} state s1"#);
}

#[tokio::test]
async fn a_server_initiated_elicitation_goes_to_the_call_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let source = started(&dir).await;
    let text = source
        .call_asking("legacy", json!({}), Some(person(ada())))
        .await
        .unwrap();
    assert_eq!(
        text,
        r#"legacy got {"action": "accept", "content": {"name": "Ada"}}"#
    );
    let text = source.call("legacy", json!({})).await.unwrap();
    assert_eq!(text, r#"legacy got {"action": "decline"}"#);
    // buddy told the server it takes forms.
    let hello = std::fs::read_to_string(dir.path().join("asked.jsonl")).unwrap();
    let hello: serde_json::Value = serde_json::from_str(hello.lines().next().unwrap()).unwrap();
    assert_eq!(
        hello["capabilities"]["elicitation"],
        json!({"form": {}}),
        "{hello}"
    );
}
