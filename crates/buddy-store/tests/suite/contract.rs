//! What every store must do, the same for SQLite and PostgreSQL.

use buddy_core::{Message, StopReason, TokenCount, ToolCall, TurnStats, Usd};
use buddy_store::prelude::*;
use buddy_store::{
    CountedHistory, ForkCopy, PgStore, SpendHold, SqliteStore, Store, StoreError, TurnClosing,
    TurnDeletion, TurnOpening,
};

/// The spend ledger: sums per owner over days, concurrent additions all counted.
async fn spend(store: &dyn Store) {
    let owner = buddy_store::new_id("owner");
    let other = buddy_store::new_id("owner");
    let cent = Usd::from_nanos(10_000_000);
    store.add_spend(&owner, "2026-10-31", cent).await.unwrap();
    let adds = (0..20).map(|_| store.add_spend(&owner, "2026-11-01", cent));
    for added in futures::future::join_all(adds).await {
        added.unwrap();
    }
    store.add_spend(&other, "2026-11-01", cent).await.unwrap();
    let cents = |n: u64| Usd::from_nanos(n * 10_000_000);
    assert_eq!(
        store.spend_since(&owner, "2026-11-01").await.unwrap(),
        cents(20)
    );
    assert_eq!(
        store.spend_since(&owner, "2026-10-01").await.unwrap(),
        cents(21)
    );
    assert_eq!(
        store.spend_since(&owner, "2026-11-02").await.unwrap(),
        Usd::ZERO
    );
}

/// Spend holds (issue 46, item 9): holds taken at once never together pass a ceiling;
/// settling one frees what it held and adds what it cost; one never settled (its process
/// died) lapses at its expiry.
async fn spend_holds(store: &dyn Store) {
    let owner = buddy_store::new_id("owner");
    let cents = |n: u64| Usd::from_nanos(n * 10_000_000);
    store
        .add_spend(&owner, "2026-11-01", cents(4))
        .await
        .unwrap();
    let ceilings = vec![
        ("2026-11-01".to_owned(), cents(10)),
        ("2026-10-01".to_owned(), cents(100)),
    ];
    let ids: Vec<String> = (0..20).map(|_| buddy_store::new_id("hold")).collect();
    let held = futures::future::join_all(
        ids.iter()
            .map(|id| store.hold_spend(a_hold(&owner, id, Some(cents(1)), &ceilings, 1_000))),
    )
    .await;
    let held: Vec<Usd> = held.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        held.iter().filter(|h| **h == cents(1)).count(),
        6,
        "$0.10 ceiling, $0.04 spent: six holds of a cent, the rest nothing: {held:?}"
    );
    assert!(held.iter().all(|h| *h == cents(1) || *h == Usd::ZERO));
    // One turn settles at two cents; the ceiling is full (6 spent + 5 held > 10).
    let first = &ids[held.iter().position(|h| *h == cents(1)).unwrap()];
    store
        .settle_spend(&owner, first, "2026-11-01", cents(2))
        .await
        .unwrap();
    let more = store
        .hold_spend(a_hold(
            &owner,
            &buddy_store::new_id("hold"),
            None,
            &ceilings,
            2_000,
        ))
        .await
        .unwrap();
    assert_eq!(more, Usd::ZERO);
    assert_eq!(
        store.spend_since(&owner, "2026-11-01").await.unwrap(),
        cents(6)
    );
    // The other five never settle: once they lapse, their room is free again.
    let after = store
        .hold_spend(a_hold(
            &owner,
            &buddy_store::new_id("hold"),
            None,
            &ceilings,
            61_001,
        ))
        .await
        .unwrap();
    assert_eq!(after, cents(4), "10 - 6 spent, nothing held");
}

/// A hold of `owner`'s lasting a minute from `now_ms`.
fn a_hold<'a>(
    owner: &'a str,
    id: &'a str,
    wanted: Option<Usd>,
    ceilings: &'a [(String, Usd)],
    now_ms: i64,
) -> SpendHold<'a> {
    SpendHold {
        owner,
        id,
        wanted,
        ceilings,
        now_ms,
        expires_at_ms: now_ms + 60_000,
    }
}

/// Bytes a key's conversations hold, per key (for the storage quota of issue 46).
async fn stored_bytes(store: &dyn Store) {
    let owner = buddy_store::new_id("owner");
    assert_eq!(store.stored_bytes(&owner).await.unwrap(), 0);
    let id = store.create_conversation(&owner).await.unwrap();
    let message = Message::user("x".repeat(1000));
    store.append_message(&id, "t1", &message).await.unwrap();
    let one = store.stored_bytes(&owner).await.unwrap();
    assert!((1000..1100).contains(&one), "{one}");
    let long = Message::user("é".repeat(300_000));
    store.append_message(&id, "t1", &long).await.unwrap();
    let both = store.stored_bytes(&owner).await.unwrap();
    assert!(
        (one + 600_000..one + 600_100).contains(&both),
        "bytes, not characters, also of long rows: {both}"
    );
    let other = buddy_store::new_id("owner");
    assert_eq!(store.stored_bytes(&other).await.unwrap(), 0);
}

