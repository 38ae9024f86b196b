//! Bearer-token auth: which caller a request comes from (its key, or the one shared
//! identity of a server without keys), put on the request for every endpoint.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::caller::{Caller, TraceHeaders};
use crate::error::AppError;
use crate::settings::key_for;
use crate::state::AppState;

/// Checks `Authorization: Bearer <key>` when keys are configured.
pub(crate) async fn require_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, AppError> {
    let keys = &state.inner.settings.api_keys;
    let caller = if keys.is_empty() {
        // No auth (loopback only): one shared identity.
        Caller {
            name: "anonymous".into(),
            owner: "anonymous".into(),
            admin: false,
            spend: state.inner.settings.key_spend(),
            trace: TraceHeaders::of(request.headers()),
        }
    } else {
        match key_for(request.headers(), keys) {
            Some(key) => Caller {
                name: key.name.clone(),
                owner: key.owner(),
                admin: key.admin,
                spend: key.spend.unwrap_or(state.inner.settings.key_spend()),
                trace: TraceHeaders::of(request.headers()),
            },
            None => return Err(AppError::Unauthorized),
        }
    };
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}
