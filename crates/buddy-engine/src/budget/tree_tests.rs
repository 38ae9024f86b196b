use super::*;

fn policy(calls: u32) -> LoopPolicy {
    LoopPolicy {
        max_model_calls: calls,
        ..LoopPolicy::default()
    }
}

fn hop(n: u32) -> AgentHop {
    AgentHop {
        agent: "a".into(),
        call_id: format!("c{n}"),
    }
}

#[test]
fn a_lone_turn_draws_all_but_its_answer_then_the_answer() {
    let mut lease = Lease::root(&policy(3));
    assert!(lease.take_round_call());
    assert!(lease.take_round_call());
    assert!(!lease.take_round_call(), "the third call is the answer's");
    assert!(lease.take_final_call());
    assert!(!lease.take_final_call());
}

#[test]
fn eight_children_against_nine_calls_never_overshoot() {
    let mut root = Lease::root(&policy(9));
    assert!(root.take_round_call());
    let place = root.place();
    let mut children: Vec<Lease> = (0..8)
        .filter_map(|n| place.open_child(hop(n)).ok())
        .collect();
    // 1 used + the root's reserve leave 7 calls, each child holds one back.
    assert_eq!(children.len(), 7);
    let mut made = 1;
    for child in &mut children {
        while child.take_round_call() {
            made += 1;
        }
        if child.take_final_call() {
            made += 1;
        }
    }
    drop(children);
    assert!(root.take_final_call());
    made += 1;
    assert_eq!(made, 9);
    assert!(!root.take_round_call());
}

#[test]
fn an_unspent_reserve_returns_when_the_child_ends() {
    let mut root = Lease::root(&policy(4));
    let place = root.place();
    let child = place.open_child(hop(0)).expect("room");
    assert_eq!(place.calls_left(), 2);
    drop(child);
    assert_eq!(place.calls_left(), 3);
    assert!(root.take_round_call());
}

#[test]
fn depth_and_spawns_are_bounded() {
    let root = Lease::root(&LoopPolicy {
        max_agent_depth: 1,
        max_agent_spawns: 2,
        ..LoopPolicy::default()
    });
    let child = root.place().open_child(hop(0)).expect("depth 1");
    assert_eq!(
        child.place().open_child(hop(1)).err(),
        Some(Refusal::Depth { max: 1 })
    );
    let _second = root.place().open_child(hop(2)).expect("second spawn");
    assert_eq!(
        root.place().open_child(hop(3)).err(),
        Some(Refusal::Spawns { max: 2 })
    );
}

#[test]
fn side_calls_share_the_pool_and_are_booked_once() {
    let mut root = Lease::root(&LoopPolicy {
        max_model_calls: 3,
        max_turn_tokens: Some(1000),
        ..LoopPolicy::default()
    });
    assert!(root.take_round_call());
    let child = root.place().open_child(hop(0)).expect("room");
    // 1 round call + the root's reserve + the child's reserve: the pool is full.
    assert_eq!(
        child.place().take_side_call(),
        Err(Refusal::Calls { max: 3 })
    );
    drop(child);
    let place = root.place();
    assert_eq!(place.take_side_call(), Ok(()));
    assert_eq!(place.take_side_call(), Err(Refusal::Calls { max: 3 }));
    let used = DelegatedStats {
        model_calls: 1,
        input_tokens: 600,
        output_tokens: 400,
        ..DelegatedStats::default()
    };
    place.book_side(&used);
    // The turn's own figures keep out the side call: booking them adds nothing to it.
    root.book(&TurnStats {
        model_calls: 1,
        ..TurnStats::default()
    });
    assert_eq!(
        root.stop_before_call(None),
        Some(TreeStop::Tokens {
            budget: 1000,
            used: 1000
        })
    );
    assert!(root.take_final_call(), "the answer's call is still held");
}

#[test]
fn usage_is_booked_to_every_ancestor_and_the_pool() {
    let root = Lease::root(&LoopPolicy {
        max_turn_tokens: Some(100),
        ..LoopPolicy::default()
    });
    let mut child = root.place().open_child(hop(0)).expect("room");
    let mut grandchild = child.place().open_child(hop(1)).expect("room");
    grandchild.book(&TurnStats {
        model_calls: 2,
        input_tokens: 60,
        output_tokens: 40,
        ..TurnStats::default()
    });
    child.book(&TurnStats {
        model_calls: 1,
        ..TurnStats::default()
    });
    let at_root = root.delegated();
    assert_eq!((at_root.agents, at_root.model_calls), (2, 3));
    assert_eq!(at_root.input_tokens + at_root.output_tokens, 100);
    assert_eq!(child.delegated().model_calls, 2);
    assert_eq!(
        root.stop_before_call(None),
        Some(TreeStop::Tokens {
            budget: 100,
            used: 100
        })
    );
    let total = with_delegated(TurnStats::default(), at_root);
    assert_eq!(total.model_calls, 3);
}

#[test]
fn the_trees_cache_reads_and_writes_are_in_the_turns_totals() {
    let own = TurnStats {
        input_tokens: 100,
        cache_read_tokens: 80,
        ..TurnStats::default()
    };
    let delegated = DelegatedStats {
        agents: 1,
        input_tokens: 50,
        cache_read_tokens: 40,
        cache_write_tokens: 5,
        ..DelegatedStats::default()
    };
    let all = with_delegated(own, delegated);
    assert_eq!(
        (
            all.input_tokens,
            all.cache_read_tokens,
            all.cache_write_tokens
        ),
        (150, 120, 5)
    );
    let mut sum = DelegatedStats::default();
    add(&mut sum, &delegated);
    add(&mut sum, &delegated);
    assert_eq!((sum.cache_read_tokens, sum.cache_write_tokens), (80, 10));
}
