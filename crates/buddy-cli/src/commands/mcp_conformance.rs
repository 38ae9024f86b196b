//! `buddy mcp conformance-client URL` (hidden): the client the official MCP
//! conformance suite (`@modelcontextprotocol/conformance`, scripts/mcp-conformance.sh)
//! drives. It goes through buddy's own MCP path — an `[[mcp]]` server started by
//! `McpSource`, its tools offered by `McpToolbox` and called through the skill
//! registry (arguments checked against the schema first), its resources read and its
//! prompts fetched — and does what the scenario asks: the suite names it in
//! `MCP_CONFORMANCE_SCENARIO` and gives the tool calls to make in
//! `MCP_CONFORMANCE_CONTEXT`.

use std::sync::Arc;

use buddy_core::{SkillContext, ToolCall, Toolbox};
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox};
use buddy_skills::SkillRegistry;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Nobody to ask: forms are answered as `unattended_elicitation = "defaults"` answers
/// them (accepted with the form's defaults when they fill it, else declined).
#[derive(Debug)]
struct Unattended;

impl buddy_core::Elicitor for Unattended {
    fn ask(
        &self,
        request: buddy_core::ElicitationRequest,
    ) -> buddy_core::BoxFuture<'_, buddy_core::ElicitationAnswer> {
        Box::pin(async move { buddy_core::answer_with_defaults(&request.schema) })
    }
}

/// One call the scenario asks for.
#[derive(Debug, Deserialize)]
struct Call {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

/// What `MCP_CONFORMANCE_CONTEXT` may carry for the scenarios buddy runs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Context {
    #[serde(default)]
    tool_calls: Vec<Call>,
    /// A client registered with the scenario's authorization server beforehand.
    #[serde(default, rename = "client_id")]
    client_id: Option<String>,
    #[serde(default, rename = "client_secret")]
    client_secret: Option<String>,
}

/// The client metadata document URL the suite expects a client to be known by where
/// the authorization server supports URL client ids.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Arguments for a tool from its schema: a plain value of each required property's type.
fn sample_arguments(schema: &Value) -> Map<String, Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut arguments = Map::new();
    for name in required {
        let kind = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("number") => json!(1.5),
            Some("integer") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("test"),
        };
        arguments.insert(name.to_owned(), value);
    }
    arguments
}

/// Runs the scenario against `url`; exit 0 when every step was answered, 1 otherwise
/// (the suite judges from what it saw on the wire, not from this code).
pub async fn conformance_client(url: &str) -> anyhow::Result<u8> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Context = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let mut config = McpServerConfig::http("conformance", url);
    // The scenarios name tools by their own names.
    config.tool_prefix = Some(String::new());
    config.startup_timeout_secs = 20.0;
    config.call_timeout_secs = 20.0;
    config.max_restarts = 0;
    config.sandbox = Some(std::env::current_dir()?);
    // The scenario's authorization server approves at once: a headless browser
    // follows its redirects back to buddy's loopback callback.
    config.oauth.client_id = context.client_id.clone();
    config.oauth.client_secret = context.client_secret.clone();
    config.oauth.client_metadata_url = Some(CLIENT_METADATA_URL.to_owned());
    config.oauth.wait_secs = 15.0;
    let source = McpSource::new(config);
    source.set_browser(Arc::new(buddy_mcp::HeadlessBrowser));
    let toolbox = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![Arc::clone(&source)],
        Box::new(SkillRegistry::new),
    )
    .await?;
    eprintln!(
        "conformance: scenario `{scenario}`, {:?}; tools: {}",
        source.state(),
        toolbox
            .specs()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let offered = |name: &str| {
        toolbox
            .specs()
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.parameters.clone())
    };
    let calls: Vec<(String, Map<String, Value>)> = if scenario == "json-schema-2020-12-preservation"
    {
        // The scenario checks that the schema buddy offers the model is the server's,
        // keyword for keyword: it is sent back through the echo tool.
        let schema = offered("json_schema_2020_12_tool").unwrap_or(Value::Null);
        let mut arguments = Map::new();
        arguments.insert("schema".to_owned(), schema);
        vec![("json_schema_echo".to_owned(), arguments)]
    } else if context.tool_calls.is_empty() {
        toolbox
            .specs()
            .iter()
            .filter(|s| s.name != "read_resource")
            .map(|s| (s.name.clone(), sample_arguments(&s.parameters)))
            .collect()
    } else {
        context
            .tool_calls
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    };
    let mut failed = 0;
    for (i, (name, arguments)) in calls.into_iter().enumerate() {
        let call = ToolCall::new(
            format!("call_{i}"),
            name,
            Value::Object(arguments).to_string(),
        );
        let context = SkillContext {
            elicitor: Some(Arc::new(Unattended)),
            ..SkillContext::default()
        };
        let outcome = toolbox.invoke(&call, context).await;
        failed += usize::from(outcome.is_error);
        eprintln!(
            "conformance: {} → {}{}",
            call.name,
            if outcome.is_error { "error: " } else { "" },
            outcome.content
        );
    }
    for resource in source.list_resources().await? {
        match source.read_resource(&resource.uri).await {
            Ok(text) => eprintln!("conformance: read {} ({} bytes)", resource.uri, text.len()),
            Err(e) => {
                failed += 1;
                eprintln!("conformance: read {}: {e}", resource.uri);
            }
        }
    }
    for prompt in source.list_prompts().await? {
        let arguments = prompt
            .arguments
            .iter()
            .filter(|a| a.required)
            .map(|a| (a.name.clone(), json!("test")))
            .collect();
        match source.get_prompt(&prompt.name, arguments).await {
            Ok(messages) => eprintln!(
                "conformance: prompt {} ({} messages)",
                prompt.name,
                messages.len()
            ),
            Err(e) => {
                failed += 1;
                eprintln!("conformance: prompt {}: {e}", prompt.name);
            }
        }
    }
    Ok(u8::from(failed > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_arguments_fill_the_required_properties_by_type() {
        let schema = json!({"type": "object", "required": ["a", "b", "s"],
            "properties": {"a": {"type": "number"}, "b": {"type": "integer"}, "s": {"type": "string"}, "o": {"type": "string"}}});
        assert_eq!(
            Value::Object(sample_arguments(&schema)),
            json!({"a": 1.5, "b": 1, "s": "test"})
        );
    }
}
