//! The response object and what it holds: status, errors, settings, usage.

use buddy_core::ResponseFormat;
use serde::Serialize;
use serde_json::Value;

use super::input::FunctionTool;
use super::items::Item;
use crate::details::BuddyDetails;

/// Where a response stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    InProgress,
    Completed,
    Incomplete,
    Failed,
    /// Stopped by `POST /v1/responses/{id}/cancel` (or the turn's own cancel).
    Cancelled,
}

/// A response object (`"object": "response"`), every field the API has.
#[derive(Clone, Debug, Serialize)]
pub struct ResponseObject {
    pub id: String,
    pub object: &'static str,
    pub created_at: u64,
    pub completed_at: Option<u64>,
    pub status: ResponseStatus,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub max_tool_calls: Option<u64>,
    pub model: String,
    pub output: Vec<Item>,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Option<String>,
    /// The conversation (Conversations API) the response was added to, when it was.
    pub conversation: Option<ConversationRef>,
    pub reasoning: ReasoningSettings,
    pub store: bool,
    pub background: bool,
    pub service_tier: &'static str,
    pub temperature: f64,
    pub top_p: f64,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
    pub top_logprobs: u32,
    pub text: TextSettings,
    pub tool_choice: Value,
    pub tools: Vec<FunctionTool>,
    pub truncation: &'static str,
    pub usage: Option<ResponseUsage>,
    pub user: Option<String>,
    pub safety_identifier: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub metadata: Value,
    /// buddy's own extension: why the turn ended and what it did.
    pub buddy: BuddyDetails,
}

/// A conversation a response belongs to: `{"id": "conv_…"}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConversationRef {
    pub id: String,
}

/// Why a response failed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseError {
    pub code: &'static str,
    pub message: String,
}

/// Why a response is incomplete (`max_output_tokens`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IncompleteDetails {
    pub reason: &'static str,
}

/// The reasoning settings a response repeats (buddy sets none).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReasoningSettings {
    pub effort: Option<String>,
    pub summary: Option<String>,
}

/// The text format a response was made with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TextSettings {
    pub format: ResponseFormat,
}

/// A response's token counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: CachedTokens,
    pub output_tokens: u64,
    pub output_tokens_details: ReasoningTokens,
    pub total_tokens: u64,
}

impl ResponseUsage {
    /// The usage of `input` tokens (`cached` of them from the prompt cache) and `output`.
    pub fn new(input: u64, cached: u64, output: u64) -> Self {
        ResponseUsage {
            input_tokens: input,
            input_tokens_details: CachedTokens {
                cached_tokens: cached,
            },
            output_tokens: output,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: 0,
            },
            total_tokens: input + output,
        }
    }
}

/// `input_tokens_details`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CachedTokens {
    pub cached_tokens: u64,
}

/// `output_tokens_details`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReasoningTokens {
    pub reasoning_tokens: u64,
}
