//! The router and the server: every API family's routes behind auth, body limits and
//! tracing; [`serve`] runs them with the connection table and graceful shutdown.

pub(crate) mod serve;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Extension, Json, Router, middleware};
use serde_json::json;
use tower_http::trace::TraceLayer;

use crate::error::AppError;
use crate::state::AppState;
use crate::{auth, body, chat_completions, messages, metrics, native, responses, web};

/// Every route of the server, over `state`. Tests drive it with `oneshot`, no socket needed.
pub fn app(state: AppState) -> Router {
    // Recording starts with the router, so `/metrics` counts every turn it served.
    metrics::handle();
    let limit = state.inner.settings.max_body_bytes;
    let protected = Router::new()
        .merge(native::routes())
        .merge(chat_completions::routes())
        .merge(responses::routes())
        .merge(messages::routes())
        .route("/metrics", get(render_metrics))
        .route("/v1/health", get(crate::health::health))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    let cors = crate::cors::layer(&state.inner.settings.cors_origins);
    let router = Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .merge(web::routes())
        .merge(protected)
        .fallback(|| async {
            AppError::NotFound(
                "no such endpoint; see docs/reference/endpoints.md for the API".into(),
            )
        })
        // Anthropic's clients read errors in Anthropic's shape.
        .layer(middleware::from_fn(messages::anthropic_errors))
        .layer(DefaultBodyLimit::max(limit))
        // The whole body within body_timeout, whatever pace it comes at.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body::whole_body,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state);
    // Outermost: a browser's preflight is answered before auth asks for a key.
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

/// The metrics, where a key that is not an admin sees only its own per-key series.
async fn render_metrics(
    State(_): State<AppState>,
    Extension(caller): Extension<crate::caller::Caller>,
) -> impl IntoResponse {
    let all = metrics::handle().map(|h| h.render()).unwrap_or_default();
    let body = match caller.admin {
        true => all,
        false => metrics::only_key(&all, &caller.name),
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
