//! `buddy doctor` against fake OpenAI-compatible servers with the quirks real ones have
//! (llama-cpp-python ignoring tools without tool_choice, servers refusing
//! `stream_options` or `content: null`, servers that cannot stream tool calls).

use std::process::{Command, Stdio};

use buddy_cli::doctor::{Report, Switch, probe};
use buddy_providers::{OutputLimitField, ProviderConfig, ProviderKind};
use buddy_testkit::{HttpRequest, MockResponse, MockServer, openai_sse};
use serde_json::{Value, json};

/// What a fake server gets wrong.
#[derive(Clone, Copy, Default)]
struct Quirks {
    /// Tools are ignored unless `tool_choice: "auto"` is sent (llama-cpp-python).
    needs_tool_choice: bool,
    refuses_stream_options: bool,
    refuses_null_content: bool,
    cannot_stream_tool_calls: bool,
    never_calls_tools: bool,
    /// `max_tokens` is refused, as OpenAI's reasoning models refuse it.
    refuses_max_tokens: bool,
    down: bool,
}

fn error(status: u16, message: &str) -> MockResponse {
    MockResponse::json(status, &json!({"error": {"message": message}}))
}

fn plain_reply(text: &str, calls: &[(&str, &str, &str)]) -> MockResponse {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    MockResponse::json(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }),
    )
}

/// A model server with `quirks`: calls the first offered tool when it honours tools and
/// the last message is the user's, answers from a tool result otherwise, and invents an
/// answer when it ignores the tools.
async fn fake_server(quirks: Quirks) -> MockServer {
    MockServer::start(move |request: &HttpRequest, _| {
        if quirks.down {
            return error(500, "the model is not loaded");
        }
        let body = request.json();
        if quirks.refuses_max_tokens && body.get("max_tokens").is_some() {
            return error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            );
        }
        if quirks.refuses_stream_options && body.get("stream_options").is_some() {
            return error(
                400,
                "Unrecognized request argument supplied: stream_options",
            );
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if quirks.refuses_null_content
            && messages
                .iter()
                .any(|m| m["role"] == "assistant" && m["content"].is_null())
        {
            return error(400, "messages: content must be a string");
        }
        let stream = body["stream"] == true;
        let first_tool = body["tools"][0]["function"]["name"]
            .as_str()
            .map(str::to_owned);
        let last_is_user = messages.last().is_some_and(|m| m["role"] == "user");
        let honours = first_tool.is_some()
            && !quirks.never_calls_tools
            && (!quirks.needs_tool_choice || body["tool_choice"] == "auto")
            && !(stream && quirks.cannot_stream_tool_calls);
        let arguments = if first_tool.as_deref() == Some("get_weather") {
            r#"{"city":"Paris"}"#
        } else {
            "{}"
        };
        let (text, calls): (&str, Vec<(&str, &str, &str)>) = match &first_tool {
            Some(tool) if honours && last_is_user => {
                ("", vec![("call_1", tool.as_str(), arguments)])
            }
            Some(_) if !last_is_user => ("Done: I used the tool's result.", vec![]),
            Some(_) => ("It is sunny and 25°C in Paris.", vec![]),
            None => ("OK", vec![]),
        };
        if stream {
            MockResponse::sse(openai_sse(text, &calls))
        } else {
            plain_reply(text, &calls)
        }
    })
    .await
}

async fn doctor_of(quirks: Quirks) -> (Report, MockServer) {
    let server = fake_server(quirks).await;
    let mut config = ProviderConfig::of_kind(ProviderKind::Openai);
    config.base_url = Some(format!("{}/v1", server.url()));
    let report = probe("local", &config, "m", &|_| None).await;
    (report, server)
}

#[tokio::test]
async fn a_server_that_does_everything_right_needs_nothing() {
    let (report, server) = doctor_of(Quirks::default()).await;
    assert!(report.healthy(), "{report:?}");
    assert_eq!(report.checks.len(), 3, "{report:?}");
    assert_eq!(server.requests().len(), 3, "one call per check");
}

