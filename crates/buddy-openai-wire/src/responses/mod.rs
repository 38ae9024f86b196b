//! The Responses API typed: the items of `input` and `output`, function tools, the
//! response object and its stream events, and the translation of input items into
//! buddy's messages. The same `Item` is read from `input` and written to `output`, so an
//! item a client sends back (as itself or, for the server, by reference) reads as it was
//! written.

mod events;
mod input;
mod items;
mod object;

pub use events::{StreamError, StreamEvent};
pub use input::{FunctionTool, input_items, items_to_messages};
pub use items::{
    CompactionItem, CustomToolCallItem, FunctionCallItem, FunctionCallOutputItem, Item,
    ItemReference, ItemStatus, MessageItem, OtherFields, OutputText, Phase, SkillCallItem,
};
pub use object::{
    CachedTokens, ConversationRef, IncompleteDetails, ReasoningSettings, ReasoningTokens,
    ResponseError, ResponseObject, ResponseStatus, ResponseUsage, TextSettings,
};

#[cfg(test)]
mod tests;
