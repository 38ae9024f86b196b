//! `buddy init`: a commented buddy.toml to start from, with the provider filled in when
//! one is found — a local OpenAI-compatible server on its usual port, or an API key in
//! the environment.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

/// `buddy init`.
#[derive(Args, Debug)]
pub struct InitArgs {
    /// Where to write it.
    #[arg(long, default_value = "buddy.toml")]
    path: PathBuf,
    /// Replace a file that is already there.
    #[arg(long)]
    force: bool,
    /// An OpenAI-compatible server to use (its base URL, e.g. http://127.0.0.1:8080/v1),
    /// instead of looking on the usual local ports.
    #[arg(long, value_name = "URL")]
    local: Option<String>,
}

/// Local servers buddy looks for, by their usual ports.
const LOCAL_SERVERS: [(&str, &str); 4] = [
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("LM Studio", "http://127.0.0.1:1234/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
    ("vLLM", "http://127.0.0.1:8000/v1"),
];

/// The provider the file is written for.
enum Found {
    Local {
        what: String,
        base_url: String,
        model: String,
    },
    OpenAi,
    Anthropic,
    Nothing,
}

/// Writes the file; exit 0.
pub async fn init(args: InitArgs) -> anyhow::Result<u8> {
    if args.path.exists() && !args.force {
        bail!(
            "{} exists already; pass --force to replace it (or --path to write another file)",
            args.path.display()
        );
    }
    let found = find(args.local.as_deref()).await;
    let (said, provider) = match &found {
        Found::Local {
            what,
            base_url,
            model,
        } => (
            format!("found {what} at {base_url}, model {model}"),
            format!(
                "default_provider = \"local\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = {base_url:?}\nmodel = {model:?}\n\
                 # [providers.local.compat]       # `buddy doctor` says which of these your server needs\n\
                 # tool_choice_auto = true\n"
            ),
        ),
        Found::OpenAi => (
            "found OPENAI_API_KEY".to_owned(),
            "default_provider = \"openai\"\n\n[providers.openai]\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\n\
             api_key_env = \"OPENAI_API_KEY\"\n"
                .to_owned(),
        ),
        Found::Anthropic => (
            "found ANTHROPIC_API_KEY".to_owned(),
            "default_provider = \"anthropic\"\n\n[providers.anthropic]\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
             api_key_env = \"ANTHROPIC_API_KEY\"\n"
                .to_owned(),
        ),
        Found::Nothing => (
            "found no model server or API key: buddy's offline scripted model answers until you name one".to_owned(),
            "# default_provider = \"openai\"   # without one, buddy's offline scripted model answers\n\n\
             # [providers.openai]\n# kind = \"openai\"               # or \"anthropic\"; any OpenAI-compatible server with base_url\n\
             # model = \"gpt-4o-mini\"\n# api_key_env = \"OPENAI_API_KEY\"\n# base_url = \"http://127.0.0.1:11434/v1\"\n"
                .to_owned(),
        ),
    };
    let text = format!("{HEADER}{provider}{REST}");
    // What buddy writes, buddy must read.
    buddy_cli::config::BuddyConfig::parse(&text, "buddy init")
        .context("buddy init wrote a file buddy cannot read (a bug: please report it)")?;
    std::fs::write(&args.path, text)
        .with_context(|| format!("cannot write {}", args.path.display()))?;
    eprintln!("buddy: wrote {} ({said})", args.path.display());
    eprintln!(
        "buddy: next: `buddy doctor` checks it, `buddy run \"What time is it?\"` runs a turn"
    );
    Ok(0)
}

/// The provider to write the file for.
async fn find(local: Option<&str>) -> Found {
    let candidates: Vec<(String, String)> = match local {
        Some(url) => vec![(
            "the server".to_owned(),
            url.trim_end_matches('/').to_owned(),
        )],
        None => LOCAL_SERVERS
            .iter()
            .map(|(what, url)| ((*what).to_owned(), (*url).to_owned()))
            .collect(),
    };
    for (what, base_url) in candidates {
        if let Some(model) = first_model(&base_url).await {
            return Found::Local {
                what,
                base_url,
                model,
            };
        }
    }
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    if set("OPENAI_API_KEY") {
        Found::OpenAi
    } else if set("ANTHROPIC_API_KEY") {
        Found::Anthropic
    } else {
        Found::Nothing
    }
}

/// The first model an OpenAI-compatible server lists at `base_url`/models, if it answers
/// quickly.
async fn first_model(base_url: &str) -> Option<String> {
    buddy_providers::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let response = client.get(format!("{base_url}/models")).send().await.ok()?;
    let body: serde_json::Value = response.error_for_status().ok()?.json().await.ok()?;
    let ids: Vec<&str> = body["data"]
        .as_array()?
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    pick_model(&ids).map(str::to_owned)
}

/// The model to write from a server's list: buddy's own scripted assistant when the
/// server is buddy (`buddy serve` or `buddy mock-server` list their scenarios by name,
/// loop demos first), else the first listed.
fn pick_model<'a>(ids: &[&'a str]) -> Option<&'a str> {
    let assistant = buddy_scripted::library::default_scenario()
        .map(|s| format!("scripted:{}", s.name))
        .ok();
    ids.iter()
        .find(|id| assistant.as_deref() == Some(**id))
        .or_else(|| ids.first())
        .copied()
}

const HEADER: &str = "\
# buddy.toml — written by `buddy init`. Every setting is in docs/reference/config.md; what is
# commented out shows the default.

# mcp_import = [\"claude_desktop_config.json\"]   # MCP servers another client has set up
";

const REST: &str = r#"
[policy]                          # the loop's limits (a request or flag may only lower them)
# max_model_calls = 25
# max_tool_calls = 25
# max_turn_cost_usd = 0.50        # a money cap per turn, by the model's price
# deadline_ms = 120000

[skills]
builtin = ["get_time", "read_file", "list_dir", "search_files", "write_file"]
# sandbox = "."                   # the directory the file skills may touch

[approval]
mode = "destructive"              # calls with side effects (write_file) ask first

# [[mcp]]                         # an MCP server's tools beside the skills
# name = "time"
# command = "uvx"                 # needs uv (https://docs.astral.sh/uv/); or any program
# args = ["mcp-server-time"]

# [server]                        # `buddy serve`
# listen = "127.0.0.1:8080"
# max_daily_cost_usd = 20         # each API key's spend ceiling

# [telemetry]                     # traces to an OTLP backend (Jaeger, Tempo, Phoenix, …)
# endpoint = "http://127.0.0.1:4318"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buddy_server_gives_its_assistant_not_its_first_loop_demo() {
        let buddy = [
            "scripted:ab_cycle",
            "scripted:answer_plus_call",
            "scripted:offline_assistant",
        ];
        assert_eq!(pick_model(&buddy), Some("scripted:offline_assistant"));
        assert_eq!(pick_model(&["qwen2.5:7b", "llama3"]), Some("qwen2.5:7b"));
        assert_eq!(pick_model(&[]), None);
    }
}
