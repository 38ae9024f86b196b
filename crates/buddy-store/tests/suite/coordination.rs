//! Running turns across instances: two `PgStore`s on one database are two instances.

use buddy_store::{Claim, ClaimError, Coordinator, LocalCoordinator, PgStore};

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
