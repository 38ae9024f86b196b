//! The one spend gate: every model call the server makes on a key's behalf — a turn (and
//! with it its sub-agents, its tools' sampling, a continuation, the Messages facade and
//! its pass-through) and a compaction — is admitted here first. The gate prices the call
//! by the operator's table (`prices`, then the list prices), refuses an unpriced model
//! under a ceiling, holds a one-off call's worst case of the key's room (refusing one
//! whose input alone does not fit) or gives a turn its part of the key's live ledger,
//! where each of its calls reserves its worst case as it goes ([`crate::key_ledger`]),
//! and hands out the key's pool of model-call slots (`max_model_calls_in_flight_per_key`). What it admits is an [`Admission`]: the only
//! way to run a turn ([`crate::turn`]'s runner takes one) or make a one-off call
//! ([`call_once`]); settling it books the cost in the ledger and the metrics. The test
//! `spend_gate_routes.rs` fails when a route or a provider call goes around it.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{Completion, CompletionRequest, Message, Price, Provider, ProviderError, Usd};
use buddy_engine::CallSlots;

use crate::caller::Caller;
use crate::error::AppError;
use crate::key_ledger::{KeyLedger, LedgerOf};
use crate::spend::{self, Held};
use crate::state::AppState;

/// The most a call may cost, before it is made.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Worst {
    /// A turn: its money budget (`None`: all the room left) and deadline.
    Turn {
        budget: Option<Usd>,
        deadline: Option<Duration>,
    },
    /// One model call: the tokens it sends and the most it may write.
    Call {
        input_tokens: u64,
        max_output_tokens: u64,
    },
}

/// Fewest output tokens a one-off call is worth making with: a hold that leaves less
/// room than this after the input is refused rather than cut to nothing.
const MIN_OUTPUT_TOKENS: u64 = 256;

/// What the gate admitted: the call's price, its hold of the key's room, the key's
/// model-call slots and, for a one-off call, the most it may write.
#[derive(Debug)]
pub(crate) struct Admission {
    /// What the model charges (`None`: no price known, only without a ceiling).
    pub price: Option<Price>,
    /// What a one-off call holds of the key's room (`None`: the key has no ceiling, or
    /// this admits a turn).
    pub held: Option<Held>,
    /// A turn's part of its key's ledger, where each of its calls reserves its worst
    /// case (`None`: the key has no ceiling, or this admits a one-off call).
    pub ledger: Option<Arc<KeyLedger>>,
    /// The key's pool of model calls in flight.
    pub slots: CallSlots,
    /// A one-off call's output bound (cut to what the hold leaves after its input).
    pub max_output_tokens: Option<u64>,
    owner: String,
    key: String,
    provider: String,
    model: String,
}

/// Admits a call to `model` on `provider` for `caller`'s key whose worst case is `worst`;
/// refused (nothing held) with 400 for an unpriced model under a ceiling, 429 when the
/// key is at its ceiling or its room cannot take the call's input.
pub(crate) async fn admit(
    state: &AppState,
    caller: &Caller,
    provider: &str,
    model: &str,
    worst: Worst,
) -> Result<Admission, AppError> {
    let price = state.inner.settings.prices.price(provider, model);
    let store = &*state.inner.store;
    let now = time::OffsetDateTime::now_utc();
    let (wanted, deadline) = match worst {
        Worst::Turn { budget, deadline } => (budget, deadline),
        Worst::Call {
            input_tokens,
            max_output_tokens,
        } => (
            price.map(|p| p.estimate(input_tokens, max_output_tokens)),
            None,
        ),
    };
    let holder = spend::Holder {
        owner: &caller.owner,
        name: &caller.name,
        ceiling: caller.spend,
        budget: wanted,
        deadline,
    };
    let unpriced = price.is_none().then_some(model);
    let (held, ledger) = match worst {
        Worst::Turn { deadline, .. } => {
            spend::admit_turn(store, &holder, unpriced, now).await?;
            let ledger = (!caller.spend.is_none()).then(|| {
                Arc::new(KeyLedger::new(LedgerOf {
                    store: Arc::clone(&state.inner.store),
                    owner: &caller.owner,
                    name: &caller.name,
                    ceilings: spend::ceilings(caller.spend, now),
                    price,
                    deadline,
                }))
            });
            (None, ledger)
        }
        Worst::Call { .. } => (spend::hold(store, &holder, unpriced, now).await?, None),
    };
    let slots = state.call_slots(&caller.owner);
    let slots = match &ledger {
        Some(ledger) => slots.with_ledger(Arc::clone(ledger) as Arc<dyn buddy_engine::CallLedger>),
        None => slots,
    };
    let mut admission = Admission {
        price,
        held,
        ledger,
        slots,
        max_output_tokens: None,
        owner: caller.owner.clone(),
        key: caller.name.clone(),
        provider: provider.to_owned(),
        model: model.to_owned(),
    };
    if let Worst::Call {
        input_tokens,
        max_output_tokens,
    } = worst
    {
        match fit_output(&admission, input_tokens, max_output_tokens) {
            Ok(bound) => admission.max_output_tokens = Some(bound),
            Err(why) => {
                admission.settle(state, None).await;
                return Err(AppError::TooManyTurns(why));
            }
        }
    }
    Ok(admission)
}

