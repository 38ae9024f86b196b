//! Bearer-token auth: the key (or "anonymous") rides in the request's extensions.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::AppError;
use crate::state::AppState;

/// Who is calling, for quotas and logs.
#[derive(Clone, Debug)]
pub(crate) struct Caller(pub String);

/// Checks `Authorization: Bearer <key>` when keys are configured.
pub(crate) async fn require_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, AppError> {
    let keys = &state.inner.settings.api_keys;
    let caller = if keys.is_empty() {
        "anonymous".to_owned()
    } else {
        let given = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            Some(key)
                if keys
                    .iter()
                    .any(|k| constant_time_eq(k.as_bytes(), key.as_bytes())) =>
            {
                // Name the caller by a short, non-secret prefix of its key.
                format!("key:{}", key.chars().take(6).collect::<String>())
            }
            _ => return Err(AppError::Unauthorized),
        }
    };
    request.extensions_mut().insert(Caller(caller));
    Ok(next.run(request).await)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