#[tokio::test]
async fn each_quirk_is_found_and_named() {
    let cases = [
        (
            Quirks {
                needs_tool_choice: true,
                ..Quirks::default()
            },
            vec![Switch::ToolChoiceAuto],
        ),
        (
            Quirks {
                refuses_stream_options: true,
                ..Quirks::default()
            },
            vec![Switch::NoStreamOptions],
        ),
        (
            Quirks {
                cannot_stream_tool_calls: true,
                ..Quirks::default()
            },
            vec![Switch::NoStream],
        ),
        (
            Quirks {
                refuses_null_content: true,
                ..Quirks::default()
            },
            vec![Switch::AssistantContentEmptyString],
        ),
        // llama-cpp-python as it was tried: all three switches of the live test.
        (
            Quirks {
                needs_tool_choice: true,
                refuses_stream_options: true,
                refuses_null_content: true,
                ..Quirks::default()
            },
            vec![
                Switch::NoStreamOptions,
                Switch::ToolChoiceAuto,
                Switch::AssistantContentEmptyString,
            ],
        ),
        (
            Quirks {
                needs_tool_choice: true,
                cannot_stream_tool_calls: true,
                ..Quirks::default()
            },
            vec![Switch::ToolChoiceAuto, Switch::NoStream],
        ),
        (
            Quirks {
                refuses_max_tokens: true,
                ..Quirks::default()
            },
            vec![Switch::OutputLimit(OutputLimitField::MaxCompletionTokens)],
        ),
    ];
    for (quirks, wanted) in cases {
        let (report, _server) = doctor_of(quirks).await;
        assert_eq!(report.switches, wanted, "{report:?}");
        assert!(report.fatal.is_none() && !report.healthy(), "{report:?}");
    }
}

#[tokio::test]
async fn a_model_that_never_calls_tools_is_reported_without_a_made_up_fix() {
    let (report, _server) = doctor_of(Quirks {
        never_calls_tools: true,
        ..Quirks::default()
    })
    .await;
    assert!(report.switches.is_empty(), "{report:?}");
    let tools = report
        .checks
        .iter()
        .find(|c| c.what == "calls an offered tool");
    assert!(
        tools.is_some_and(|c| !c.ok && c.detail.contains("may not support tool calling")),
        "{report:?}"
    );
    assert!(!report.healthy());
}

#[tokio::test]
async fn a_server_that_answers_nothing_is_fatal_and_says_why() {
    let (report, server) = doctor_of(Quirks {
        down: true,
        ..Quirks::default()
    })
    .await;
    let fatal = report.fatal.unwrap_or_default();
    assert!(
        fatal.contains("HTTP 500") && fatal.contains("not loaded"),
        "{fatal}"
    );
    assert!(
        server.requests().len() <= 3,
        "no retries: {}",
        server.requests().len()
    );
}

/// The binary: doctor names the switch, and with that flag a turn really uses the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_switch_and_the_flag_makes_tools_work() {
    let server = fake_server(Quirks {
        needs_tool_choice: true,
        ..Quirks::default()
    })
    .await;
    let url = format!("{}/v1", server.url());
    let dir = tempfile::tempdir().unwrap();
    let buddy = |args: Vec<String>| {
        let cwd = dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_buddy"))
                .current_dir(cwd)
                .env_remove("RUST_LOG")
                .args(args)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        })
    };
    let common = |cmd: &str| -> Vec<String> {
        [
            cmd,
            "--provider",
            "openai",
            "--base-url",
            &url,
            "--model",
            "m",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let out = buddy(common("doctor")).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("[providers.openai.compat]\n  tool_choice_auto = true"),
        "{stdout}"
    );
    assert!(stdout.contains("--tool-choice-auto"), "{stdout}");
    assert!(stdout.contains("provider  openai (openai at "), "{stdout}");

    // Without the switch the server ignores the tools and the model invents an answer.
    let mut args = common("run");
    args.push("What time is it?".into());
    let out = buddy(args.clone()).await.unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("→ get_time"));
    // With it, the tool is called.
    args.insert(1, "--tool-choice-auto".into());
    let out = buddy(args).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("→ get_time"), "{stderr}");
}

/// `buddy doctor --provider local` on a fresh machine (no buddy.toml): the error says how
/// to get a `[providers.local]`, not only that there is none.
#[test]
fn a_provider_nobody_declared_is_refused_with_how_to_declare_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = super::buddy(dir.path())
        .args(["doctor", "--provider", "local"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no provider named `local` (no buddy.toml declares any provider)")
            && stderr.contains("add a [providers.local] table to buddy.toml")
            && stderr.contains("`buddy init` writes one"),
        "{stderr}"
    );
}
