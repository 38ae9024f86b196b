//! Where a turn's model is decided: once, by the turn service, from what the request
//! names and what its conversation has kept (its last model, its settings), read here
//! and nowhere else before the turn opens.

use buddy_store::ConversationInfo;

use super::agents::with_request_agents;
use super::policy::turn_policy;
use super::spec::{Conversation, Settings, TurnSpec};
use crate::backend::Resolved;
use crate::client_tools::with_client_tools;
use crate::conversation_settings::ConversationSettings;
use crate::error::AppError;
use crate::request::Client;
use crate::request_mcp::with_request_mcp;

/// Resolves `spec`'s model, tools and provider, and layers the conversation's kept
/// settings into its policy and instructions (buddy's API). Another key's conversation
/// or a gone one is "does not exist", before anything else is checked.
pub(super) async fn resolve(client: &Client, spec: &mut TurnSpec) -> Result<Resolved, AppError> {
    let kept = kept(client, &spec.conversation).await?;
    let (provider, mut model) = (spec.model.provider.take(), spec.model.model.take());
    if provider.is_none() && model.is_none() {
        model = kept.as_ref().and_then(|info| info.last_model.clone());
    }
    if let Settings::Kept(new) = &spec.settings {
        let stored = match (new, &kept) {
            (None, Some(info)) => ConversationSettings::stored(&info.settings)?,
            _ => ConversationSettings::default(),
        };
        let settings = new.as_deref().unwrap_or(&stored);
        spec.policy = settings.policy_with(&spec.policy);
        spec.instructions = settings.system.clone();
    }
    let mut resolved = client.resolve(provider.as_deref(), model.as_deref())?;
    if let Settings::Kept(Some(new)) = &spec.settings {
        turn_policy(&client.state, &resolved, &new.policy)?;
    }
    let tools = std::mem::take(&mut spec.tools);
    resolved.toolbox = with_request_mcp(&client.state, resolved.toolbox, tools.mcp).await?;
    resolved.toolbox = with_request_agents(client, &resolved, tools.agents)?;
    resolved.toolbox =
        with_client_tools(resolved.toolbox, tools.client).map_err(AppError::BadRequest)?;
    if let Some(wrap) = spec.wrap_provider.take() {
        resolved.provider = wrap(resolved.provider);
    }
    Ok(resolved)
}

/// What the conversation the turn goes on has kept (`None` for a new or a held one),
/// if the caller may use it.
async fn kept(
    client: &Client,
    conversation: &Conversation,
) -> Result<Option<ConversationInfo>, AppError> {
    match conversation {
        Conversation::Stored(Some(id)) => client.conversation(id).await.map(Some),
        Conversation::After {
            conversation,
            named,
            ..
        } => client
            .conversation(conversation)
            .await
            .map(Some)
            .map_err(|_| AppError::NotFound(format!("response `{named}` does not exist"))),
        Conversation::Stored(None) | Conversation::Ephemeral(_) | Conversation::Session { .. } => {
            Ok(None)
        }
    }
}
