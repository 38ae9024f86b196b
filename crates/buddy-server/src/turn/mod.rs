//! The turn service: every API family starts, streams and watches turns through it.
//! An endpoint types its request into a [`TurnSpec`]; [`Turns::start`] checks it, layers
//! its policy, opens the turn (claim, history, the opening write) and runs it on its
//! own task (events into the turn's log; at the end close, spend, metrics, release).

mod agents;
mod encoder;
pub(crate) mod kept;
mod open;
mod place;
mod policy;
mod resolve;
mod run;
mod session;
mod sink;
mod spec;
mod task_log;
pub(crate) mod watch;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

pub(crate) use encoder::{
    CancelOnDrop, Encoder, PendingCalls, frames, unix_now, until_end, with_turn_header,
};
pub(crate) use policy::turn_policy;
pub(crate) use session::client_conversation;
pub(crate) use spec::{
    Conversation, Family, ModelAsk, ProviderWrap, Settings, StartedTurn, ToolAsk, TurnSpec,
};

use crate::backend::Resolved;
use crate::error::AppError;
use crate::gate;
use crate::request::Client;
use crate::spend;
use crate::state::AppState;
use crate::storage_quota;

/// The turn service as a handler holds it: the client asking (taken from the request
/// once, an extractor), with what every endpoint asks of turns.
pub(crate) struct Turns(pub Client);

impl FromRequestParts<AppState> for Turns {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        Client::from_request_parts(parts, state).await.map(Turns)
    }
}

impl std::ops::Deref for Turns {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}

impl Turns {
    /// Starts the turn `spec` asks for on its own task: its model resolved here, once,
    /// with its conversation's kept facts, and admitted through the spend gate.
    pub(crate) async fn start(&self, mut spec: TurnSpec) -> Result<StartedTurn, AppError> {
        let (state, caller) = (&self.state, &self.caller);
        let resolved = resolve::resolve(self, &mut spec).await?;
        let mut policy = turn_policy(state, &resolved, &spec.policy)?;
        refuse_what_cannot_be_honoured(&spec, &resolved)?;
        if !matches!(spec.conversation, Conversation::Ephemeral(_)) {
            let adding = spec.user_message.as_ref().map_or(0, String::len);
            storage_quota::check(state, caller, adding as u64 + 1).await?;
        }
        // The one gate every model call on a key's behalf passes (crate::gate).
        let worst = gate::Worst::Turn {
            budget: policy.max_turn_cost_usd,
            deadline: policy.deadline_ms.map(std::time::Duration::from_millis),
        };
        let admitted = gate::admit(
            state,
            caller,
            resolved.provider.name(),
            &resolved.model,
            worst,
        )
        .await?;
        let room = admitted.held.as_ref().map(|h| h.amount);
        let layer = policy::spend_layer(&policy, room, admitted.price.is_some())?;
        // When the key's room, not the operator's budget, bounds the turn, a turn ended
        // for its cost says the key reached its ceiling.
        let at_ceiling = admitted
            .held
            .as_ref()
            .filter(|h| {
                admitted.price.is_some() && policy.max_turn_cost_usd.is_none_or(|b| h.amount < b)
            })
            .map(|h| spend::room_spent_words(&caller.name, h.amount));
        policy
            .apply(&layer)
            .map_err(|e| AppError::Internal(e.to_string()))?;
        let opened = match open::open(state, caller, spec, resolved).await {
            Ok(opened) => opened,
            Err(e) => {
                // Nothing ran: the hold is given back at once.
                admitted.settle_turn(state, None).await;
                return Err(e);
            }
        };
        Ok(run::run(
            state, caller, opened, policy, admitted, at_ceiling,
        ))
    }

    /// What a streaming endpoint holds of its turn: the turn runs on when the client
    /// goes, unless the server is set to cancel on disconnect (`[server]
    /// cancel_on_disconnect`).
    pub(crate) fn disconnect_guard(
        &self,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Option<CancelOnDrop> {
        self.state
            .inner
            .settings
            .cancel_on_disconnect
            .then(|| CancelOnDrop(cancel))
    }
}

/// Refused before anything is claimed or stored: a setting the model cannot honour is a
/// 400 naming it, never dropped.
fn refuse_what_cannot_be_honoured(spec: &TurnSpec, resolved: &Resolved) -> Result<(), AppError> {
    let provider = &resolved.provider;
    let wrong = spec
        .sampling
        .validate()
        .err()
        .or_else(|| provider.unsupported(&spec.sampling))
        .or_else(|| provider.refuses_any(&spec.append))
        .or_else(|| match &spec.conversation {
            Conversation::Ephemeral(history) | Conversation::Session { history, .. } => {
                provider.refuses_any(history)
            }
            Conversation::Stored(_) | Conversation::After { .. } => None,
        });
    match wrong {
        Some(wrong) => Err(AppError::BadRequest(wrong)),
        None => Ok(()),
    }
}
