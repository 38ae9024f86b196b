//! `buddy doctor`: probes a provider with a few small model calls and says which compat
//! switches it needs — can it stream, does it stream tool calls, does it need
//! `tool_choice` to use tools at all, does it accept `content: null`, which field takes
//! the output limit — so a server
//! that silently ignores tools is found before a turn ends `completed` on an invented
//! answer.

use std::time::{Duration, Instant};

use buddy_core::{Completion, CompletionRequest, Message, ProviderError, ToolCall, ToolSpec};
use buddy_providers::{OutputLimitField, ProviderConfig, ProviderKind};
use serde_json::json;

/// A compat switch a provider needs, as buddy.toml knows it and as a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// `stream = false` / `--no-stream`: the server cannot stream (tool calls).
    NoStream,
    /// `compat.no_stream_options` / `--no-stream-options`: `stream_options` is refused.
    NoStreamOptions,
    /// `compat.tool_choice_auto` / `--tool-choice-auto`: tools are ignored without it.
    ToolChoiceAuto,
    /// `compat.assistant_content_empty_string` / `--assistant-content-empty-string`.
    AssistantContentEmptyString,
    /// `compat.output_limit_field` / `--output-limit-field`: the server refuses the field
    /// the output limit went in and takes this one.
    OutputLimit(OutputLimitField),
}

impl Switch {
    /// The buddy.toml line under `[providers.NAME]` (or its `.compat` table).
    pub fn toml(self) -> &'static str {
        match self {
            Switch::NoStream => "stream = false",
            Switch::NoStreamOptions => "no_stream_options = true",
            Switch::ToolChoiceAuto => "tool_choice_auto = true",
            Switch::AssistantContentEmptyString => "assistant_content_empty_string = true",
            Switch::OutputLimit(OutputLimitField::MaxTokens) => {
                "output_limit_field = \"max_tokens\""
            }
            Switch::OutputLimit(OutputLimitField::MaxCompletionTokens) => {
                "output_limit_field = \"max_completion_tokens\""
            }
        }
    }

    /// The flag of `buddy run` / `buddy chat` that sets it for one run.
    pub fn flag(self) -> &'static str {
        match self {
            Switch::NoStream => "--no-stream",
            Switch::NoStreamOptions => "--no-stream-options",
            Switch::ToolChoiceAuto => "--tool-choice-auto",
            Switch::AssistantContentEmptyString => "--assistant-content-empty-string",
            Switch::OutputLimit(OutputLimitField::MaxTokens) => "--output-limit-field max_tokens",
            Switch::OutputLimit(OutputLimitField::MaxCompletionTokens) => {
                "--output-limit-field max_completion_tokens"
            }
        }
    }

    fn is_compat(self) -> bool {
        self != Switch::NoStream
    }

    fn apply(self, config: &mut ProviderConfig) {
        match self {
            Switch::NoStream => config.stream = false,
            Switch::NoStreamOptions => config.compat.no_stream_options = true,
            Switch::ToolChoiceAuto => config.compat.tool_choice_auto = true,
            Switch::AssistantContentEmptyString => {
                config.compat.assistant_content_empty_string = true
            }
            Switch::OutputLimit(field) => config.compat.output_limit_field = Some(field),
        }
    }

    fn is_set(self, config: &ProviderConfig) -> bool {
        match self {
            Switch::NoStream => !config.stream,
            Switch::NoStreamOptions => config.compat.no_stream_options,
            Switch::ToolChoiceAuto => config.compat.tool_choice_auto,
            Switch::AssistantContentEmptyString => config.compat.assistant_content_empty_string,
            Switch::OutputLimit(field) => config.compat.output_limit_field == Some(field),
        }
    }
}

/// One thing the doctor checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked, e.g. "streams a plain answer".
    pub what: String,
    pub ok: bool,
    /// What was seen, in words.
    pub detail: String,
}

/// What the probe found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub checks: Vec<Check>,
    /// Switches the provider needs that its configuration does not set yet.
    pub switches: Vec<Switch>,
    /// The provider cannot be used at all (nothing answered); says why.
    pub fatal: Option<String>,
}

impl Report {
    /// True when the provider works as configured: every check passed, nothing to add.
    pub fn healthy(&self) -> bool {
        self.fatal.is_none() && self.switches.is_empty() && self.checks.iter().all(|c| c.ok)
    }

    /// The buddy.toml text to add for provider `name` (empty when nothing is needed).
    pub fn toml_to_add(&self, name: &str, declared: bool, config: &ProviderConfig) -> String {
        if self.switches.is_empty() {
            return String::new();
        }
        let mut out = format!("[providers.{name}]\n");
        if !declared {
            out.push_str(&format!("kind = \"{}\"\n", config.kind.as_str()));
            if let Some(url) = &config.base_url {
                // Credentials in it are not printed: put them back by hand.
                let url = buddy_providers::redact_url(url);
                out.push_str(&format!("base_url = \"{url}\"\n"));
            }
            if let Some(model) = &config.model {
                out.push_str(&format!("model = \"{model}\"\n"));
            }
        }
        for switch in self.switches.iter().filter(|s| !s.is_compat()) {
            out.push_str(switch.toml());
            out.push('\n');
        }
        let compat: Vec<&Switch> = self.switches.iter().filter(|s| s.is_compat()).collect();
        if !compat.is_empty() {
            out.push_str(&format!("\n[providers.{name}.compat]\n"));
            for switch in compat {
                out.push_str(switch.toml());
                out.push('\n');
            }
        }
        out
    }
}

