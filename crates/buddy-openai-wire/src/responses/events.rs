//! The events of a streamed response.

use buddy_core::Arguments;
use serde::Serialize;
use serde_json::Value;

use super::items::{Item, OutputText};
use super::object::ResponseObject;

/// One event of a streamed response (its `sequence_number` is added when it is sent).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<ResponseObject> },
    /// A response stopped by `POST /v1/responses/{id}/cancel` (status `cancelled`): the
    /// event OpenAI names `response.cancelled`, which its stream schema does not list.
    #[serde(rename = "response.cancelled")]
    Cancelled { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded { output_index: usize, item: Item },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone { output_index: usize, item: Item },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: Option<String>,
        output_index: usize,
        delta: Arguments,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: Option<String>,
        output_index: usize,
        name: String,
        arguments: Arguments,
    },
    /// The turn failed; a `response.failed` follows. The error is both at the event's
    /// top level (OpenAI's `ResponseErrorEvent`) and in `error` (Open Responses).
    #[serde(rename = "error")]
    Error {
        code: &'static str,
        message: String,
        param: Option<String>,
        error: StreamError,
    },
}

/// The error of an `error` event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
}
