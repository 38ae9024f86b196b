//! A server's resources and prompts: listed, read and fetched as text, each bounded by
//! the server's `call_timeout_secs`.

use std::future::Future;
use std::time::Duration;

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::ServiceError;
use serde_json::Value;

use crate::client::source::McpSource;
use crate::requests::content::block_text;

/// One resource a server lists.
#[derive(Clone, Debug, PartialEq)]
pub struct McpResource {
    pub uri: String,
    pub name: String,
    pub description: String,
    pub mime_type: Option<String>,
}

/// One argument of a prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct McpPromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// One prompt a server lists.
#[derive(Clone, Debug, PartialEq)]
pub struct McpPrompt {
    pub name: String,
    pub description: String,
    pub arguments: Vec<McpPromptArgument>,
}

/// Why a resource or prompt could not be had; the text says which server and what.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct CatalogError(pub String);

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl McpSource {
    /// Runs `request` on the live client within `call_timeout_secs`, naming `what` in
    /// the error.
    async fn bounded<T, F, Fut>(&self, what: &str, request: F) -> Result<T, CatalogError>
    where
        F: FnOnce(std::sync::Arc<crate::requests::handler::Client>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let name = &self.config().name;
        let client = self
            .connected()
            .await
            .map_err(|e| CatalogError(e.to_string()))?;
        let secs = self.config().call_timeout_secs;
        match tokio::time::timeout(Duration::from_secs_f64(secs), request(client)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(ServiceError::McpError(error))) => Err(CatalogError(format!(
                "MCP server `{name}` refused {what}: {} (JSON-RPC error {})",
                error.message, error.code.0
            ))),
            Ok(Err(other)) => Err(CatalogError(format!(
                "MCP server `{name}` failed {what}: {other}"
            ))),
            Err(_) => Err(CatalogError(format!(
                "MCP server `{name}` did not answer {what} within {secs}s"
            ))),
        }
    }

    /// Whether the server offers resources (`resources`) or prompts (`prompts`), by
    /// the capabilities it announced; false before it started.
    async fn offers(&self, which: &str) -> bool {
        let Ok(client) = self.connected().await else {
            return false;
        };
        client.peer_info().is_some_and(|info| match which {
            "resources" => info.capabilities.resources.is_some(),
            _ => info.capabilities.prompts.is_some(),
        })
    }

    /// The resources the server lists (every page); none when it offers none.
    pub async fn list_resources(&self) -> Result<Vec<McpResource>, CatalogError> {
        if !self.offers("resources").await {
            return Ok(Vec::new());
        }
        let listed = self
            .bounded(
                "resources/list",
                |c| async move { c.list_all_resources().await },
            )
            .await?;
        Ok(listed
            .into_iter()
            .map(|r| {
                let r = serde_json::to_value(r).unwrap_or(Value::Null);
                McpResource {
                    uri: text_of(&r, "uri"),
                    name: text_of(&r, "name"),
                    description: text_of(&r, "description"),
                    mime_type: r.get("mimeType").and_then(Value::as_str).map(str::to_owned),
                }
            })
            .collect())
    }

    /// The text of resource `uri`: each part's text, a binary part named with a note
    /// that it was left out.
    pub async fn read_resource(&self, uri: &str) -> Result<String, CatalogError> {
        let what = format!("resources/read of `{uri}`");
        let params = ReadResourceRequestParams::new(uri);
        let read = self
            .bounded(&what, |c| async move { c.read_resource(params).await })
            .await?;
        let read = serde_json::to_value(read).unwrap_or(Value::Null);
        let parts: Vec<String> = read
            .get("contents")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!(
                    "[{} ({}): binary content left out: buddy passes text only]",
                    text_of(part, "uri"),
                    part.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown type")
                ),
            })
            .collect();
        Ok(parts.join("\n"))
    }

    /// The prompts the server lists (every page); none when it offers none.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, CatalogError> {
        if !self.offers("prompts").await {
            return Ok(Vec::new());
        }
        let listed = self
            .bounded(
                "prompts/list",
                |c| async move { c.list_all_prompts().await },
            )
            .await?;
        Ok(listed
            .into_iter()
            .map(|p| McpPrompt {
                description: p.description.clone().unwrap_or_default(),
                arguments: p
                    .arguments
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| McpPromptArgument {
                        name: a.name,
                        description: a.description.unwrap_or_default(),
                        required: a.required.unwrap_or(false),
                    })
                    .collect(),
                name: p.name,
            })
            .collect())
    }

    /// Prompt `name` filled with `arguments`, as `(role, text)` messages.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Vec<(String, String)>, CatalogError> {
        let what = format!("prompts/get of `{name}`");
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let got = self
            .bounded(&what, |c| async move { c.get_prompt(params).await })
            .await?;
        let got = serde_json::to_value(got).unwrap_or(Value::Null);
        Ok(got
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|m| {
                let content = m.get("content").cloned().unwrap_or(Value::Null);
                (text_of(m, "role"), block_text(&content))
            })
            .collect())
    }
}