/// The tool every probe offers: one obvious reason to call it.
fn probe_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".to_owned(),
        description: "Current weather for a city. Always use it to answer weather questions."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
        }),
    }
}

const PLAIN_PROMPT: &str = "Reply with the single word OK.";
const TOOL_PROMPT: &str =
    "What is the weather in Paris right now? Call the get_weather tool; do not guess.";
/// Output tokens per probe call: enough for a short answer or one tool call.
const PROBE_OUTPUT_TOKENS: u32 = 200;

/// Calls the provider `config` describes once, with `tools` offered if given.
async fn ask(
    name: &str,
    config: &ProviderConfig,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
    messages: &[Message],
    tools: Option<&[ToolSpec]>,
) -> Result<(Completion, Duration), ProviderError> {
    let provider = config.build_http(name, env)?;
    let mut request = CompletionRequest::new(model, messages);
    request.tools = tools;
    request.max_output_tokens = Some(PROBE_OUTPUT_TOKENS);
    let started = Instant::now();
    let reply = provider.complete(request).await?;
    Ok((reply, started.elapsed()))
}

/// The first of `switches` (tried one at a time on top of `config`) that makes `probe`
/// succeed; the config gains it.
async fn first_that_works<F, Fut>(
    config: &mut ProviderConfig,
    switches: &[Switch],
    probe: F,
) -> Option<Switch>
where
    F: Fn(ProviderConfig) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for &switch in switches {
        if switch.is_set(config) {
            continue;
        }
        let mut trial = config.clone();
        switch.apply(&mut trial);
        if probe(trial.clone()).await {
            *config = trial;
            return Some(switch);
        }
    }
    None
}

