//! Anthropic's Messages API on the wire, typed once: the request a client sends
//! (`POST /v1/messages`, `/v1/messages/count_tokens`), the message it gets back, the
//! server-sent events of a streamed reply, errors and the model list — and the
//! translation of a request into buddy's messages ([`to_messages`]).
//!
//! Lenient where clients deviate: fields buddy does not know are kept (`extra`), so a
//! request can be inspected or passed on without losing them, and content blocks of a
//! type buddy does not know are kept whole ([`ContentBlock::Other`]).

mod convert;
mod request;
mod response;
mod stream;

pub use convert::{ToHistory, client_tools, to_messages};
pub use request::{
    BlockSource, CacheControl, ContentBlock, CountTokensRequest, InputMessage, KnownBlock,
    MessageContent, MessagesRequest, SystemBlock, SystemPrompt, ThinkingConfig, ToolChoice,
    ToolDef, ToolResultContent,
};
pub use response::{
    ErrorBody, ErrorDetail, MessageResponse, ModelInfo, ModelList, OutputBlock, TokenCount, Usage,
    direct_caller, error_type_for_status,
};
pub use stream::{BlockDelta, DeltaUsage, MessageDelta, StreamEvent};
