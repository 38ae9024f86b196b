//! The per-key storage quota (`[server] max_stored_bytes_per_key`): bytes of messages a
//! key's conversations hold, counted in the store; a write that would pass it is refused
//! with 429 `insufficient_quota` before anything is written.

use crate::caller::Caller;
use crate::error::AppError;
use crate::state::AppState;

/// Refuses a write of about `adding` bytes that would take `caller`'s key past its
/// storage quota (none when the quota is 0).
pub(crate) async fn check(state: &AppState, caller: &Caller, adding: u64) -> Result<(), AppError> {
    let quota = state.inner.settings.max_stored_bytes_per_key as u64;
    if quota == 0 {
        return Ok(());
    }
    let stored = state.inner.store.stored_bytes(&caller.owner).await?;
    if stored.saturating_add(adding) <= quota {
        return Ok(());
    }
    Err(AppError::Quota(format!(
        "key `{}` stores {stored} bytes of conversations and may store {quota} \
         (max_stored_bytes_per_key); this would add about {adding}. Delete conversations it \
         no longer needs (DELETE /v1/conversations/{{id}}), or ask the operator for more",
        caller.name
    )))
}
