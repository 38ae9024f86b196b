//! Running turns across instances: two `PgStore`s on one database are two instances.

use buddy_core::{Message, StopReason, TurnStats};
use buddy_store::Turns;
use buddy_store::{
    Claim, ClaimError, Coordinator, CountedHistory, LocalCoordinator, PgStore, SqliteStore, Store,
    TurnClosing, TurnOpening,
};

fn claim(turn: &str, conversation: Option<&str>, owner: &str, max: usize) -> Claim {
    Claim {
        turn_id: turn.into(),
        conversation_id: conversation.map(str::to_owned),
        owner: owner.into(),
        max_per_owner: max,
    }
}

async fn rules(a: &dyn Coordinator, b: &dyn Coordinator, tag: &str) {
    let (conv, alice, bob) = (
        format!("conv_{tag}"),
        format!("alice_{tag}"),
        format!("bob_{tag}"),
    );
    let t1 = format!("turn_1_{tag}");
    a.claim(&claim(&t1, Some(&conv), &alice, 2)).await.unwrap();
    // The same conversation is busy everywhere, whoever asks.
    for (at, owner) in [(a, &alice), (b, &alice), (b, &bob)] {
        let refused = at
            .claim(&claim(&format!("x_{tag}_{owner}"), Some(&conv), owner, 9))
            .await;
        assert!(
            matches!(&refused, Err(ClaimError::ConversationBusy { running, .. }) if *running == t1),
            "{refused:?}"
        );
    }
    assert_eq!(b.running_on(&conv).await.unwrap(), Some(t1.clone()));
    // The per-key cap counts turns on every instance.
    b.claim(&claim(&format!("turn_2_{tag}"), None, &alice, 2))
        .await
        .unwrap();
    let refused = a
        .claim(&claim(&format!("turn_3_{tag}"), None, &alice, 2))
        .await;
    assert!(
        matches!(refused, Err(ClaimError::OwnerAtCap { max: 2 })),
        "{refused:?}"
    );
    b.claim(&claim(&format!("turn_4_{tag}"), None, &bob, 2))
        .await
        .unwrap();
    // Released on one instance, free on the other.
    a.release(&t1).await.unwrap();
    assert_eq!(b.running_on(&conv).await.unwrap(), None);
    b.claim(&claim(&format!("turn_5_{tag}"), Some(&conv), &bob, 2))
        .await
        .unwrap();
}

#[tokio::test]
async fn one_process_keeps_the_rules() {
    let local = LocalCoordinator::default();
    rules(&local, &local, "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_postgres_keep_the_rules_and_pass_cancels() {
    let url = super::postgres_url();
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    assert_ne!(a.instance(), b.instance());
    let tag = a.instance().to_owned();
    rules(&a, &b, &tag).await;

    // A cancel asked of B reaches A, which runs the turn.
    let mut at_a = a.cancellations();
    let turn = format!("turn_cancel_{tag}");
    // An owner of this run only: a claim left by an earlier run (until its instance goes
    // stale) does not count against it.
    let carol = format!("carol_{tag}");
    a.claim(&claim(&turn, None, &carol, 1)).await.unwrap();
    assert!(
        !b.request_cancel(&turn, Some("mallory")).await.unwrap(),
        "not mallory's turn"
    );
    assert!(b.request_cancel(&turn, Some(&carol)).await.unwrap());
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match at_a.recv().await {
                Some(t) if t == turn => return t,
                Some(_) => continue,
                None => panic!("the cancel channel closed"),
            }
        }
    })
    .await
    .expect("A hears the cancel sent through B");
    assert_eq!(heard, turn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_never_pass_the_cap_or_share_a_conversation() {
    let url = super::postgres_url();
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    let tag = a.instance().to_owned();
    let owner = format!("dave_{tag}");
    let conversation = format!("conv_race_{tag}");
    // 40 claims at once over both instances: at most 5 for the key, and one per conversation.
    let claims: Vec<Claim> = (0..40)
        .map(|i| {
            let conv = (i % 2 == 0).then(|| conversation.clone());
            claim(&format!("race_{tag}_{i}"), conv.as_deref(), &owner, 5)
        })
        .collect();
    let results = futures::future::join_all(claims.iter().enumerate().map(|(i, c)| {
        let at: &dyn Coordinator = if i % 2 == 0 { &a } else { &b };
        at.claim(c)
    }))
    .await;
    let won: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| i)
        .collect();
    assert!(won.len() <= 5, "{} claims passed a cap of 5", won.len());
    assert!(!won.is_empty());
    assert!(
        won.iter().filter(|i| *i % 2 == 0).count() <= 1,
        "two turns on one conversation: {won:?}"
    );
    // Released claims free their places in the cap.
    for i in &won {
        a.release(&claims[*i].turn_id).await.unwrap();
    }
    for i in 0..5 {
        b.claim(&claim(&format!("again_{tag}_{i}"), None, &owner, 5))
            .await
            .unwrap();
    }
}

