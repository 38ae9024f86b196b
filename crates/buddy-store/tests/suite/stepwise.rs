//! A store that keeps the subject traits' step-by-step defaults for a turn's opening and
//! closing (a store written outside buddy that overrides neither) keeps the same contract.

use buddy_core::{BoxFuture, Message, StopReason, TokenCount, TurnStats, Usd};
use buddy_store::{
    ConversationDetail, ConversationInfo, ConversationSummary, Conversations, CountedHistory,
    Forks, History, Spend, SqliteStore, StoreError, Tasks, Turns,
};

/// SQLite behind the trait's required methods only.
pub(super) struct Stepwise(pub(super) SqliteStore);

impl Conversations for Stepwise {
    fn create_conversation<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        self.0.create_conversation(owner)
    }
    fn session_conversation<'a>(
        &'a self,
        owner: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.0.session_conversation(owner, session)
    }
    fn conversation_info<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationInfo>, StoreError>> {
        self.0.conversation_info(id)
    }
    fn list_conversations<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<ConversationSummary>, StoreError>> {
        self.0.list_conversations(owner)
    }
    fn get_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationDetail>, StoreError>> {
        self.0.get_conversation(id)
    }
    fn rename_conversation<'a>(
        &'a self,
        id: &'a str,
        title: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.rename_conversation(id, title)
    }
    fn set_settings<'a>(
        &'a self,
        id: &'a str,
        settings: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.set_settings(id, settings)
    }
    fn delete_conversation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.delete_conversation(id)
    }
}

impl History for Stepwise {
    fn load_counted<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<CountedHistory, StoreError>> {
        self.0.load_counted(id)
    }
    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.append_counted(id, turn_id, messages, counts)
    }
    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        self.0.remove_messages(conversation, seqs)
    }
}

impl Turns for Stepwise {
    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.begin_turn(id, turn_id, model)
    }
    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.finish_turn(turn_id, reason, stats, error, tape)
    }
    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        self.0.turn_tapes(id)
    }
    fn set_response_origin<'a>(
        &'a self,
        turn: &'a str,
        origin: &'a buddy_store::ResponseOrigin,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.set_response_origin(turn, origin)
    }
    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<buddy_store::TurnDeletion, StoreError>> {
        self.0.delete_turn(conversation, turn)
    }
}

/// The fork keeps the trait's default: step by step, without records.
impl Forks for Stepwise {}

impl Spend for Stepwise {
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.add_spend(owner, day, amount)
    }
    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        self.0.spend_since(owner, first_day)
    }
}

impl Tasks for Stepwise {
    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a buddy_core::RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.record_call_task(id, call_id, task)
    }
    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<
        'a,
        Result<std::collections::HashMap<String, buddy_core::RecordedTask>, StoreError>,
    > {
        self.0.call_tasks(id)
    }
}
