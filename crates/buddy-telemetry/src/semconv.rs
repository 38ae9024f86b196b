//! The attribute names buddy's spans carry: the OpenTelemetry GenAI semantic conventions
//! at the version pinned below (status "Development"; what
//! `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` selects), plus buddy's own
//! under `buddy.`.

/// The semantic-conventions release the spans follow.
pub const VERSION: &str = "1.41.0";
/// The schema URL of that release, set on buddy's instrumentation scope.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const AGENT_NAME: &str = "gen_ai.agent.name";
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
pub const REQUEST_TOP_P: &str = "gen_ai.request.top_p";
pub const REQUEST_SEED: &str = "gen_ai.request.seed";
pub const RESPONSE_ID: &str = "gen_ai.response.id";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The part of the input tokens read from the provider's prompt cache.
pub const USAGE_CACHE_READ_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// The part of the input tokens written to the provider's prompt cache.
pub const USAGE_CACHE_CREATION_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
pub const ERROR_TYPE: &str = "error.type";
/// The model server's host and port, from the provider's base URL.
pub const SERVER_ADDRESS: &str = "server.address";
pub const SERVER_PORT: &str = "server.port";

/// Why the turn ended (`completed`, `loop_detected`, `cost_budget`, …).
pub const STOP_REASON: &str = "buddy.stop_reason";
/// What a model call, or the whole turn, cost in US dollars.
pub const COST_USD: &str = "buddy.cost_usd";
/// Model calls and tool calls the turn made.
pub const MODEL_CALLS: &str = "buddy.model_calls";
pub const TOOL_CALLS: &str = "buddy.tool_calls";
/// The part of those a turn's sub-agents made, at every depth: agents started, their
/// model calls and tool calls.
pub const DELEGATED_AGENTS: &str = "buddy.delegated.agents";
pub const DELEGATED_MODEL_CALLS: &str = "buddy.delegated.model_calls";
pub const DELEGATED_TOOL_CALLS: &str = "buddy.delegated.tool_calls";
/// Why a model call was made (`turn`, `finalize`, `reask`).
pub const CALL_PURPOSE: &str = "buddy.call.purpose";
/// Tools offered to a model call.
pub const TOOLS_OFFERED: &str = "buddy.tools_offered";
/// The span event of a guard trip, and its attributes.
pub const GUARD_EVENT: &str = "buddy.guard_tripped";
pub const GUARD: &str = "buddy.guard";
pub const GUARD_ACTION: &str = "buddy.guard.action";
pub const GUARD_SKILL: &str = "buddy.guard.skill";
pub const GUARD_DETAIL: &str = "buddy.guard.detail";
/// The span event of calls waiting for a person's approval.
pub const APPROVAL_EVENT: &str = "buddy.approval_required";