/// The output bound of a one-off call: `max_output_tokens`, cut to what the hold leaves
/// after the input; `Err` says why the call does not fit the key's room at all.
fn fit_output(admission: &Admission, input_tokens: u64, max_output: u64) -> Result<u64, String> {
    let (Some(held), Some(price)) = (&admission.held, admission.price) else {
        return Ok(max_output);
    };
    let input = price.estimate(input_tokens, 0);
    let key = &admission.key;
    if input.nanos() >= held.amount.nanos() {
        return Err(format!(
            "key `{key}` has {} of room left under its spend ceiling (what it spent and what its \
             calls in flight hold), and this call's input alone ({input_tokens} tokens) costs {input}: \
             send less, or wait for the ceiling to reset",
            held.amount
        ));
    }
    let left = held.amount.nanos() - input.nanos();
    let per_token = price.estimate(0, 1_000_000).nanos().max(1);
    let fits =
        u64::try_from(u128::from(left) * 1_000_000 / u128::from(per_token)).unwrap_or(u64::MAX);
    let bound = max_output.min(fits);
    if bound < MIN_OUTPUT_TOKENS.min(max_output) {
        return Err(format!(
            "key `{key}` has {} of room left under its spend ceiling: after this call's input \
             ({input}) it could write only {bound} tokens. Send less, or wait for the ceiling to reset",
            held.amount
        ));
    }
    Ok(bound)
}

/// A one-off model call a route makes for its caller (a compaction's summary).
pub(crate) struct OneCall {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub messages: Vec<Message>,
    /// The most it may write (cut further to what the key's room leaves).
    pub max_output_tokens: u64,
}

/// Makes `call` for `caller` through the gate, as a turn is: a place under the key's turn
/// cap for the call's length, its worst case (its input, counted as the engine counts,
/// and `max_output_tokens`) held of the key's room, one of the key's model-call slots,
/// and its cost in the ledger and the metrics. The call runs on the server's own task
/// and is settled even when the client goes; a shutdown cancels it.
pub(crate) async fn call_once(
    state: &AppState,
    caller: &Caller,
    call: OneCall,
) -> Result<Result<Completion, ProviderError>, AppError> {
    let counter = buddy_engine::context::counter_for_model(&call.model);
    let input_tokens: u64 = call
        .messages
        .iter()
        .map(|m| counter.message(m) as u64)
        .sum();
    let id = buddy_store::new_id("call");
    let cancel = state.inner.shutdown.child_token();
    let lease = state.claim(&id, None, &caller.owner, &cancel).await?;
    let worst = Worst::Call {
        input_tokens,
        max_output_tokens: call.max_output_tokens,
    };
    let admitted = match admit(state, caller, call.provider.name(), &call.model, worst).await {
        Ok(admitted) => admitted,
        Err(e) => {
            lease.release().await;
            return Err(e);
        }
    };
    let owned = state.clone();
    let made = state.inner.turns.spawn(async move {
        let request = CompletionRequest::new(&call.model, &call.messages);
        let completion = tokio::select! {
            completion = admitted.call(&*call.provider, request) => Some(completion),
            () = cancel.cancelled() => None,
        };
        let usage = completion
            .as_ref()
            .and_then(|c| c.as_ref().ok())
            .and_then(|c| c.usage)
            .unwrap_or_default();
        let cost = admitted.cost(&usage);
        admitted.settle(&owned, cost).await;
        lease.release().await;
        completion
    });
    match made.await {
        Ok(Some(completion)) => Ok(completion),
        Ok(None) => Err(AppError::TurnFailed {
            reason: buddy_core::StopReason::Cancelled,
            message: "the call was cancelled (the server is shutting down)".into(),
        }),
        Err(e) => Err(AppError::Internal(format!(
            "the model call's task failed: {e}"
        ))),
    }
}

