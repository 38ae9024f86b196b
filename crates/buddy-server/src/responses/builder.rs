//! A turn as a Responses API response: the response object as it stands, and the
//! stream's events (the [`Encoder`] of this family), built from the turn's events.

use std::sync::Arc;

use buddy_core::{Arguments, ChatEvent, ResponseFormat, Sampling, StopReason, ToolCall, TurnStats};
use buddy_openai_wire::BuddyDetails;
use buddy_openai_wire::responses::{
    ConversationRef, FunctionTool, IncompleteDetails, Item, ItemStatus, MessageItem, OutputText,
    Phase, ReasoningSettings, ResponseError, ResponseObject, ResponseStatus, ResponseUsage,
    SkillCallItem, StreamError, StreamEvent, TextSettings,
};
use serde_json::{Value, json};

use super::ids::conversation_of;
use crate::item_cache::ItemCache;
use crate::settings::SkillCalls;
use crate::turn::{Encoder, PendingCalls, unix_now};
use buddy_openai_wire::client_tools::ClientTools;

/// What the response object repeats of its request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Echo {
    /// The settings the response was made with.
    pub sampling: Sampling,
    /// The client's function tools (as offered to the model).
    pub tools: Vec<FunctionTool>,
    /// The client's tools by the name the model calls them, and the hosted ones left out.
    pub client: ClientTools,
    pub tool_choice: Option<Value>,
    pub max_tool_calls: Option<u64>,
    pub prompt_cache_key: Option<String>,
    pub safety_identifier: Option<String>,
    pub metadata: Option<Value>,
}

/// Builds a response, and the stream's events, from a turn's events.
pub(crate) struct Builder {
    pub id: String,
    model: String,
    pub created_at: u64,
    instructions: Option<String>,
    previous_response_id: Option<String>,
    /// The Conversations API conversation the response was added to.
    pub conversation: Option<String>,
    /// Whether the response was kept (it can be continued).
    stored: bool,
    /// Whose response it is: its items are found again only for this owner.
    owner: String,
    sequence: u64,
    output: Vec<Item>,
    /// The message item being streamed: its id and text so far.
    open: Option<(String, String)>,
    /// Calls announced and not yet answered.
    pending: PendingCalls,
    status: ResponseStatus,
    incomplete: Option<&'static str>,
    error: Option<ResponseError>,
    stats: TurnStats,
    reason: Option<StopReason>,
    /// When the response ended (Unix seconds).
    pub completed_at: Option<u64>,
    pub echo: Echo,
    pub skill_calls: SkillCalls,
    /// Where its output items are kept for `item_reference`s.
    items: Arc<ItemCache>,
    /// Whether the response runs in the background (`background: true`).
    pub background: bool,
}

impl Builder {
    pub(crate) fn new(
        items: Arc<ItemCache>,
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
            conversation: None,
            stored: conversation_of(&id).is_some(),
            owner,
            sequence: 0,
            id,
            output: Vec::new(),
            open: None,
            pending: PendingCalls::default(),
            status: ResponseStatus::InProgress,
            incomplete: None,
            error: None,
            stats: TurnStats::default(),
            reason: None,
            completed_at: None,
            echo: Echo::default(),
            skill_calls: SkillCalls::default(),
            background: false,
            items,
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
            conversation: self.conversation.clone().map(|id| ConversationRef { id }),
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
        self.close_message_as(out, phase, ItemStatus::Completed);
    }

    /// Ends the message being streamed with `status`: `incomplete` for the partial
    /// message of a cancelled response, which keeps the text streamed so far.
    fn close_message_as(
        &mut self,
        out: &mut Vec<(String, Value)>,
        phase: Option<Phase>,
        status: ItemStatus,
    ) {
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
            ..MessageItem::assistant(id.clone(), status, vec![part.clone()])
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
        self.items.remember(&self.owner, &item);
        self.output.push(item);
    }

    /// Marks the response cancelled, as `POST …/cancel` answers it (its turn stops soon
    /// after, recording the same).
    pub(crate) fn cancelled(&mut self) {
        self.close_message_as(&mut Vec::new(), None, ItemStatus::Incomplete);
        self.status = ResponseStatus::Cancelled;
        self.reason = Some(StopReason::Cancelled);
        self.completed_at = Some(unix_now());
    }