/// The settings a turn of conversation `id` would start from.
async fn info_settings(store: &dyn Store, id: &str) -> serde_json::Value {
    store.conversation_info(id).await.unwrap().unwrap().settings
}

async fn contract(store: &dyn Store) {
    let (id, round) = a_conversation_is_kept_and_read_back(store).await;
    conversations_are_listed_by_owner(store, &id).await;
    a_batch_is_all_or_nothing(store, &round).await;
    titles_and_settings_are_kept(store, &id).await;
    sessions_are_found_by_owner_and_id(store).await;
    response_origins_are_read_back(store).await;
    a_deletion_takes_everything(store, &id).await;
}

/// What a Responses API request said of its turn is read back with the turn's record;
/// a turn the store does not hold is `NotFound`.
async fn response_origins_are_read_back(store: &dyn Store) {
    let turn = buddy_store::new_id("turn");
    let id = store
        .open_turn(opening(None, &turn, None, &[Message::user("hi")]))
        .await
        .unwrap();
    let read = || async {
        let detail = store.get_conversation(&id).await.unwrap().unwrap();
        detail.turns[0].response.clone()
    };
    assert_eq!(read().await, None);
    let origin = buddy_store::ResponseOrigin {
        previous_response_id: Some("resp_earlier".into()),
        background: true,
    };
    store.set_response_origin(&turn, &origin).await.unwrap();
    assert_eq!(read().await, Some(origin.clone()));
    let missing = store.set_response_origin("turn_never", &origin).await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
}

/// A client session's conversation is found by its owner and session id (kept in the
/// settings' metadata), the newest when several have it; another owner's never.
async fn sessions_are_found_by_owner_and_id(store: &dyn Store) {
    let session = serde_json::json!({"metadata": {"buddy_session": "claude:5b1e"}});
    let older = store.create_conversation("alice").await.unwrap();
    assert!(store.set_settings(&older, &session).await.unwrap());
    std::thread::sleep(std::time::Duration::from_millis(3));
    let newer = store.create_conversation("alice").await.unwrap();
    assert!(store.set_settings(&newer, &session).await.unwrap());
    let other = serde_json::json!({"metadata": {"buddy_session": "claude:other"}});
    let unrelated = store.create_conversation("alice").await.unwrap();
    assert!(store.set_settings(&unrelated, &other).await.unwrap());
    let found = store.session_conversation("alice", "claude:5b1e").await;
    assert_eq!(found.unwrap(), Some(newer.clone()));
    let bobs = store.session_conversation("bob", "claude:5b1e").await;
    assert_eq!(bobs.unwrap(), None);
    let none = store.session_conversation("alice", "claude:none").await;
    assert_eq!(none.unwrap(), None);
    for id in [older, newer, unrelated] {
        assert!(store.delete_conversation(&id).await.unwrap());
    }
}