impl Admission {
    /// Makes one model call under the admission: it waits for one of the key's slots,
    /// and its output is bounded to what the hold leaves.
    pub(crate) async fn call(
        &self,
        provider: &dyn Provider,
        mut request: CompletionRequest<'_>,
    ) -> Result<Completion, ProviderError> {
        if let Some(bound) = self.max_output_tokens {
            let bound = u32::try_from(bound).unwrap_or(u32::MAX);
            request.max_output_tokens = Some(
                request
                    .max_output_tokens
                    .map_or(bound, |asked| asked.min(bound)),
            );
        }
        let _slot = self.slots.take().await;
        provider.complete(request).await
    }

    /// buddy's answer when a call of the turn found no room in its key's ledger.
    pub(crate) fn refusal_words(&self) -> Option<String> {
        let ledger = self.ledger.as_ref()?;
        ledger.refused().then(|| spend::no_room_words(&self.key))
    }

    /// What `usage` cost at the admitted price.
    pub(crate) fn cost(&self, usage: &buddy_core::Usage) -> Option<Usd> {
        self.price.map(|p| p.cost(usage))
    }

    /// Ends a one-off call's admission: the hold is released and `cost` booked in the
    /// key's ledger and in the metrics (`buddy_key_cost_usd_total`).
    pub(crate) async fn settle(self, state: &AppState, cost: Option<Usd>) {
        if let Some(cost) = cost {
            crate::metrics::observe_cost(cost, &self.provider, &self.model, &self.key);
        }
        self.settle_turn(state, cost).await;
    }

    /// Ends a turn's admission: its hold released and its cost in the ledger (the turn's
    /// metrics are booked with the rest of its figures).
    pub(crate) async fn settle_turn(self, state: &AppState, cost: Option<Usd>) {
        if let Some(ledger) = &self.ledger {
            return ledger.close(cost).await;
        }
        let store = &*state.inner.store;
        spend::settle(store, &self.owner, &self.key, self.held.as_ref(), cost).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(room: Option<f64>, price: Option<Price>) -> Admission {
        Admission {
            price,
            held: room.map(|d| Held {
                id: "hold_x".into(),
                amount: Usd::from_dollars(d).unwrap(),
            }),
            ledger: None,
            slots: CallSlots::new(1),
            max_output_tokens: None,
            owner: "o".into(),
            key: "alice".into(),
            provider: "p".into(),
            model: "m".into(),
        }
    }

    #[test]
    fn a_call_whose_input_alone_passes_the_room_is_refused_and_its_output_is_cut_to_the_rest() {
        // $1 per million tokens in, $10 out.
        let price = Some(Price::new(1.0, 10.0));
        let a = admission(Some(0.10), price);
        // 900 KB of input (~225k tokens) costs $0.225: more than the $0.10 left.
        let refused = fit_output(&a, 225_000, 16_384).unwrap_err();
        assert!(
            refused.contains("$0.1000") && refused.contains("alice"),
            "{refused}"
        );
        // 50k tokens in ($0.05) leaves $0.05: 5000 tokens out at $10 per million.
        assert_eq!(fit_output(&a, 50_000, 16_384), Ok(5_000));
        assert_eq!(
            fit_output(&a, 1_000, 2_000),
            Ok(2_000),
            "within the room: as asked"
        );
        // Too little left to write anything worth having.
        assert!(fit_output(&a, 99_000, 16_384).is_err());
        // No ceiling: no hold, no bound.
        assert_eq!(fit_output(&admission(None, price), 10_000_000, 9), Ok(9));
    }
}
