//! The router.

use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Extension, Json, Router, middleware};
use serde_json::json;
use tower_http::trace::TraceLayer;

use crate::error::AppError;
use crate::state::AppState;
use crate::{
    auth, body, chat, compact, conversations, conversations_openai, fork, metrics, openai,
    reattach, replay, responses, responses_stored, responses_ws, web,
};

/// Every route of the server, over `state`. Tests drive it with `oneshot`, no socket needed.
pub fn app(state: AppState) -> Router {
    // Recording starts with the router, so `/metrics` counts every turn it served.
    metrics::handle();
    let limit = state.inner.settings.max_body_bytes;
    let protected = Router::new()
        .route("/v1/chat", post(chat::chat))
        .route("/v1/chat/completions", post(openai::completions))
        .route(
            "/v1/responses",
            post(responses::responses).get(responses_ws::upgrade),
        )
        .route("/v1/responses/compact", post(compact::compact))
        .route(
            "/v1/responses/{id}",
            get(responses_stored::retrieve).delete(responses_stored::delete),
        )
        .route(
            "/v1/responses/{id}/input_items",
            get(responses_stored::input_items),
        )
        .route("/v1/responses/{id}/cancel", post(responses_stored::cancel))
        .route("/v1/models", get(openai::models))
        .route(
            "/v1/conversations",
            get(conversations::list).post(conversations_openai::create),
        )
        .route(
            "/v1/conversations/{id}/items",
            get(conversations_openai::items).post(conversations_openai::add_items),
        )
        .route(
            "/v1/conversations/{id}",
            get(conversations::get)
                .patch(conversations::update)
                .delete(conversations::delete),
        )
        .route("/v1/conversations/{id}/resume", post(chat::resume))
        .route(
            "/v1/conversations/{id}/replay",
            post(replay::replay_conversation),
        )
        .route("/v1/conversations/{id}/fork", post(fork::fork))
        .route("/v1/turns/{id}/cancel", post(conversations::cancel_turn))
        .route("/v1/turns/{id}/events", get(reattach::events))
        .route("/metrics", get(render_metrics))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ));
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .merge(web::routes())
        .merge(protected)
        .fallback(|| async {
            AppError::NotFound("no such endpoint; see the README for the API".into())
        })
        .layer(DefaultBodyLimit::max(limit))
        // The whole body within body_timeout, whatever pace it comes at.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body::whole_body,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The metrics, where a key that is not an admin sees only its own per-key series.
async fn render_metrics(
    State(_): State<AppState>,
    Extension(caller): Extension<auth::Caller>,
) -> impl IntoResponse {
    let all = metrics::handle().map(|h| h.render()).unwrap_or_default();
    let body = match caller.admin {
        true => all,
        false => metrics::only_key(&all, &caller.name),
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