/// Probes provider `name` (as `config` describes it) with model `model`. Makes 3 to 8
/// small model calls; retries are off so a failing server answers at once.
pub async fn probe(
    name: &str,
    config: &ProviderConfig,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Report {
    let mut report = Report::default();
    let mut config = config.clone();
    config.http.max_retries = 0;
    // 1. A plain answer, streamed if the config streams.
    if !answers_plainly(name, model, env, &mut config, &mut report).await {
        return report;
    }
    // 2. Tool calls: does the model call an offered tool, and under which switches?
    calls_a_tool(name, model, env, &mut config, &mut report).await;
    // 3. A history whose assistant message only calls a tool (`content: null`).
    if config.kind == ProviderKind::Openai {
        accepts_a_tool_history(name, model, env, &mut config, &mut report).await;
    }
    report
}

/// Probe 1: a plain answer, and the switch that gets one when the first ask is refused;
/// false (with `report.fatal` set) when no request is answered.
async fn answers_plainly(
    name: &str,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
    config: &mut ProviderConfig,
    report: &mut Report,
) -> bool {
    let openai = config.kind == ProviderKind::Openai;
    let plain = [Message::user(PLAIN_PROMPT)];
    let first = ask(name, config, model, env, &plain, None).await;
    let mode = if config.stream { "streamed" } else { "plain" };
    match first {
        Ok((reply, took)) => report.checks.push(Check {
            what: format!("answers a {mode} request"),
            ok: !reply.text.trim().is_empty(),
            detail: format!("{:?} in {} ms", excerpt(&reply.text), took.as_millis()),
        }),
        Err(error) => {
            // Every probe sends an output limit: a server that refuses its field by name
            // (OpenAI's newest models refuse `max_tokens`) is asked with the other one.
            let limit = OutputLimitField::resolve(
                config.compat.output_limit_field,
                config
                    .base_url
                    .as_deref()
                    .unwrap_or(config.kind.default_base_url()),
            );
            let output_limit = [Switch::OutputLimit(limit.other())];
            let candidates: &[Switch] = if openai && limit.is_refused_by(&error) {
                &output_limit
            } else if openai {
                &[Switch::NoStreamOptions, Switch::NoStream]
            } else {
                &[Switch::NoStream]
            };
            let plain = &plain;
            let fixed = first_that_works(config, candidates, |trial| async move {
                ask(name, &trial, model, env, plain, None).await.is_ok()
            })
            .await;
            match fixed {
                Some(switch) => {
                    report.switches.push(switch);
                    report.checks.push(Check {
                        what: format!("answers a {mode} request"),
                        ok: false,
                        detail: format!("refused ({error}); works with {}", switch.toml()),
                    });
                }
                None => {
                    report.fatal = Some(format!(
                        "the provider answered no request, streamed or not: {error}"
                    ));
                    return false;
                }
            }
        }
    }
    true
}

/// Probe 2: does the model call an offered tool, and under which switches.
async fn calls_a_tool(
    name: &str,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
    config: &mut ProviderConfig,
    report: &mut Report,
) {
    let openai = config.kind == ProviderKind::Openai;
    let tools = [probe_tool()];
    let asked = [Message::user(TOOL_PROMPT)];
    let (tools, asked) = (&tools, &asked);
    let calls = |trial: ProviderConfig| async move {
        match ask(name, &trial, model, env, asked, Some(tools)).await {
            Ok((reply, _)) => reply.tool_calls.iter().any(|c| c.name == "get_weather"),
            Err(_) => false,
        }
    };
    if calls(config.clone()).await {
        report.checks.push(Check {
            what: "calls an offered tool".into(),
            ok: true,
            detail: format!(
                "get_weather was called{}",
                if config.stream { ", streamed" } else { "" }
            ),
        });
    } else {
        let candidates: &[Switch] = if openai {
            &[Switch::ToolChoiceAuto, Switch::NoStream]
        } else {
            &[Switch::NoStream]
        };
        let mut found = first_that_works(config, candidates, calls).await;
        // Some servers need both: tool_choice sent, and no streaming.
        if found.is_none() && openai && !config.compat.tool_choice_auto && config.stream {
            let mut both = config.clone();
            Switch::ToolChoiceAuto.apply(&mut both);
            Switch::NoStream.apply(&mut both);
            if calls(both.clone()).await {
                report.switches.push(Switch::ToolChoiceAuto);
                found = Some(Switch::NoStream);
                *config = both;
            }
        }
        match found {
            Some(switch) => {
                report.switches.push(switch);
                let why = match switch {
                    Switch::ToolChoiceAuto => {
                        "no tool call unless `tool_choice: \"auto\"` is sent (the server ignores tools without it)"
                    }
                    _ => "no tool call while streaming; plain requests get one",
                };
                report.checks.push(Check {
                    what: "calls an offered tool".into(),
                    ok: false,
                    detail: why.into(),
                });
            }
            None => report.checks.push(Check {
                what: "calls an offered tool".into(),
                ok: false,
                detail: "never called the offered tool, with or without tool_choice or streaming: \
                         this model or server may not support tool calling, and buddy would run it \
                         as plain chat"
                    .into(),
            }),
        }
    }
}

/// Probe 3 (OpenAI-compatible servers): a history whose assistant message only calls a
/// tool (`content: null`), and the switch that makes it accepted.
async fn accepts_a_tool_history(
    name: &str,
    model: &str,
    env: &dyn Fn(&str) -> Option<String>,
    config: &mut ProviderConfig,
    report: &mut Report,
) {
    let tools = [probe_tool()];
    let tools = &tools;
    let history = [
        Message::user(TOOL_PROMPT),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_doctor_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
            }],
        },
        Message::Tool {
            tool_call_id: "call_doctor_1".into(),
            content: "Paris: 14°C, light rain.".into(),
            is_error: false,
        },
    ];
    let history = &history;
    let accepts = |trial: ProviderConfig| async move {
        ask(name, &trial, model, env, history, Some(tools))
            .await
            .is_ok()
    };
    if accepts(config.clone()).await {
        report.checks.push(Check {
            what: "accepts a tool-calling history".into(),
            ok: true,
            detail: if config.compat.assistant_content_empty_string {
                "with `content: \"\"`".into()
            } else {
                "with `content: null`".into()
            },
        });
    } else {
        let fixed = first_that_works(config, &[Switch::AssistantContentEmptyString], accepts).await;
        report.checks.push(Check {
            what: "accepts a tool-calling history".into(),
            ok: false,
            detail: match fixed {
                Some(_) => "refuses `content: null` beside tool calls; `content: \"\"` works".into(),
                None => "refuses the history of a tool call, whatever its content: turns with tools will fail after the first call".into(),
            },
        });
        report.switches.extend(fixed);
    }
}

/// The start of a reply, for a check's detail.
fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let mut out: String = trimmed.chars().take(60).collect();
    if out.len() < trimmed.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toml_names_the_switches_in_their_tables() {
        let report = Report {
            switches: vec![Switch::ToolChoiceAuto, Switch::NoStream],
            ..Report::default()
        };
        let mut config = ProviderConfig::of_kind(ProviderKind::Openai);
        config.base_url = Some("http://127.0.0.1:8080/v1".into());
        config.model = Some("qwen".into());
        let text = report.toml_to_add("openai", false, &config);
        assert_eq!(
            text,
            "[providers.openai]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"qwen\"\nstream = false\n\n[providers.openai.compat]\ntool_choice_auto = true\n"
        );
        let declared = report.toml_to_add("llama", true, &config);
        assert!(declared.starts_with("[providers.llama]\nstream = false\n"));
        let parsed: toml::Table = toml::from_str(&text).unwrap_or_default();
        assert!(
            parsed.contains_key("providers"),
            "the snippet is valid TOML"
        );
    }
}