/// A conversation created, appended to in rounds, finished and read back; its id and
/// the round of a tool call it holds.
async fn a_conversation_is_kept_and_read_back(store: &dyn Store) -> (String, [Message; 2]) {
    // Create, append in rounds, finish, read back.
    let id = store.create_conversation("owner-a").await.unwrap();
    store.begin_turn(&id, "turn_1", "model-x").await.unwrap();
    let round = [
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new("c1", "get_time", "{}")],
        },
        Message::tool_result("c1", "12:00", false),
    ];
    store
        .append_message(&id, "turn_1", &Message::user("time?"))
        .await
        .unwrap();
    store.append_messages(&id, "turn_1", &round).await.unwrap();
    store
        .append_message(&id, "turn_1", &Message::assistant("Noon."))
        .await
        .unwrap();
    let stats = TurnStats {
        model_calls: 2,
        tool_calls: 1,
        ..TurnStats::default()
    };
    store
        .finish_turn(
            "turn_1",
            StopReason::Completed,
            &stats,
            None,
            Some(r#"{"tape":1}"#),
        )
        .await
        .unwrap();
    let messages = store.load_messages(&id).await.unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0], Message::user("time?"));
    assert_eq!(messages[3], Message::assistant("Noon."));
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        detail.turns[0]
            .stop_reason
            .map(buddy_store::TurnEnd::as_str),
        Some("completed")
    );
    // The turn's tape is kept for replay; a turn without one keeps none.
    store.begin_turn(&id, "turn_2", "model-x").await.unwrap();
    store
        .finish_turn("turn_2", StopReason::Cancelled, &stats, None, None)
        .await
        .unwrap();
    assert_eq!(
        store.turn_tapes(&id).await.unwrap(),
        [("turn_1".to_owned(), r#"{"tape":1}"#.to_owned())]
    );
    assert_eq!(detail.turns[0].stats, Some(stats));
    let info = store.conversation_info(&id).await.unwrap().unwrap();
    assert_eq!(
        (info.owner.as_str(), info.last_model.as_deref()),
        ("owner-a", Some("model-x"))
    );
    (id, round)
}

/// Conversations listed by owner; an admin sees all.
async fn conversations_are_listed_by_owner(store: &dyn Store, id: &str) {
    // Listing by owner; an admin (None) sees all.
    let other = store.create_conversation("owner-b").await.unwrap();
    let mine = store.list_conversations(Some("owner-a")).await.unwrap();
    assert!(
        mine.iter()
            .any(|c| c.id == id && c.title == "time?" && c.messages == 4)
    );
    assert!(!mine.iter().any(|c| c.id == other));
    let all = store.list_conversations(None).await.unwrap();
    assert!(all.iter().any(|c| c.id == id) && all.iter().any(|c| c.id == other));
}

/// A batch that cannot be stored leaves nothing behind.
async fn a_batch_is_all_or_nothing(store: &dyn Store, round: &[Message]) {
    // A batch is all or nothing: one that cannot be stored leaves nothing behind.
    assert!(matches!(
        store.append_messages("conv_missing", "t", round).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(
        store
            .conversation_info("conv_missing")
            .await
            .unwrap()
            .is_none()
    );
}

/// A conversation's title and settings, replaced and read back.
async fn titles_and_settings_are_kept(store: &dyn Store, id: &str) {
    // A title of a person's choosing replaces the first message; every message names
    // the turn that added it.
    let before = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(before.message_turns.len(), before.messages.len());
    assert!(store.rename_conversation(id, "Renamed").await.unwrap());
    assert!(
        !store
            .rename_conversation("conv_missing", "x")
            .await
            .unwrap()
    );
    let after = store.get_conversation(id).await.unwrap().unwrap();
    assert_eq!(after.title, "Renamed");
    let listed = store.list_conversations(None).await.unwrap();
    assert_eq!(
        listed.iter().find(|c| c.id == id).map(|c| c.title.as_str()),
        Some("Renamed")
    );

    // Settings: none at first, then kept whole and replaced whole, in the detail and the
    // info a turn starts from.
    assert_eq!(after.settings, serde_json::json!({}));
    assert_eq!(info_settings(store, id).await, serde_json::json!({}));
    let settings = serde_json::json!({"system": "Be brief.", "policy": {"max_tool_calls": 3}});
    assert!(store.set_settings(id, &settings).await.unwrap());
    assert!(!store.set_settings("conv_missing", &settings).await.unwrap());
    assert_eq!(
        store.get_conversation(id).await.unwrap().unwrap().settings,
        settings
    );
    let replaced = serde_json::json!({"system": "Be thorough."});
    assert!(store.set_settings(id, &replaced).await.unwrap());
    assert_eq!(info_settings(store, id).await, replaced);
}

/// Deleting a conversation takes its messages, turns and tapes with it.
async fn a_deletion_takes_everything(store: &dyn Store, id: &str) {
    // Delete takes messages and turns with it.
    assert!(store.delete_conversation(id).await.unwrap());
    assert!(!store.delete_conversation(id).await.unwrap());
    assert!(matches!(
        store.load_messages(id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(store.get_conversation(id).await.unwrap().is_none());
    assert!(store.turn_tapes(id).await.unwrap().is_empty());
}

/// Many concurrent appends to one conversation keep their order and lose nothing.
/// Megabytes of tool-call arguments and a long user message come back as they went in,
/// beside short ones, and a conversation's title still comes from its first message.
async fn long_messages(store: &dyn Store) {
    let id = store.create_conversation("owner-l").await.unwrap();
    let text = "x".repeat(3 * 1024 * 1024);
    let arguments = serde_json::json!({"text": text, "quote": "\"é\n"}).to_string();
    let round = [
        Message::user(format!("Count this: {}", "y".repeat(400 * 1024))),
        Message::Assistant {
            content: Some("Counting.".into()),
            tool_calls: vec![ToolCall::new("c1", "count_bytes", arguments.clone())],
        },
        Message::tool_result("c1", "3145750", false),
    ];
    store.append_messages(&id, "t", &round).await.unwrap();
    let back = store.load_messages(&id).await.unwrap();
    assert_eq!(back, round);
    let listed = store.list_conversations(Some("owner-l")).await.unwrap();
    assert!(
        listed[0].title.starts_with("Count this: yyy"),
        "{}",
        listed[0].title
    );
}

/// Token counts go in and come back beside their messages, a long message's too; a
/// message appended without one has none.
async fn counts(store: &dyn Store) {
    let id = store.create_conversation("owner-t").await.unwrap();
    let count = |tokens| {
        Some(TokenCount {
            encoding: "o200k_base/1".into(),
            tokens,
        })
    };
    let round = [
        Message::user("What is the capital of France?"),
        Message::assistant("x".repeat(300 * 1024)),
        Message::user("And of Italy?"),
    ];
    store
        .append_counted(&id, "t", &round, &[count(14), count(65_000), None])
        .await
        .unwrap();
    store
        .append_messages(&id, "t", &[Message::assistant("Rome.")])
        .await
        .unwrap();
    let back = store.load_counted(&id).await.unwrap();
    assert_eq!(back.messages[..3], round);
    assert_eq!(back.counts, vec![count(14), count(65_000), None, None]);
    assert_eq!(store.load_messages(&id).await.unwrap(), back.messages);
    assert!(matches!(
        store.load_counted("conv_missing").await,
        Err(StoreError::NotFound(_))
    ));
    // A conversation with no message yet is empty, not missing.
    let empty = store.create_conversation("owner-t").await.unwrap();
    assert_eq!(
        store.load_counted(&empty).await.unwrap(),
        CountedHistory::default()
    );
}

/// An opening of `turn` on `conversation` (a new one for `None`) by "owner-o".
fn opening<'a>(
    conversation: Option<&'a str>,
    turn: &'a str,
    settings: Option<&'a serde_json::Value>,
    messages: &'a [Message],
) -> TurnOpening<'a> {
    TurnOpening {
        conversation,
        owner: "owner-o",
        turn,
        model: turn,
        settings,
        messages,
        counts: &[],
        copied: &[],
        copied_turns: &[],
    }
}

/// A turn's opening is one write: a new conversation with its settings, the turn's record
/// and its first messages; on an existing conversation the turn and its messages follow
/// what is there. A missing conversation is `NotFound`, and an opening that fails keeps
/// nothing of itself.
async fn openings(store: &dyn Store) {
    // Numbered, so that turns started in one millisecond still list in order.
    let base = buddy_store::new_id("turn");
    let turns: Vec<String> = (0..4).map(|i| format!("{base}-{i}")).collect();
    let settings = serde_json::json!({"system_prompt": "Be brief."});
    let first = [Message::system("Be brief."), Message::user("Hi")];
    let id = store
        .open_turn(opening(None, &turns[0], Some(&settings), &first))
        .await
        .unwrap();
    let info = store.conversation_info(&id).await.unwrap().unwrap();
    assert_eq!(info.owner, "owner-o");
    assert_eq!(info.last_model.as_deref(), Some(turns[0].as_str()));
    assert_eq!(info.settings, settings);
    assert_eq!(store.load_messages(&id).await.unwrap(), first);
    store
        .append_message(&id, &turns[0], &Message::assistant("Hello."))
        .await
        .unwrap();

    // Continued: the settings stay, the messages go after the earlier ones.
    let again = [Message::user("Again")];
    let same = store
        .open_turn(opening(Some(&id), &turns[1], None, &again))
        .await
        .unwrap();
    assert_eq!(same, id);
    // And an opening with no message (a resumed turn) still records its turn.
    store
        .open_turn(opening(Some(&id), &turns[2], None, &[]))
        .await
        .unwrap();
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(detail.settings, settings);
    assert_eq!(
        detail.messages,
        [&first[..], &[Message::assistant("Hello.")], &again[..]].concat()
    );
    assert_eq!(
        detail.message_turns,
        [&turns[0], &turns[0], &turns[0], &turns[1]].map(String::clone)
    );
    let recorded: Vec<&String> = detail.turns.iter().map(|t| &t.id).collect();
    assert_eq!(recorded, [&turns[0], &turns[1], &turns[2]]);
    let info = store.conversation_info(&id).await.unwrap().unwrap();
    assert_eq!(info.last_model.as_deref(), Some(turns[2].as_str()));

    let missing = store
        .open_turn(opening(Some("conv_missing"), &turns[3], None, &again))
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
    // A turn id already taken fails the whole opening: no new conversation, no message.
    let listed = store
        .list_conversations(Some("owner-o"))
        .await
        .unwrap()
        .len();
    let taken = store
        .open_turn(opening(None, &turns[0], Some(&settings), &first))
        .await;
    assert!(taken.is_err(), "{taken:?}");
    let taken = store
        .open_turn(opening(Some(&id), &turns[1], None, &again))
        .await;
    assert!(taken.is_err(), "{taken:?}");
    assert_eq!(
        store
            .list_conversations(Some("owner-o"))
            .await
            .unwrap()
            .len(),
        listed
    );
    assert_eq!(store.get_conversation(&id).await.unwrap().unwrap(), detail);
    // The unused turn id was not recorded by the missing conversation's opening.
    store
        .open_turn(opening(Some(&id), &turns[3], None, &[]))
        .await
        .unwrap();
}

/// A turn's end goes in with its last messages: both kept, or (the conversation gone)
/// neither; with no message left it is the end alone.
async fn closings(store: &dyn Store) {
    let turn = buddy_store::new_id("turn");
    let first = [Message::user("Hi")];
    let id = store
        .open_turn(opening(None, &turn, None, &first))
        .await
        .unwrap();
    let last = CountedHistory {
        messages: vec![Message::assistant("Hello.")],
        counts: vec![Some(TokenCount {
            encoding: "o200k_base/1".into(),
            tokens: 3,
        })],
        ..CountedHistory::default()
    };
    let stats = TurnStats {
        model_calls: 1,
        ..TurnStats::default()
    };
    let closing = |conversation, last| TurnClosing {
        conversation,
        turn: &turn,
        last,
        reason: StopReason::Completed,
        stats: &stats,
        error: None,
        tape: Some("{}"),
    };
    store.close_turn(closing(&id, &last)).await.unwrap();
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(detail.messages, [&first[..], &last.messages].concat());
    assert_eq!(
        store.load_counted(&id).await.unwrap().counts[1],
        last.counts[0]
    );
    let ended = &detail.turns[0];
    assert_eq!(ended.stop_reason.map(|e| e.as_str()), Some("completed"));
    assert_eq!(ended.stats.as_ref().map(|s| s.model_calls), Some(1));
    assert_eq!(
        store.turn_tapes(&id).await.unwrap(),
        [(turn.clone(), "{}".to_owned())]
    );

    // Nothing left to append: the end alone.
    let empty = CountedHistory::default();
    store.close_turn(closing(&id, &empty)).await.unwrap();
    // A conversation deleted under a running turn: not found, nothing written.
    store.delete_conversation(&id).await.unwrap();
    let gone = store.close_turn(closing(&id, &last)).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    assert!(store.get_conversation(&id).await.unwrap().is_none());
}

async fn concurrent_appends(store: &dyn Store) {
    let id = store.create_conversation("owner-c").await.unwrap();
    let writes = (0..50).map(|i| {
        let id = id.clone();
        async move {
            store
                .append_message(&id, "t", &Message::user(format!("m{i}")))
                .await
        }
    });
    for result in futures::future::join_all(writes).await {
        result.unwrap();
    }
    assert_eq!(store.load_messages(&id).await.unwrap().len(), 50);
}

/// Rounds of several messages written at once to one conversation: each comes back
/// whole and in its own order, none interleaved with another, numbered without gaps.
async fn concurrent_rounds(store: &dyn Store) {
    let id = store.create_conversation("owner-r").await.unwrap();
    let rounds: Vec<Vec<Message>> = (0..20)
        .map(|r| (0..3).map(|i| Message::user(format!("r{r}-{i}"))).collect())
        .collect();
    let writes = rounds
        .iter()
        .map(|round| store.append_messages(&id, "t", round));
    for result in futures::future::join_all(writes).await {
        result.unwrap();
    }
    let back = store.load_messages(&id).await.unwrap();
    assert_eq!(back.len(), 60);
    for chunk in back.chunks(3) {
        let texts: Vec<&str> = chunk.iter().filter_map(Message::text).collect();
        let round = texts[0].split('-').next().unwrap_or_default();
        assert_eq!(
            texts,
            [0, 1, 2].map(|i| format!("{round}-{i}")),
            "a round came back split or out of order: {back:?}"
        );
    }
    let missing = store
        .append_messages("conv_none", "t", &[Message::user("lost?")])
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
}

/// Deleting one turn deletes that turn only: a middle one is hidden (its messages stay
/// as the later turns' context), the last one goes with its messages and any hidden turns
/// it leaves at the end, and the conversation goes with its last live turn.
async fn turn_deletions(store: &dyn Store) {
    let base = buddy_store::new_id("turn");
    let turns: Vec<String> = (0..3).map(|i| format!("{base}-{i}")).collect();
    let said = |i: usize| [Message::user(format!("question {i}"))];
    let first = said(0);
    let id = store
        .open_turn(opening(None, &turns[0], None, &first))
        .await
        .unwrap();
    for (i, turn) in turns.iter().enumerate().skip(1) {
        let messages = said(i);
        store
            .open_turn(opening(Some(&id), turn, None, &messages))
            .await
            .unwrap();
    }
    let texts = |detail: &buddy_store::ConversationDetail| {
        detail
            .messages
            .iter()
            .map(|m| m.text().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        store.delete_turn(&id, &turns[1]).await.unwrap(),
        TurnDeletion::Hidden
    );
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        texts(&detail).len(),
        3,
        "the hidden turn's message stays as context"
    );
    assert!(detail.turns[1].hidden && !detail.turns[0].hidden && !detail.turns[2].hidden);
    assert_eq!(
        store.delete_turn(&id, &turns[1]).await.unwrap(),
        TurnDeletion::NotFound,
        "a hidden turn is gone"
    );
    assert_eq!(
        store.delete_turn(&id, &turns[2]).await.unwrap(),
        TurnDeletion::Removed
    );
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        texts(&detail),
        ["question 0"],
        "the last turn took the hidden one along"
    );
    assert_eq!(detail.turns.len(), 1);
    assert_eq!(
        store.delete_turn(&id, "turn_unknown").await.unwrap(),
        TurnDeletion::NotFound
    );
    assert_eq!(
        store.delete_turn(&id, &turns[0]).await.unwrap(),
        TurnDeletion::ConversationGone
    );
    assert!(store.get_conversation(&id).await.unwrap().is_none());
}

/// Messages removed by number leave the others' numbers as they were, and a message
/// added after is numbered past all of them.
async fn message_removals(store: &dyn Store) {
    let turn = buddy_store::new_id("turn");
    let said = [Message::user("a"), Message::user("b"), Message::user("c")];
    let id = store
        .open_turn(opening(None, &turn, None, &said))
        .await
        .unwrap();
    let before = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(before.message_seqs.len(), 3);
    let removed = store
        .remove_messages(&id, &[before.message_seqs[1], 999_999])
        .await
        .unwrap();
    assert_eq!(removed, 1);
    store
        .append_messages(&id, &turn, &[Message::user("d")])
        .await
        .unwrap();
    let after = store.get_conversation(&id).await.unwrap().unwrap();
    let texts: Vec<&str> = after.messages.iter().filter_map(Message::text).collect();
    assert_eq!(texts, ["a", "c", "d"]);
    assert_eq!(
        after.message_seqs[..2],
        [before.message_seqs[0], before.message_seqs[2]]
    );
    assert!(after.message_seqs[2] > before.message_seqs[2]);
}

/// A branch's opening copies its ancestors' history into the new conversation, each
/// message kept with the turn that first added it, before the turn's own messages — in
/// the one write of the opening.
async fn branch_openings(store: &dyn Store) {
    let turn = buddy_store::new_id("turn");
    let copied = [
        Message::user("a"),
        Message::assistant("A"),
        Message::user("b"),
    ];
    let copied_turns = ["turn_one".to_owned(), "turn_one".into(), "turn_two".into()];
    let own = [Message::user("c")];
    let id = store
        .open_turn(TurnOpening {
            copied: &copied,
            copied_turns: &copied_turns,
            ..opening(None, &turn, None, &own)
        })
        .await
        .unwrap();
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    let texts: Vec<&str> = detail.messages.iter().filter_map(Message::text).collect();
    assert_eq!(texts, ["a", "A", "b", "c"]);
    assert_eq!(
        detail.message_turns,
        ["turn_one", "turn_one", "turn_two", turn.as_str()]
    );
    assert_eq!(
        detail.turns.len(),
        1,
        "only the branch's own turn is a turn here"
    );
}

/// A fork: the messages before an index, each with its time and count, the whole turns'
/// records under the copy's ids, the title and settings, and where it came from.
async fn forks(store: &dyn Store) {
    let id = store.create_conversation("owner-f").await.unwrap();
    let stats = TurnStats {
        model_calls: 1,
        ..TurnStats::default()
    };
    let (one, two) = (buddy_store::new_id("turn"), buddy_store::new_id("turn"));
    for (turn, said) in [(&one, ["gone", "a", "A"]), (&two, ["b", "B", "x"])] {
        store.begin_turn(&id, turn, "model-f").await.unwrap();
        let messages: Vec<Message> = said.iter().map(|s| Message::user(*s)).collect();
        store.append_messages(&id, turn, &messages).await.unwrap();
        store
            .finish_turn(turn, StopReason::Completed, &stats, None, Some("{}"))
            .await
            .unwrap();
    }
    // Numbers are not indexes once a message is gone.
    let first = store.get_conversation(&id).await.unwrap().unwrap();
    store
        .remove_messages(&id, &first.message_seqs[..1])
        .await
        .unwrap();
    store.rename_conversation(&id, "Named").await.unwrap();
    let settings = serde_json::json!({"system": "Be brief."});
    store.set_settings(&id, &settings).await.unwrap();
    let original = store.get_conversation(&id).await.unwrap().unwrap();
    let copy_of_one = buddy_store::new_id("turn");
    let turns = [(one.clone(), copy_of_one.clone())];
    let fork = ForkCopy {
        from: &id,
        owner: "owner-f",
        before: 3,
        turns: &turns,
    };
    let fork_id = store.fork_conversation(fork).await.unwrap();
    let copy = store.get_conversation(&fork_id).await.unwrap().unwrap();
    let texts: Vec<&str> = copy.messages.iter().filter_map(Message::text).collect();
    assert_eq!(texts, ["a", "A", "b"]);
    assert_eq!(
        copy.message_turns,
        [copy_of_one.as_str(), copy_of_one.as_str(), two.as_str()]
    );
    assert_eq!(copy.message_times_ms, original.message_times_ms[..3]);
    assert_eq!((copy.title.as_str(), &copy.settings), ("Named", &settings));
    assert_eq!(
        (copy.forked_from.as_deref(), copy.fork_before),
        (Some(id.as_str()), Some(3))
    );
    assert_eq!(copy.turns.len(), 1);
    let record = &copy.turns[0];
    // By id: two turns begun in the same millisecond may be listed in either order.
    let original_one = original.turns.iter().find(|t| t.id == one).unwrap();
    assert_eq!(
        record,
        &buddy_store::TurnRecord {
            id: copy_of_one.clone(),
            ..original_one.clone()
        }
    );
    let tapes = store.turn_tapes(&fork_id).await.unwrap();
    assert_eq!(tapes, [(copy_of_one.clone(), "{}".to_owned())]);
    let listed = store.list_conversations(Some("owner-f")).await.unwrap();
    let summary = listed.iter().find(|c| c.id == fork_id).unwrap();
    assert_eq!(
        (summary.forked_from.as_deref(), summary.fork_before),
        (Some(id.as_str()), Some(3))
    );
    assert_eq!(
        listed.iter().find(|c| c.id == id).unwrap().forked_from,
        None
    );
    // The fork goes on after its copied messages; the original is as it was.
    store
        .append_messages(&fork_id, "turn_next", &[Message::user("c")])
        .await
        .unwrap();
    let copy = store.get_conversation(&fork_id).await.unwrap().unwrap();
    assert_eq!(copy.messages.len(), 4);
    assert!(copy.message_seqs[3] > copy.message_seqs[2]);
    assert_eq!(
        store.get_conversation(&id).await.unwrap().unwrap(),
        original
    );
    let gone = ForkCopy {
        from: "conv_nope",
        ..fork
    };
    assert!(matches!(
        store.fork_conversation(gone).await,
        Err(StoreError::NotFound(_))
    ));
}

/// A task a call became is kept with its conversation, replaced when the call becomes
/// another, and gone with the conversation.
async fn call_tasks(store: &dyn Store) {
    let id = store.create_conversation("tasks").await.unwrap();
    let other = store.create_conversation("tasks").await.unwrap();
    assert!(store.call_tasks(&id).await.unwrap().is_empty());
    let task = |n: &str| buddy_core::RecordedTask {
        server: "jobs".into(),
        task_id: n.into(),
    };
    store
        .record_call_task(&id, "call_1", &task("t1"))
        .await
        .unwrap();
    store
        .record_call_task(&id, "call_2", &task("t2"))
        .await
        .unwrap();
    store
        .record_call_task(&id, "call_2", &task("t3"))
        .await
        .unwrap();
    store
        .record_call_task(&other, "call_1", &task("x"))
        .await
        .unwrap();
    let kept = store.call_tasks(&id).await.unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept["call_1"], task("t1"));
    assert_eq!(kept["call_2"], task("t3"));
    assert!(store.delete_conversation(&id).await.unwrap());
    assert!(store.call_tasks(&id).await.unwrap().is_empty());
    assert_eq!(store.call_tasks(&other).await.unwrap()["call_1"], task("x"));
}

#[tokio::test]
async fn sqlite_keeps_the_store_contract() {
    let store = SqliteStore::in_memory().unwrap();
    call_tasks(&store).await;
    spend_holds(&store).await;
    stored_bytes(&store).await;
    contract(&store).await;
    turn_deletions(&store).await;
    forks(&store).await;
    branch_openings(&store).await;
    message_removals(&store).await;
    openings(&store).await;
    closings(&store).await;
    spend(&store).await;
    concurrent_appends(&store).await;
    concurrent_rounds(&store).await;
    long_messages(&store).await;
    counts(&store).await;
    timed_appends(&store).await;
    // Read back through a file as well (the long rows are blobs on disk).
    let dir = tempfile::tempdir().unwrap();
    let file = SqliteStore::open(&dir.path().join("long.db")).unwrap();
    long_messages(&file).await;
    counts(&file).await;
}

/// The trait's step-by-step opening and closing keep the same contract as the stores'
/// one-transaction ones.
#[tokio::test]
async fn the_step_by_step_opening_and_closing_keep_the_contract() {
    let store = super::stepwise::Stepwise(SqliteStore::in_memory().unwrap());
    openings(&store).await;
    branch_openings(&store).await;
    closings(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_the_store_contract() {
    let store = PgStore::connect(&super::postgres_url()).await.unwrap();
    call_tasks(&store).await;
    spend_holds(&store).await;
    stored_bytes(&store).await;
    contract(&store).await;
    turn_deletions(&store).await;
    forks(&store).await;
    branch_openings(&store).await;
    message_removals(&store).await;
    openings(&store).await;
    closings(&store).await;
    spend(&store).await;
    concurrent_appends(&store).await;
    concurrent_rounds(&store).await;
    long_messages(&store).await;
    counts(&store).await;
    timed_appends(&store).await;
}

/// A database written before messages were numbered from the conversation's row: its
/// conversations go on from their last message after the schema is brought up to date.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_before_last_seq_goes_on_numbering() {
    let url = super::postgres_url();
    let schema = buddy_store::new_id("old");
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    create_a_schema_from_before_last_seq(&admin, &schema).await;
    let separator = if url.contains('?') { '&' } else { '?' };
    let store = PgStore::connect(&format!("{url}{separator}options[search_path]={schema}"))
        .await
        .unwrap();
    conversations_go_on_numbering(&store).await;
    drop(store);
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
}

/// A schema as buddy wrote it before `last_seq`: one conversation with two messages.
async fn create_a_schema_from_before_last_seq(admin: &sqlx::PgPool, schema: &str) {
    // The schema name is our own random id: nothing outside the test reaches this SQL.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.buddy_conversations (id TEXT PRIMARY KEY, owner TEXT NOT NULL,
             created_at_ms BIGINT NOT NULL, updated_at_ms BIGINT NOT NULL);
         CREATE TABLE {schema}.buddy_messages (
             conversation_id TEXT NOT NULL REFERENCES {schema}.buddy_conversations(id) ON DELETE CASCADE,
             seq BIGINT NOT NULL, turn_id TEXT NOT NULL, role TEXT NOT NULL, body TEXT NOT NULL,
             created_at_ms BIGINT NOT NULL, PRIMARY KEY (conversation_id, seq));
         INSERT INTO {schema}.buddy_conversations VALUES ('conv_old', 'owner-o', 1, 1);
         INSERT INTO {schema}.buddy_messages VALUES
             ('conv_old', 1, 't0', 'user', '{{\"role\":\"user\",\"content\":\"first\"}}', 1),
             ('conv_old', 2, 't0', 'user', '{{\"role\":\"user\",\"content\":\"second\"}}', 1);"
    )))
    .execute(admin)
    .await
    .unwrap();
}

