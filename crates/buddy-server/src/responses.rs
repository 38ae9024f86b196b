//! `POST /v1/responses`: the OpenAI Responses API over buddy's turns.
//!
//! - `input` (a string or items: messages, `function_call`, `function_call_output`) and
//!   `instructions` (a system prompt for this response only);
//! - `function` tools are the client's: a call to one ends the response with
//!   `function_call` output items, and the client resumes with `function_call_output`
//!   items (after `previous_response_id`, or with the whole input again);
//! - buddy's own skills run server-side; each call appears as an `mcp_call` output item
//!   (`server_label: "buddy"`) carrying its arguments and output, or as a
//!   `buddy:skill_call` extension item when the request or the server asks for it;
//! - `previous_response_id` continues the stored conversation the response belongs to
//!   (`store: false` keeps nothing, and such a response cannot be continued);
//! - `max_tool_calls` lowers the turn's tool-call limit; usage, errors and the stream's
//!   events are in the API's shapes.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use buddy_core::{
    Arguments, ChatEvent, Message, ResponseFormat, Sampling, StopReason, ToolCall, TurnStats,
};
use buddy_openai_wire::BuddyDetails;
use buddy_openai_wire::responses::{
    FunctionCallItem, FunctionTool, IncompleteDetails, Item, ItemStatus, MessageItem, OutputText,
    Phase, ReasoningSettings, ResponseError, ResponseObject, ResponseStatus, ResponseUsage,
    SkillCallItem, StreamError, StreamEvent, TextSettings, function_tools, input_items,
    items_to_messages,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::client_tools::with_client_tools;
use crate::error::AppError;
use crate::items::SkillCalls;
use crate::openai::unix_now;
use crate::request::owned_conversation;
use crate::request::{JsonBody, request_policy};
use crate::sse;
use crate::state::AppState;
use crate::turn_log::{EventLog, Frame};
use crate::turns::{
    CancelOnDrop, Conversation, Prelude, StartedTurn, disconnect_guard, start_turn,
};
use std::sync::Arc;

/// The body of `POST /v1/responses` (fields buddy does not use are accepted and ignored).
#[derive(Deserialize)]
pub(crate) struct ResponsesRequest {
    model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    instructions: Option<String>,
    #[serde(default)]
    tools: Vec<Value>,
    pub previous_response_id: Option<String>,
    #[serde(default)]
    stream: bool,
    /// Run the response on its own: the request returns at once (or streams), and the
    /// response is read later with `GET /v1/responses/{id}`.
    #[serde(default)]
    background: bool,
    max_tool_calls: Option<u64>,
    pub store: Option<bool>,
    tool_choice: Option<Value>,
    prompt_cache_key: Option<String>,
    safety_identifier: Option<String>,
    metadata: Option<Value>,
    /// buddy's own extension: policy overrides for this request.
    buddy_policy: Option<Value>,
    /// buddy's own extension: how server-side skill calls appear in `output`.
    buddy_skill_calls: Option<SkillCalls>,
    /// A conversation (OpenAI's Conversations API) this response continues: its id, or
    /// `{"id": …}`.
    conversation: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_output_tokens: Option<u32>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}}`.
    text: Option<Value>,
}

impl ResponsesRequest {
    /// The sampling and output settings the request asks for, or what is wrong with them.
    fn sampling(&self) -> Result<Sampling, String> {
        let response_format = match self.text.as_ref().and_then(|t| t.get("format")) {
            None | Some(Value::Null) => None,
            Some(format) => Some(
                buddy_openai_wire::response_format(format.clone())
                    .map_err(|e| format!("`text.format`: {e}"))?,
            ),
        };
        Ok(Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_output_tokens,
            response_format,
            ..Sampling::default()
        })
    }
}

/// What the response object repeats of its request.
#[derive(Clone, Debug, Default)]
struct Echo {
    /// The settings the response was made with.
    sampling: Sampling,
    /// The client's function tools.
    tools: Vec<FunctionTool>,
    tool_choice: Option<Value>,
    max_tool_calls: Option<u64>,
    prompt_cache_key: Option<String>,
    safety_identifier: Option<String>,
    metadata: Option<Value>,
}

pub(crate) async fn responses(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<ResponsesRequest>,
) -> Result<Response, AppError> {
    let streamed = body.stream;
    let background = body.background;
    if background && body.store == Some(false) {
        return Err(AppError::BadRequest(
            "`background: true` needs a stored response (a background response is read later \
             with GET /v1/responses/{id}); leave `store` out or set it to true"
                .into(),
        ));
    }
    let (turn, mut builder) = begin(&state, &caller, body, None).await?;
    builder.background = background;
    if streamed || background {
        let guard = match background {
            true => None,
            false => disconnect_guard(&state, turn.cancel.clone()),
        };
        let turn_id = turn.turn_id.clone();
        let response = builder.response();
        let log = response_log(&state, turn, builder);
        if !streamed {
            return Ok(Json(response).into_response());
        }
        let frames = crate::reattach::log_frames(log.watch(0), guard);
        return Ok(crate::openai::with_turn_header(stream(frames), &turn_id));
    }
    let StartedTurn {
        mut events, cancel, ..
    } = turn;
    let guard = CancelOnDrop(cancel);
    while let Some(event) = events.recv().await {
        if let ChatEvent::Error {
            reason, message, ..
        } = &event
        {
            return Err(AppError::TurnFailed {
                reason: *reason,
                message: message.clone(),
            });
        }
        builder.on_event(event);
    }
    drop(guard);
    Ok(Json(builder.response()).into_response())
}

/// A response whose conversation the caller holds itself (`store: false` over a
/// WebSocket): its id and the whole conversation after it.
pub(crate) struct Unstored {
    pub id: String,
    pub history: Vec<Message>,
}

/// Starts the turn a request asks for; `unstored` is the conversation of a `store: false`
/// response its `previous_response_id` names (the WebSocket mode keeps the last one). A
/// turn started with `keep` set hands its whole conversation back when it ends.
pub(crate) async fn begin(
    state: &AppState,
    caller: &Caller,
    body: ResponsesRequest,
    unstored: Option<Unstored>,
) -> Result<(StartedTurn, Builder), AppError> {
    let sampling = body.sampling().map_err(AppError::BadRequest)?;
    let skill_calls = body
        .buddy_skill_calls
        .unwrap_or(state.inner.settings.responses_skill_calls);
    let input = input_messages(&caller.owner, body.input.unwrap_or(Value::Null))
        .map_err(AppError::BadRequest)?;
    let tools = function_tools(body.tools).map_err(AppError::BadRequest)?;
    let echo = Echo {
        sampling: sampling.clone(),
        tools: tools.clone(),
        tool_choice: body.tool_choice,
        max_tool_calls: body.max_tool_calls,
        prompt_cache_key: body.prompt_cache_key,
        safety_identifier: body.safety_identifier,
        metadata: body.metadata,
    };
    let tools = tools.into_iter().map(Into::into).collect();
    let mut policy = request_policy(body.buddy_policy)?;
    if let Some(max) = body.max_tool_calls {
        policy
            .set("max_tool_calls", json!(max))
            .map_err(|e| AppError::BadRequest(format!("max_tool_calls: {e}")))?;
    }
    let mut model = body.model;
    let named = match &body.conversation {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(other) => Some(other["id"].as_str().map(str::to_owned).ok_or_else(|| {
            AppError::BadRequest("`conversation` must be a conversation id or {\"id\": …}".into())
        })?),
    };
    if named.is_some() && body.previous_response_id.is_some() {
        return Err(AppError::BadRequest(
            "give `conversation` or `previous_response_id`, not both".into(),
        ));
    }
    let conversation = match (&body.previous_response_id, &unstored) {
        _ if named.is_some() => {
            let id = named.unwrap_or_default();
            let info = owned_conversation(state, caller, &id).await?;
            if model.is_none() {
                model = info.last_model;
            }
            Some(id)
        }
        (Some(_), Some(_)) | (None, _) => None,
        (Some(previous), None) => {
            let id = conversation_of(previous).ok_or_else(|| {
                AppError::NotFound(format!(
                    "response `{previous}` does not exist or was not stored (store: false); send the whole input instead"
                ))
            })?;
            let info = owned_conversation(state, caller, &id)
                .await
                .map_err(|_| AppError::NotFound(format!("response `{previous}` does not exist")))?;
            if model.is_none() {
                model = info.last_model;
            }
            Some(id)
        }
    };
    let continued = conversation.is_some() || unstored.is_some();
    if !continued && !input.iter().any(Message::is_user) {
        return Err(AppError::BadRequest(
            "`input` has no user message; send the user's text (or continue with previous_response_id)".into(),
        ));
    }
    let mut resolved = state
        .inner
        .backend
        .resolve(None, model.as_deref())
        .map_err(|e| AppError::BadRequest(e.to_string()))?;
    resolved.toolbox = with_client_tools(resolved.toolbox, tools).map_err(AppError::BadRequest)?;
    let keep = body.store == Some(false);
    let prelude = Prelude {
        instructions: body.instructions.clone(),
        openai: true,
        keep_messages: keep,
        sampling,
        ..Prelude::default()
    };
    let (conversation, prelude) = match (conversation, unstored, body.store) {
        (Some(id), _, _) => (
            Conversation::Stored(Some(id)),
            Prelude {
                append: input,
                ..prelude
            },
        ),
        (None, Some(unstored), _) => {
            let mut history = unstored.history;
            history.extend(input);
            (Conversation::Ephemeral(history), prelude)
        }
        (None, None, Some(false)) => (Conversation::Ephemeral(input), prelude),
        (None, None, _) => (
            Conversation::Stored(None),
            Prelude {
                append: input,
                ..prelude
            },
        ),
    };
    let turn = start_turn(
        state,
        caller,
        conversation,
        None,
        resolved,
        &policy,
        prelude,
    )
    .await?;
    let id = response_id(turn.conversation_id.as_deref(), &turn.turn_id);
    let mut builder = Builder::new(
        id,
        caller.owner.clone(),
        turn.model.clone(),
        body.instructions,
        body.previous_response_id,
    );
    builder.echo = echo;
    builder.skill_calls = skill_calls;
    Ok((turn, builder))
}

/// Output items this process produced, by key and id, so that a client may send them
/// back as `item_reference`s (the Vercel AI SDK does, for its earlier steps). A key finds
/// only its own items; their ids hold the response's random id, so they cannot be
/// guessed either. Bounded: the oldest are forgotten first; a reference to a forgotten
/// or another key's item is refused alike.
struct ItemCache {
    items: std::collections::HashMap<String, Item>,
    order: std::collections::VecDeque<String>,
}

/// Items kept for `item_reference`s.
const ITEM_CACHE: usize = 10_000;

fn item_cache() -> &'static std::sync::Mutex<ItemCache> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<ItemCache>> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| {
        std::sync::Mutex::new(ItemCache {
            items: std::collections::HashMap::new(),
            order: std::collections::VecDeque::new(),
        })
    })
}

/// Where an owner's item is kept.
fn item_key(owner: &str, id: &str) -> String {
    format!("{owner}\u{1f}{id}")
}

fn remember_item(owner: &str, item: &Item) {
    let Some(id) = item.id() else {
        return;
    };
    let key = item_key(owner, id);
    if let Ok(mut cache) = item_cache().lock() {
        if cache.items.insert(key.clone(), item.clone()).is_none() {
            cache.order.push_back(key);
        }
        while cache.order.len() > ITEM_CACHE {
            if let Some(old) = cache.order.pop_front() {
                cache.items.remove(&old);
            }
        }
    }
}

fn referenced_item(owner: &str, id: &str) -> Option<Item> {
    item_cache()
        .lock()
        .ok()?
        .items
        .get(&item_key(owner, id))
        .cloned()
}

/// `resp_` and the hex of the conversation and turn ids: the conversation is found again
/// from `previous_response_id` alone. A response kept nowhere has only the turn's.
fn response_id(conversation: Option<&str>, turn: &str) -> String {
    let turn = turn.trim_start_matches("turn_");
    match conversation {
        Some(conversation) => format!("resp_{}{turn}", conversation.trim_start_matches("conv_")),
        None => format!("resp_{turn}"),
    }
}

/// The stored conversation a response id belongs to.
pub(crate) fn conversation_of(response: &str) -> Option<String> {
    stored_hex(response).map(|hex| format!("conv_{}", &hex[..32]))
}

/// The turn a stored response is, from its id (see [`response_id`]).
pub(crate) fn turn_of(response: &str) -> Option<String> {
    stored_hex(response).map(|hex| format!("turn_{}", &hex[32..]))
}

/// The 64 hex digits of a stored response's id: its conversation's, then its turn's.
fn stored_hex(response: &str) -> Option<&str> {
    let hex = response.strip_prefix("resp_")?;
    (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit())).then_some(hex)
}

/// buddy's messages for `input` (references resolved among `owner`'s items), or what is
/// wrong with an item.
pub(crate) fn input_messages(owner: &str, input: Value) -> Result<Vec<Message>, String> {
    let mut items = input_items(input)?;
    for (i, item) in items.iter_mut().enumerate() {
        if let Item::ItemReference(reference) = item {
            *item = referenced_item(owner, &reference.id).ok_or_else(|| {
                format!(
                    "input[{i}]: item `{}` is not known here (items are kept a while by the instance that made them); send the item itself",
                    reference.id
                )
            })?;
        }
    }
    items_to_messages(items, crate::compaction_item::decode)
}

/// Builds a response, and the stream's events, from a turn's events.
pub(crate) struct Builder {
    pub id: String,
    model: String,
    pub created_at: u64,
    instructions: Option<String>,
    previous_response_id: Option<String>,
    /// Whether the response was kept (it can be continued).
    stored: bool,
    /// Whose response it is: its items are found again only for this owner.
    owner: String,
    sequence: u64,
    output: Vec<Item>,
    /// The message item being streamed: its id and text so far.
    open: Option<(String, String)>,
    /// Calls announced and not yet answered.
    pending: Vec<ToolCall>,
    status: ResponseStatus,
    incomplete: Option<&'static str>,
    error: Option<ResponseError>,
    stats: TurnStats,
    reason: Option<StopReason>,
    /// When the response ended (Unix seconds).
    pub completed_at: Option<u64>,
    echo: Echo,
    skill_calls: SkillCalls,
    /// Whether the response runs in the background (`background: true`).
    pub background: bool,
}

impl Builder {
    pub(crate) fn new(
        id: String,
        owner: String,
        model: String,
        instructions: Option<String>,
        previous_response_id: Option<String>,
    ) -> Self {
        Builder {
            model,
            created_at: unix_now(),
            instructions,
            previous_response_id,
            stored: conversation_of(&id).is_some(),
            owner,
            sequence: 0,
            id,
            output: Vec::new(),
            open: None,
            pending: Vec::new(),
            status: ResponseStatus::InProgress,
            incomplete: None,
            error: None,
            stats: TurnStats::default(),
            reason: None,
            completed_at: None,
            echo: Echo::default(),
            skill_calls: SkillCalls::default(),
            background: false,
        }
    }

    /// The response object as it stands.
    pub(crate) fn response(&self) -> ResponseObject {
        let usage = (self.status != ResponseStatus::InProgress)
            .then(|| ResponseUsage::new(self.stats.input_tokens, 0, self.stats.output_tokens));
        let echo = &self.echo;
        ResponseObject {
            id: self.id.clone(),
            object: "response",
            created_at: self.created_at,
            completed_at: self.completed_at,
            status: self.status,
            error: self.error.clone(),
            incomplete_details: self.incomplete.map(|reason| IncompleteDetails { reason }),
            instructions: self.instructions.clone(),
            max_output_tokens: echo.sampling.max_output_tokens,
            max_tool_calls: echo.max_tool_calls,
            model: self.model.clone(),
            output: self.output.clone(),
            parallel_tool_calls: true,
            previous_response_id: self.previous_response_id.clone(),
            reasoning: ReasoningSettings::default(),
            store: self.stored,
            background: self.background,
            service_tier: "default",
            temperature: echo.sampling.temperature.unwrap_or(1.0),
            top_p: echo.sampling.top_p.unwrap_or(1.0),
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            top_logprobs: 0,
            text: TextSettings {
                format: echo
                    .sampling
                    .response_format
                    .clone()
                    .unwrap_or(ResponseFormat::Text),
            },
            tool_choice: echo.tool_choice.clone().unwrap_or_else(|| json!("auto")),
            tools: echo.tools.clone(),
            truncation: "disabled",
            usage,
            user: None,
            safety_identifier: echo.safety_identifier.clone(),
            prompt_cache_key: echo.prompt_cache_key.clone(),
            metadata: echo.metadata.clone().unwrap_or_else(|| json!({})),
            buddy: BuddyDetails::of(self.reason, &self.stats),
        }
    }

    /// One stream event, numbered: its type (the SSE event name) and its JSON.
    fn event(&mut self, event: StreamEvent) -> (String, Value) {
        let mut data = serde_json::to_value(&event).unwrap_or_default();
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        (kind, data)
    }

    /// The response as it stands, for an event that carries it.
    fn boxed(&self) -> Box<ResponseObject> {
        Box::new(self.response())
    }

    /// The stream's opening events.
    pub(crate) fn opening(&mut self) -> Vec<(String, Value)> {
        let created = StreamEvent::Created {
            response: self.boxed(),
        };
        let in_progress = StreamEvent::InProgress {
            response: self.boxed(),
        };
        vec![self.event(created), self.event(in_progress)]
    }

    /// Ends the message being streamed. `phase` labels it (Open Responses): `commentary`
    /// for the narration of a model call that went on to call tools — which ends with a
    /// blank line, so that clients joining every message's text (`output_text`) keep
    /// the narration apart from the answer — and `final_answer` for the answer.
    fn close_message(&mut self, out: &mut Vec<(String, Value)>, phase: Option<Phase>) {
        let Some((id, mut text)) = self.open.take() else {
            return;
        };
        let index = self.output.len();
        if phase == Some(Phase::Commentary) && !text.ends_with("\n\n") {
            let separator = if text.ends_with('\n') { "\n" } else { "\n\n" };
            text.push_str(separator);
            out.push(self.event(StreamEvent::OutputTextDelta {
                item_id: id.clone(),
                output_index: index,
                content_index: 0,
                delta: separator.into(),
                logprobs: Vec::new(),
            }));
        }
        let part = OutputText::new(text.clone());
        let item = Item::Message(MessageItem {
            phase,
            ..MessageItem::assistant(id.clone(), ItemStatus::Completed, vec![part.clone()])
        });
        out.push(self.event(StreamEvent::OutputTextDone {
            item_id: id.clone(),
            output_index: index,
            content_index: 0,
            text,
            logprobs: Vec::new(),
        }));
        out.push(self.event(StreamEvent::ContentPartDone {
            item_id: id,
            output_index: index,
            content_index: 0,
            part,
        }));
        out.push(self.event(StreamEvent::OutputItemDone {
            output_index: index,
            item: item.clone(),
        }));
        remember_item(&self.owner, &item);
        self.output.push(item);
    }

    /// An id for the next output item: `prefix`, the response's (random) id, its index.
    fn item_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}_{}_{}",
            self.id.trim_start_matches("resp_"),
            self.output.len()
        )
    }

    /// An item complete at once (a server-side call, a client call): added, then done.
    fn whole_item(&mut self, item: Item, out: &mut Vec<(String, Value)>) {
        let index = self.output.len();
        let mut added = item.clone();
        match &mut added {
            Item::FunctionCall(call) => {
                call.status = Some(ItemStatus::InProgress);
                call.arguments = Arguments::default();
            }
            Item::McpCall(call) | Item::SkillCall(call) => {
                call.status = Some(ItemStatus::InProgress)
            }
            _ => {}
        }
        out.push(self.event(StreamEvent::OutputItemAdded {
            output_index: index,
            item: added,
        }));
        if let Item::FunctionCall(call) = &item {
            out.push(self.event(StreamEvent::FunctionCallArgumentsDelta {
                item_id: call.id.clone(),
                output_index: index,
                delta: call.arguments.clone(),
            }));
            out.push(self.event(StreamEvent::FunctionCallArgumentsDone {
                item_id: call.id.clone(),
                output_index: index,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
        }
        out.push(self.event(StreamEvent::OutputItemDone {
            output_index: index,
            item: item.clone(),
        }));
        remember_item(&self.owner, &item);
        self.output.push(item);
    }

    /// What one turn event adds to the response, as stream events.
    pub(crate) fn on_event(&mut self, event: ChatEvent) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        match event {
            ChatEvent::TextDelta { text } => {
                let index = self.output.len();
                let id = match &self.open {
                    Some((id, _)) => id.clone(),
                    None => {
                        let id = self.item_id("msg");
                        let item =
                            MessageItem::assistant(id.clone(), ItemStatus::InProgress, Vec::new());
                        out.push(self.event(StreamEvent::OutputItemAdded {
                            output_index: index,
                            item: Item::Message(item),
                        }));
                        out.push(self.event(StreamEvent::ContentPartAdded {
                            item_id: id.clone(),
                            output_index: index,
                            content_index: 0,
                            part: OutputText::new(""),
                        }));
                        self.open = Some((id.clone(), String::new()));
                        id
                    }
                };
                if let Some((_, so_far)) = &mut self.open {
                    so_far.push_str(&text);
                }
                out.push(self.event(StreamEvent::OutputTextDelta {
                    item_id: id,
                    output_index: index,
                    content_index: 0,
                    delta: text,
                    logprobs: Vec::new(),
                }));
            }
            // One model call is over: its text is one message.
            ChatEvent::IterationStats {
                tool_calls_requested,
                ..
            } => {
                let phase = match tool_calls_requested {
                    0 => Phase::FinalAnswer,
                    _ => Phase::Commentary,
                };
                self.close_message(&mut out, Some(phase));
            }
            ChatEvent::ToolCallStart {
                id,
                name,
                arguments,
            } => {
                self.close_message(&mut out, None);
                self.pending.push(ToolCall::new(id, name, arguments));
            }
            ChatEvent::ToolCallResult {
                id,
                content,
                is_error,
                ..
            } => {
                if let Some(at) = self.pending.iter().position(|c| c.id == id) {
                    let call = self.pending.remove(at);
                    let (output, error) = match is_error {
                        true => (None, Some(content)),
                        false => (Some(content), None),
                    };
                    let mut item = SkillCallItem {
                        id: self.item_id("mcp"),
                        call_id: None,
                        server_label: Some("buddy".into()),
                        name: call.name,
                        arguments: call.arguments,
                        output,
                        error,
                        status: Some(ItemStatus::Completed),
                    };
                    let item = match self.skill_calls {
                        SkillCalls::Extension => {
                            item.call_id = Some(call.id);
                            item.server_label = None;
                            Item::SkillCall(item)
                        }
                        _ => Item::McpCall(item),
                    };
                    self.whole_item(item, &mut out);
                }
            }
            ChatEvent::Done { reason, stats, .. } => {
                self.close_message(&mut out, None);
                if reason == StopReason::ClientToolCalls {
                    for call in std::mem::take(&mut self.pending) {
                        let item = Item::FunctionCall(FunctionCallItem {
                            id: Some(self.item_id("fc")),
                            call_id: call.id,
                            name: call.name,
                            arguments: call.arguments,
                            status: Some(ItemStatus::Completed),
                        });
                        self.whole_item(item, &mut out);
                    }
                }
                self.stats = stats;
                self.reason = Some(reason);
                self.completed_at = Some(unix_now());
                let event = match reason {
                    StopReason::Truncated => {
                        self.incomplete = Some("max_output_tokens");
                        self.status = ResponseStatus::Incomplete;
                        StreamEvent::Incomplete {
                            response: self.boxed(),
                        }
                    }
                    _ => {
                        self.status = ResponseStatus::Completed;
                        StreamEvent::Completed {
                            response: self.boxed(),
                        }
                    }
                };
                out.push(self.event(event));
            }
            ChatEvent::Error {
                reason,
                message,
                stats,
            } => {
                self.close_message(&mut out, None);
                self.stats = stats;
                self.reason = Some(reason);
                self.status = ResponseStatus::Failed;
                self.completed_at = Some(unix_now());
                let text = format!("turn ended ({reason}): {message}");
                self.error = Some(ResponseError {
                    code: reason.as_str(),
                    message: text.clone(),
                });
                // The error itself first, then the failed response that carries it.
                out.push(self.event(StreamEvent::Error {
                    error: StreamError {
                        kind: "turn_failed",
                        code: reason.as_str(),
                        message: text,
                        param: None,
                    },
                }));
                let failed = StreamEvent::Failed {
                    response: self.boxed(),
                };
                out.push(self.event(failed));
            }
            _ => {}
        }
        out
    }
}

/// The response's own events (the API's, in its order, numbered as its
/// `sequence_number` + 1) in a log of their own, made from the turn's as it runs, so that
/// `GET /v1/responses/{id}?stream=true&starting_after=N` can pick the stream up again.
fn response_log(state: &AppState, turn: StartedTurn, mut builder: Builder) -> Arc<EventLog<Frame>> {
    let log = EventLog::new(builder.id.clone(), builder.owner.clone());
    let kept = state.keep_log(&log);
    let frames = Arc::clone(&log);
    let mut events = turn.events;
    state.inner.turns.spawn(async move {
        let push = |(name, data): (String, Value)| {
            frames.push(Frame::new(name, &data));
        };
        builder.opening().into_iter().for_each(push);
        while let Some(event) = events.recv().await {
            builder.on_event(event).into_iter().for_each(push);
        }
        frames.close();
        kept.ended().await;
    });
    log
}

/// The streamed form of a response's frames, ending with `[DONE]` as the Open Responses
/// specification asks.
pub(crate) fn stream(frames: impl futures::Stream<Item = Bytes> + Send + 'static) -> Response {
    let done = futures::stream::once(async { sse::text_frame(None, "[DONE]") });
    sse::respond(futures::StreamExt::chain(frames, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_items_become_messages_and_ids_find_their_conversation() {
        let messages = input_messages("alice", json!([
            {"role": "user", "content": [{"type": "input_text", "text": "Who is Ada?"}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{\"x\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a mathematician"},
            {"type": "function_call_output", "call_id": "c2", "output": "a countess"},
            {"type": "reasoning", "summary": []},
        ]))
        .unwrap();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(
            matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 2)
        );
        assert!(input_messages("alice", json!([{"type": "item_reference", "id": "x"}])).is_err());
        remember_item(
            "alice",
            &Item::Message(MessageItem::assistant(
                "msg_known".into(),
                ItemStatus::Completed,
                vec![OutputText::new("Looking.")],
            )),
        );
        let with_reference = json!([
            {"role": "user", "content": "hi"},
            {"type": "item_reference", "id": "msg_known"},
            {"type": "function_call", "call_id": "c9", "name": "lookup", "arguments": "{}"},
        ]);
        // Another owner does not find it.
        assert!(input_messages("bob", with_reference.clone()).is_err());
        let resolved = input_messages("alice", with_reference).unwrap();
        assert!(
            matches!(&resolved[1], Message::Assistant { content: Some(text), tool_calls } if text == "Looking." && tool_calls.len() == 1),
            "{resolved:?}"
        );
        assert_eq!(
            input_messages("alice", json!("hi")).unwrap(),
            vec![Message::user("hi")]
        );
        let id = response_id(
            Some(&format!("conv_{}", "a".repeat(32))),
            &format!("turn_{}", "b".repeat(32)),
        );
        assert_eq!(
            conversation_of(&id),
            Some(format!("conv_{}", "a".repeat(32)))
        );
        assert_eq!(conversation_of(&response_id(None, "turn_1234")), None);
    }
}