/// A new conversation's opening and its turn's claim ([`Coordinator::open_claimed`]):
/// both kept, or (the key at its cap) neither; and a closing in a store that keeps the
/// coordinator's claims ([`Store::claims_of`]) ends the claim with it.
async fn openings_with_claims(store: &dyn Store, coordinator: &dyn Coordinator, tag: &str) {
    let owner = format!("erin_{tag}");
    let turn = format!("turn_open_{tag}");
    let first = [Message::user("Hi")];
    let opening = |turn: &'static str| TurnOpening {
        conversation: None,
        owner: "",
        turn,
        model: "m",
        settings: None,
        messages: &[],
        counts: &[],
        copied: &[],
        copied_turns: &[],
    };
    let open = TurnOpening {
        owner: &owner,
        turn: &turn,
        messages: &first,
        ..opening("")
    };
    let id = coordinator
        .open_claimed(store, open, &claim(&turn, None, &owner, 1))
        .await
        .unwrap();
    assert_eq!(store.load_messages(&id).await.unwrap(), first);
    assert_eq!(
        coordinator.running_on(&id).await.unwrap(),
        Some(turn.clone())
    );
    assert!(coordinator.is_running(&turn).await.unwrap());

    // At the key's cap: refused, and nothing of the opening is kept.
    let refused_turn = format!("turn_refused_{tag}");
    let refused = coordinator
        .open_claimed(
            store,
            TurnOpening {
                owner: &owner,
                turn: &refused_turn,
                messages: &first,
                ..opening("")
            },
            &claim(&refused_turn, None, &owner, 1),
        )
        .await;
    assert!(
        matches!(refused, Err(ClaimError::OwnerAtCap { max: 1 })),
        "{refused:?}"
    );
    let listed = store.list_conversations(Some(&owner)).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!coordinator.is_running(&refused_turn).await.unwrap());

    // The turn's end: where the store keeps this coordinator's claims, the closing ends
    // the claim too; elsewhere the coordinator's release does.
    let kept_here = store.claims_of().is_some() && store.claims_of() == coordinator.instance();
    let stats = TurnStats::default();
    store
        .close_turn(TurnClosing {
            conversation: &id,
            turn: &turn,
            last: &CountedHistory::default(),
            reason: StopReason::Completed,
            stats: &stats,
            error: None,
            tape: None,
        })
        .await
        .unwrap();
    assert_eq!(coordinator.is_running(&turn).await.unwrap(), !kept_here);
    // Releasing after the closing changes nothing more (a claim ends once).
    coordinator.release(&turn).await.unwrap();
    coordinator.release(&turn).await.unwrap();
    assert_eq!(coordinator.running_on(&id).await.unwrap(), None);
    // The key's place is free again, once.
    let next = format!("turn_next_{tag}");
    coordinator
        .claim(&claim(&next, Some(&id), &owner, 1))
        .await
        .unwrap();
    let over = coordinator
        .claim(&claim(&format!("turn_over_{tag}"), None, &owner, 1))
        .await;
    assert!(
        matches!(over, Err(ClaimError::OwnerAtCap { max: 1 })),
        "{over:?}"
    );
    coordinator.release(&next).await.unwrap();
}

