//! The turn's budget as its tool calls see it: a model call an MCP server asks for while
//! a call runs (sampling) is drawn from the turn's tree pool — the one its rounds and its
//! sub-agents draw from — refused when it is spent, shown on the stream, and added to
//! the stats the turn reports at its end ([`with_side_calls`]). Like a sub-agent's calls
//! they stay out of the turn's own figures while it runs (its model calls keep their
//! numbers); the pool gates the next call.

use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, CallBudget, ChatEvent, DelegatedStats, Price, TurnStats, Usage};
use tokio::sync::mpsc;

use super::tree::{Place, Refusal};

/// Model calls the turn's tools made for their servers and not yet in the turn's stats.
#[derive(Clone, Debug, Default)]
pub(crate) struct SideUsage(Arc<Mutex<DelegatedStats>>);

impl SideUsage {
    fn lock(&self) -> std::sync::MutexGuard<'_, DelegatedStats> {
        // Plain counters: a panic elsewhere leaves them usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What was used since the last take.
    pub(crate) fn take(&self) -> DelegatedStats {
        std::mem::take(&mut *self.lock())
    }

    fn add(&self, used: &DelegatedStats) {
        let mut total = self.lock();
        total.model_calls += used.model_calls;
        total.input_tokens += used.input_tokens;
        total.output_tokens += used.output_tokens;
        if let Some(cost) = used.cost_usd {
            total.cost_usd = Some(total.cost_usd.unwrap_or_default().saturating_add(cost));
        }
    }
}

/// The budget handed to one tool call.
#[derive(Debug)]
pub(crate) struct TurnCallBudget {
    pub call_id: String,
    pub name: String,
    pub place: Place,
    pub used: SideUsage,
    pub events: mpsc::Sender<ChatEvent>,
    /// The turn's model's price: a sampling call on it costs the same.
    pub price: Option<Price>,
    /// Where a sampling call on another model than the turn's finds its price.
    pub pricing: SamplingPrices,
    /// The turn's pool of model-call slots: a drawn sampling call holds one until booked.
    pub slots: Option<crate::CallSlots>,
    /// The slots drawn calls hold, freed as they are booked (or with the tool call).
    pub held: Mutex<Vec<tokio::sync::OwnedSemaphorePermit>>,
}

/// The turn's provider and model, and the operator's price table: a sampling call on
/// another model is priced by the same lookup as the turn's own model.
#[derive(Debug)]
pub(crate) struct SamplingPrices {
    pub table: Option<Arc<crate::PriceTable>>,
    pub provider: String,
    pub model: String,
}

impl TurnCallBudget {
    /// What a sampling call to `model` costs per token: the turn's price for its own
    /// model, else the operator's table (then the list prices) by the turn's provider.
    fn price_of(&self, model: &str) -> Option<Price> {
        match &self.pricing.table {
            Some(table) if model != self.pricing.model => {
                table.price(&self.pricing.provider, model)
            }
            _ => self.price,
        }
    }

    fn event(&self, server: &str) -> ChatEvent {
        ChatEvent::ToolSampling {
            id: self.call_id.clone(),
            name: self.name.clone(),
            server: server.to_owned(),
            model: None,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            refused: None,
        }
    }
}

/// The limit a refusal names, for the server.
fn limit(refusal: &Refusal) -> String {
    match refusal {
        Refusal::Calls { max } => format!(
            "the turn's {max} model calls (policy max_model_calls) are spent or held for its answer"
        ),
        Refusal::Budget => {
            "the turn's token or money budget (max_turn_tokens, max_turn_cost_usd) is spent"
                .to_owned()
        }
        other => other.to_string(),
    }
}