    /// Whose response it is.
    /// Its instructions as JSON text (a string literal), as every response object
    /// written of it holds them.
    pub(crate) fn instructions_json(&self) -> Option<Arc<str>> {
        let instructions = self.instructions.as_ref()?;
        serde_json::to_string(instructions).ok().map(Arc::from)
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner
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
        self.items.remember(&self.owner, &item);
        self.output.push(item);
    }

    /// What one turn event adds to the response, as stream events.
    pub(crate) fn on_event(&mut self, event: ChatEvent) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        match event {
            ChatEvent::TextDelta { text } => self.text_delta(text, &mut out),
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
                self.pending.started(ToolCall::new(id, name, arguments));
            }
            ChatEvent::ToolCallResult {
                id,
                content,
                is_error,
                ..
            } => self.skill_call_done(&id, content, is_error, &mut out),
            ChatEvent::Done { reason, stats, .. } => self.done(reason, stats, &mut out),
            ChatEvent::Error {
                reason,
                message,
                stats,
            } => self.failed(reason, message, stats, &mut out),
            _ => {}
        }
        out
    }

    /// Text of the model: into the message being streamed, opened first if none is.
    fn text_delta(&mut self, text: String, out: &mut Vec<(String, Value)>) {
        let index = self.output.len();
        let id = match &self.open {
            Some((id, _)) => id.clone(),
            None => {
                let id = self.item_id("msg");
                let item = MessageItem::assistant(id.clone(), ItemStatus::InProgress, Vec::new());
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

    /// A server-side skill call answered: one whole item with its arguments and output.
    fn skill_call_done(
        &mut self,
        id: &str,
        content: String,
        is_error: bool,
        out: &mut Vec<(String, Value)>,
    ) {
        let Some(call) = self.pending.answered(id) else {
            return;
        };
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
        self.whole_item(item, out);
    }

    /// The turn's end: the client's calls handed back as items, then `completed` (or
    /// `incomplete` when the answer was cut at its output limit).
    fn done(&mut self, reason: StopReason, stats: TurnStats, out: &mut Vec<(String, Value)>) {
        // A cancel cut the message short: it keeps what was streamed, `incomplete`.
        let status = match reason {
            StopReason::Cancelled => ItemStatus::Incomplete,
            _ => ItemStatus::Completed,
        };
        self.close_message_as(out, None, status);
        if reason == StopReason::ClientToolCalls {
            for call in self.pending.take() {
                let item = self.echo.client.output_item(self.item_id("fc"), call);
                self.whole_item(item, out);
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
            // A cancelled response ends with the event of its own, as OpenAI names it.
            StopReason::Cancelled => {
                self.status = ResponseStatus::Cancelled;
                StreamEvent::Cancelled {
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

    /// The turn failed: the error itself first, then the failed response that carries it.
    fn failed(
        &mut self,
        reason: StopReason,
        message: String,
        stats: TurnStats,
        out: &mut Vec<(String, Value)>,
    ) {
        self.close_message(out, None);
        self.stats = stats;
        self.reason = Some(reason);
        self.status = ResponseStatus::Failed;
        self.completed_at = Some(unix_now());
        let text = format!("turn ended ({reason}): {message}");
        // OpenAI's codes are a closed list; buddy's reason is in the message and in
        // `buddy.stop_reason`.
        self.error = Some(ResponseError {
            code: "server_error",
            message: text.clone(),
        });
        out.push(self.event(StreamEvent::Error {
            code: reason.as_str(),
            message: text.clone(),
            param: None,
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
}

/// The Responses encoder: the response's events, named and numbered, to be kept in a
/// log of their own.
impl Encoder for Builder {
    type Frame = (String, Value);

    fn opening(&mut self) -> Vec<(String, Value)> {
        Builder::opening(self)
    }

    fn encode(&mut self, _seq: u64, event: &ChatEvent) -> Vec<(String, Value)> {
        self.on_event(event.clone())
    }
}