/// The old conversation goes on from its last message; a new one starts at one. Its
/// messages were counted into its key's stored bytes when the schema came up to date.
async fn conversations_go_on_numbering(store: &PgStore) {
    let before: u64 = [
        "{\"role\":\"user\",\"content\":\"first\"}",
        "{\"role\":\"user\",\"content\":\"second\"}",
    ]
    .iter()
    .map(|body| body.len() as u64)
    .sum();
    assert_eq!(store.stored_bytes("owner-o").await.unwrap(), before);
    store
        .append_messages("conv_old", "t1", &[Message::user("third")])
        .await
        .unwrap();
    let texts: Vec<String> = store
        .load_messages("conv_old")
        .await
        .unwrap()
        .iter()
        .filter_map(|m| m.text().map(str::to_owned))
        .collect();
    assert_eq!(texts, ["first", "second", "third"]);
    let fresh = store.create_conversation("owner-o").await.unwrap();
    store
        .append_messages(&fresh, "t1", &[Message::user("new")])
        .await
        .unwrap();
    assert_eq!(store.load_messages(&fresh).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_postgres_url_that_does_not_answer_is_a_clear_error() {
    let error = PgStore::connect("postgres://nobody@127.0.0.1:1/none")
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("cannot connect to PostgreSQL"), "{error}");
}

/// Two conversations of one owner, one of them with its first message damaged by
/// `damage` (given its id): the list and the readable one are answered, the damaged one
/// is marked in the list and read as corrupt — never as a failure worth retrying.
async fn a_damaged_row_stays_in_its_conversation(
    store: &dyn Store,
    damage: impl AsyncFnOnce(&str),
) {
    let owner = buddy_store::new_id("owner");
    let good = store.create_conversation(&owner).await.unwrap();
    let bad = store.create_conversation(&owner).await.unwrap();
    for id in [&good, &bad] {
        store
            .append_message(id, "t1", &Message::user("hello"))
            .await
            .unwrap();
    }
    damage(&bad).await;
    let listed = store.list_conversations(Some(&owner)).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let title_of = |id: &str| listed.iter().find(|c| c.id == id).unwrap().title.clone();
    assert_eq!(title_of(&good), "hello");
    assert_eq!(title_of(&bad), buddy_store::UNREADABLE_TITLE);
    assert_eq!(store.load_messages(&good).await.unwrap().len(), 1);
    let read = store.load_messages(&bad).await.unwrap_err();
    assert!(matches!(read, StoreError::Corrupt(_)), "{read:?}");
}

#[tokio::test]
async fn sqlite_keeps_a_damaged_row_to_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let store = SqliteStore::open(&path).unwrap();
    // Invalid UTF-8 (was a retryable 503), and JSON that is no message.
    for body in ["X'C328FF'", "'{\"role\": 7}'"] {
        let path = path.clone();
        a_damaged_row_stays_in_its_conversation(&store, async move |id: &str| {
            let raw = rusqlite::Connection::open(&path).unwrap();
            raw.execute(
                &format!("UPDATE messages SET body = {body} WHERE conversation_id = ?1"),
                [id],
            )
            .unwrap();
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_a_damaged_row_to_its_conversation() {
    let url = super::postgres_url();
    let store = PgStore::connect(&url).await.unwrap();
    let raw = sqlx::PgPool::connect(&url).await.unwrap();
    a_damaged_row_stays_in_its_conversation(&store, async |id: &str| {
        sqlx::query("UPDATE buddy_messages SET body = '{\"role\": 7}' WHERE conversation_id = $1")
            .bind(id)
            .execute(&raw)
            .await
            .unwrap();
    })
    .await;
}

/// Messages written after they were made keep the times they were made
/// ([`Store::append_history`], a closing); those without one take the write's time.
async fn timed_appends(store: &dyn Store) {
    let turn = buddy_store::new_id("turn");
    let id = store
        .open_turn(opening(None, &turn, None, &[Message::user("Hi")]))
        .await
        .unwrap();
    let before = now_ms();
    let round = CountedHistory {
        messages: vec![
            Message::assistant("Thinking."),
            Message::tool_result("call_1", "done", false),
            Message::assistant("Still thinking."),
        ],
        counts: vec![],
        times_ms: vec![1_000, 2_000],
    };
    store.append_history(&id, &turn, &round).await.unwrap();
    let last = CountedHistory {
        messages: vec![Message::assistant("Hello.")],
        counts: vec![],
        times_ms: vec![3_000],
    };
    let stats = TurnStats::default();
    store
        .close_turn(TurnClosing {
            conversation: &id,
            turn: &turn,
            last: &last,
            reason: StopReason::Completed,
            stats: &stats,
            error: None,
            tape: None,
        })
        .await
        .unwrap();
    let detail = store.get_conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        detail.messages,
        [
            &[Message::user("Hi")][..],
            &round.messages[..],
            &last.messages[..]
        ]
        .concat()
    );
    let times = &detail.message_times_ms;
    assert_eq!(times[1..3], [1_000, 2_000]);
    assert!(times[3] >= before, "no time given: the write's ({times:?})");
    assert_eq!(times[4], 3_000);
    // A conversation that is gone is not found, whatever the times.
    let gone = store.append_history("conv_missing", &turn, &round).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