impl CallBudget for TurnCallBudget {
    fn draw<'a>(&'a self, server: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Err(refusal) = self.place.take_side_call() else {
                if let Some(slots) = &self.slots
                    && let Some(slot) = slots.take().await
                {
                    self.held
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(slot);
                }
                return Ok(());
            };
            let why = crate::words::sampling_refused(&limit(&refusal));
            let mut shown = self.event(server);
            if let ChatEvent::ToolSampling { refused, .. } = &mut shown {
                *refused = Some(why.clone());
            }
            let _ = self.events.send(shown).await;
            Err(why)
        })
    }

    fn book<'a>(
        &'a self,
        server: &'a str,
        model: &'a str,
        usage: Option<Usage>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            drop(self.held.lock().unwrap_or_else(|e| e.into_inner()).pop());
            let usage = usage.unwrap_or_default();
            let cost = self.price_of(model).map(|price| price.cost(&usage));
            let parts = buddy_core::InputParts::of(&usage);
            let used = DelegatedStats {
                agents: 0,
                model_calls: 1,
                tool_calls: 0,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cache_read_tokens: parts.read,
                cache_write_tokens: parts.write_5m + parts.write_1h,
                cost_usd: cost,
            };
            self.place.book_side(&used);
            self.used.add(&used);
            let _ = self
                .events
                .send(ChatEvent::ToolSampling {
                    id: self.call_id.clone(),
                    name: self.name.clone(),
                    server: server.to_owned(),
                    model: Some(model.to_owned()),
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cost_usd: cost,
                    refused: None,
                })
                .await;
        })
    }
}

/// `stats` with the model calls the turn's tools made for their servers added in.
pub(crate) fn with_side_calls(mut stats: TurnStats, side: DelegatedStats) -> TurnStats {
    stats.model_calls += side.model_calls;
    stats.input_tokens += side.input_tokens;
    stats.output_tokens += side.output_tokens;
    stats.cache_read_tokens += side.cache_read_tokens;
    stats.cache_write_tokens += side.cache_write_tokens;
    if let Some(cost) = side.cost_usd {
        stats.cost_usd = Some(stats.cost_usd.unwrap_or_default().saturating_add(cost));
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Lease;
    use crate::policy::LoopPolicy;
    use crate::{CallSlots, PriceTable};

    fn a_budget(table: Option<PriceTable>, slots: &CallSlots) -> (TurnCallBudget, Lease) {
        let lease = Lease::root(&LoopPolicy::default());
        let (events, _) = mpsc::channel(16);
        let budget = TurnCallBudget {
            call_id: "call_1".into(),
            name: "tool".into(),
            place: lease.place(),
            used: SideUsage::default(),
            events,
            price: Some(Price::new(1.0, 1.0)),
            pricing: SamplingPrices {
                table: table.map(Arc::new),
                provider: "openai".into(),
                model: "turn-model".into(),
            },
            slots: Some(slots.clone()),
            held: Mutex::default(),
        };
        (budget, lease)
    }

    #[tokio::test]
    async fn a_sampling_call_is_priced_by_the_operators_table_and_holds_a_slot_until_booked() {
        let mut table = PriceTable::default();
        table.add(Some("openai"), "sampler-*", Price::new(100.0, 100.0));
        let slots = CallSlots::new(1);
        let (budget, _lease) = a_budget(Some(table), &slots);
        // The turn's own model: the turn's price; another: the operator's, not a list price.
        assert_eq!(budget.price_of("turn-model"), Some(Price::new(1.0, 1.0)));
        assert_eq!(budget.price_of("sampler-x"), Some(Price::new(100.0, 100.0)));
        assert_eq!(
            budget.price_of("gpt-4o-mini").map(|p| p.input),
            Some(0.15),
            "unpriced by the operator: the list price"
        );
        budget.draw("srv").await.unwrap();
        assert_eq!(slots.in_flight(), 1, "a drawn call holds the key's slot");
        let usage = Usage {
            input_tokens: 10_000,
            output_tokens: 0,
            ..Usage::default()
        };
        budget.book("srv", "sampler-x", Some(usage)).await;
        assert_eq!(slots.in_flight(), 0, "booked: the slot is free");
        assert_eq!(
            budget.used.take().cost_usd,
            Some(Price::new(100.0, 100.0).cost(&usage))
        );
        // Without a table (a bare engine), the turn's price as before.
        let (bare, _lease) = a_budget(None, &slots);
        assert_eq!(bare.price_of("sampler-x"), Some(Price::new(1.0, 1.0)));
    }
}
