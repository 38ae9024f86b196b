//! What clients send besides messages reaches the model server: temperature, top_p, the
//! output limit, seed, stop sequences and structured output, from both OpenAI endpoints
//! and `/v1/chat`, to an OpenAI-compatible and an Anthropic server (recorded by loopback
//! model servers). What a provider cannot honour is a 400 naming it — never dropped.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_providers::{
    AnthropicOptions, AnthropicProvider, HttpSettings, OpenAiOptions, OpenAiProvider,
};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{MockResponse, MockServer, TestToolbox, anthropic_sse, openai_sse};
use serde_json::{Value, json};

use super::{post, send};

const ANSWER: &str = r#"{"name":"Ada","age":36}"#;

/// `gpt-test` on an OpenAI-compatible server, `claude-test` on an Anthropic one.
struct TwoKinds {
    openai: String,
    anthropic: String,
}

impl Backend for TwoKinds {
    fn models(&self) -> Vec<String> {
        vec!["gpt-test".into(), "claude-test".into()]
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        let model = model.unwrap_or("gpt-test").to_owned();
        let provider: Arc<dyn buddy_core::Provider> = if model.starts_with("claude") {
            Arc::new(
                AnthropicProvider::new(AnthropicOptions {
                    name: "anthropic".into(),
                    base_url: self.anthropic.clone(),
                    api_key: Some("k".into()),
                    headers: Default::default(),
                    http: HttpSettings::default(),
                    stream: true,
                    max_output_tokens: None,
                    cache: None,
                })
                .map_err(|e| BackendError(e.to_string()))?,
            )
        } else {
            Arc::new(
                OpenAiProvider::new(OpenAiOptions {
                    base_url: self.openai.clone(),
                    ..OpenAiOptions::default()
                })
                .map_err(|e| BackendError(e.to_string()))?,
            )
        };
        Ok(Resolved {
            provider,
            toolbox: Arc::new(TestToolbox::new()),
            model,
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

struct Servers {
    state: AppState,
    openai: MockServer,
    anthropic: MockServer,
}

async fn servers() -> Servers {
    let openai = MockServer::always(MockResponse::sse(openai_sse(ANSWER, &[]))).await;
    let anthropic = MockServer::always(MockResponse::sse(anthropic_sse(ANSWER, &[]))).await;
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(TwoKinds {
            openai: openai.url(),
            anthropic: anthropic.url(),
        }),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    Servers {
        state,
        openai,
        anthropic,
    }
}

fn person() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
           "required": ["name", "age"], "additionalProperties": false})
}

async fn call(state: &AppState, uri: &str, body: Value) -> (StatusCode, Value) {
    let (status, text) = send(state, post(uri, body, None)).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn last_body(server: &MockServer) -> Value {
    server
        .requests()
        .last()
        .expect("the model server was called")
        .json()
}

#[tokio::test]
async fn chat_completions_settings_reach_both_kinds_of_model_server() {
    let s = servers().await;
    let (status, reply) = call(
        &s.state,
        "/v1/chat/completions",
        json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Who?"}],
               "temperature": 0.2, "top_p": 0.9, "max_tokens": 300, "seed": 7, "stop": "END",
               "response_format": {"type": "json_schema",
                   "json_schema": {"name": "person", "schema": person(), "strict": true}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], ANSWER);
    let sent = last_body(&s.openai);
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["top_p"], 0.9);
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(sent["seed"], 7);
    assert_eq!(sent["stop"], json!(["END"]));
    assert_eq!(
        sent["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "person", "schema": person(), "strict": true}})
    );

    // The same to Anthropic: its own names, structured output as output_config.format.
    let (status, reply) = call(
        &s.state,
        "/v1/chat/completions",
        json!({"model": "claude-test", "messages": [{"role": "user", "content": "Who?"}],
               "temperature": 0.2, "top_p": 0.9, "max_completion_tokens": 300, "stop": ["END", "STOP"],
               "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": person()}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let sent = last_body(&s.anthropic);
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["top_p"], 0.9);
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(sent["stop_sequences"], json!(["END", "STOP"]));
    assert_eq!(
        sent["output_config"],
        json!({"format": {"type": "json_schema", "schema": person()}})
    );

    // What Anthropic cannot honour is refused by name, before anything is sent.
    let before = s.anthropic.requests().len();
    for (extra, named) in [
        (json!({"seed": 7}), "`seed`"),
        (
            json!({"response_format": {"type": "json_object"}}),
            "json_object",
        ),
    ] {
        let mut body =
            json!({"model": "claude-test", "messages": [{"role": "user", "content": "Who?"}]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, error) = call(&s.state, "/v1/chat/completions", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(named),
            "{error}"
        );
    }
    assert_eq!(s.anthropic.requests().len(), before);

    // Out of range, or malformed: named too.
    for (body, named) in [
        (json!({"temperature": 5}), "temperature"),
        (json!({"stop": 3}), "`stop`"),
        // More than one choice is refused, never silently one.
        (json!({"n": 2}), "`n` = 2"),
        (
            json!({"response_format": {"type": "json_schema"}}),
            "json_schema",
        ),
    ] {
        let mut request =
            json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Who?"}]});
        request
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        let (status, error) = call(&s.state, "/v1/chat/completions", request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(named),
            "{error}"
        );
    }
}

#[tokio::test]
async fn responses_and_chat_settings_reach_the_model_server_and_are_echoed() {
    let s = servers().await;
    let (status, response) = call(
        &s.state,
        "/v1/responses",
        json!({"model": "gpt-test", "input": "Who?", "temperature": 0.3, "top_p": 0.5,
               "max_output_tokens": 200,
               "text": {"format": {"type": "json_schema", "name": "person", "schema": person(), "strict": true}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let sent = last_body(&s.openai);
    assert_eq!(
        (sent["temperature"].clone(), sent["top_p"].clone()),
        (json!(0.3), json!(0.5))
    );
    assert_eq!(sent["max_tokens"], 200);
    assert_eq!(sent["response_format"]["json_schema"]["name"], "person");
    // The response says what it was made with.
    assert_eq!(response["temperature"], 0.3);
    assert_eq!(response["top_p"], 0.5);
    assert_eq!(response["max_output_tokens"], 200);
    assert_eq!(response["text"]["format"]["type"], "json_schema");
    assert_eq!(response["text"]["format"]["name"], "person");

    let (status, _) = call(
        &s.state,
        "/v1/chat",
        json!({"message": "Who?", "model": "claude-test",
               "sampling": {"temperature": 0.1, "max_output_tokens": 50}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sent = last_body(&s.anthropic);
    assert_eq!(
        (sent["temperature"].clone(), sent["max_tokens"].clone()),
        (json!(0.1), json!(50))
    );
    let (status, error) = call(
        &s.state,
        "/v1/chat",
        json!({"message": "Who?", "sampling": {"temprature": 0.1}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
}

const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const PDF: &str = "data:application/pdf;base64,JVBERi0xLjQK";

#[tokio::test]
async fn images_and_files_reach_the_model_in_each_servers_form() {
    let s = servers().await;
    // Chat Completions parts, to an OpenAI-compatible server: passed on as parts.
    let (status, reply) = call(
        &s.state,
        "/v1/chat/completions",
        json!({"model": "gpt-test", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF}}]}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let sent = last_body(&s.openai);
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
               {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF}}])
    );

    // Responses parts, to Anthropic: image and document blocks (base64), then the text.
    let (status, response) = call(
        &s.state,
        "/v1/responses",
        json!({"model": "claude-test", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": PIXEL},
            {"type": "input_image", "image_url": "https://example.com/cat.png"},
            {"type": "input_file", "filename": "a.pdf", "file_data": PDF}]}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let blocks = last_body(&s.anthropic)["messages"][0]["content"].clone();
    assert_eq!(blocks[0]["type"], "image");
    assert_eq!(blocks[0]["source"]["media_type"], "image/png");
    assert_eq!(
        blocks[1]["source"],
        json!({"type": "url", "url": "https://example.com/cat.png"})
    );
    assert_eq!(blocks[2]["type"], "document");
    assert_eq!(blocks[2]["source"]["media_type"], "application/pdf");
    assert_eq!(blocks[3], json!({"type": "text", "text": "What is this?"}));

    // What cannot be passed on is a 400 naming it, and nothing is sent.
    let before = (s.openai.requests().len(), s.anthropic.requests().len());
    for (model, part, named) in [
        (
            "claude-test",
            json!({"type": "input_file", "filename": "t.txt", "file_data": "data:text/plain;base64,aGk="}),
            "reads PDF files",
        ),
        (
            "gpt-test",
            json!({"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}),
            "`input_audio`",
        ),
        (
            "gpt-test",
            json!({"type": "input_image", "file_id": "file-123"}),
            "file_id",
        ),
        (
            "gpt-test",
            json!({"type": "input_file", "file_url": "https://example.com/a.pdf"}),
            "file_data",
        ),
    ] {
        let (status, error) = call(
            &s.state,
            "/v1/responses",
            json!({"model": model, "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}, part]}]}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(named),
            "{error}"
        );
    }
    assert_eq!(
        before,
        (s.openai.requests().len(), s.anthropic.requests().len())
    );
}