#[tokio::test]
async fn one_process_opens_and_claims_in_two_writes() {
    let store = SqliteStore::in_memory().unwrap();
    let local = LocalCoordinator::default();
    assert_eq!(store.claims_of(), None);
    assert_eq!(local.instance(), None);
    openings_with_claims(&store, &local, "local").await;
    // One process has no other instance to ask for events: the requests never come.
    assert!(local.event_requests().recv().await.is_none());
    local.ask_for_events("log_nowhere").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_opens_and_claims_in_one_write_and_its_closing_ends_the_claim() {
    let url = super::postgres_url();
    let pg = PgStore::connect(&url).await.unwrap();
    let tag = pg.instance().to_owned();
    assert_eq!(Turns::claims_of(&pg), Some(tag.as_str()));
    assert_eq!(Coordinator::instance(&pg), Some(tag.as_str()));
    openings_with_claims(&pg, &pg, &tag).await;
    // PostgreSQL's store under a coordinator of its own (not one that keeps its claims
    // there): the opening and the claim go apart, and the claim is the coordinator's.
    let local = LocalCoordinator::default();
    openings_with_claims(&pg, &local, &format!("{tag}_local")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_events_reaches_every_instance() {
    let url = super::postgres_url();
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    let mut at_a = a.event_requests();
    let log = format!("turn_watched_{}", a.instance());
    b.ask_for_events(&log).await.unwrap();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match at_a.recv().await {
                Some(asked) if asked == log => return asked,
                Some(_) => continue,
                None => panic!("the event-request channel closed"),
            }
        }
    })
    .await
    .expect("A hears the request sent through B");
    assert_eq!(heard, log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_and_cancels_posted_through_one_instance_wait_for_the_one_running_the_turn() {
    use buddy_store::AnswerVerdict;
    let url = super::postgres_url();
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    let tag = a.instance().to_owned();
    let (turn, erin) = (format!("turn_answer_{tag}"), format!("erin_{tag}"));
    // No such turn, or not this owner's: nothing is kept.
    assert_eq!(
        b.post_answer(&turn, Some(&erin), "elicit_1", "{}")
            .await
            .unwrap(),
        None
    );
    a.claim(&claim(&turn, None, &erin, 1)).await.unwrap();
    assert_eq!(
        b.post_answer(&turn, Some("mallory"), "elicit_1", "{}")
            .await
            .unwrap(),
        None
    );
    let answer = r#"{"action":"decline"}"#;
    let seq = b
        .post_answer(&turn, Some(&erin), "elicit_1", answer)
        .await
        .unwrap()
        .expect("kept for a running turn");
    assert!(b.request_cancel(&turn, None).await.unwrap());
    // A finds both by looking (no notification needed: it listens to none here); B finds
    // nothing for its own turns.
    let waiting = a.waiting().await.unwrap();
    assert_eq!(waiting.cancels, vec![turn.clone()]);
    assert_eq!(waiting.answers.len(), 1);
    let posted = &waiting.answers[0];
    assert_eq!(
        (
            posted.seq,
            posted.turn_id.as_str(),
            posted.question.as_str(),
            posted.answer.as_str()
        ),
        (seq, turn.as_str(), "elicit_1", answer)
    );
    assert!(b.waiting().await.unwrap().answers.is_empty());
    // No verdict yet; once A gives it, B reads it once and it is gone; the answer no
    // longer waits.
    assert_eq!(b.answer_verdict(seq).await.unwrap(), None);
    let verdict = AnswerVerdict::Answered("already".into());
    a.give_verdict(seq, &verdict).await.unwrap();
    assert!(a.waiting().await.unwrap().answers.is_empty());
    assert_eq!(b.answer_verdict(seq).await.unwrap(), Some(verdict));
    assert_eq!(b.answer_verdict(seq).await.unwrap(), None);
    // The turn ends: nothing waits for it any more.
    a.release(&turn).await.unwrap();
    assert_eq!(a.waiting().await.unwrap(), buddy_store::Waiting::default());
    assert!(!b.request_cancel(&turn, None).await.unwrap());
}
