//! Sub-agents through the public API: one ledger over the tree, bounds, typed outcomes,
//! cancellation that reaches every descendant, events that carry the agent path.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use buddy_core::{
    BoxFuture, ChatEvent, CompletionRequest, GuardAction, GuardKind, Message, Provider,
    ProviderError, SkillContext, StopReason, Token, TokenStream, ToolCall, Toolbox,
};
use buddy_engine::{
    AgentOutcome, AgentSet, AgentSpec, AgentStatus, CancellationToken, Engine, LoopPolicy,
    TurnOutcome, TurnRequest,
};
use buddy_skills::{CommandSkill, CommandSkillConfig, SkillRegistry};
use buddy_testkit::{assert_event_order, assert_history_valid, reply_tokens};
use futures::StreamExt;
use serde_json::json;

use super::call;

/// Bounds every turn here: a broken bound fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(60);

/// How a child of [`TreeModel`] behaves.
#[derive(Clone, Copy, PartialEq)]
enum Child {
    /// Looks up `steps - 1` times, then reports.
    Steps(usize),
    /// Calls the `sleeper` command (a real process that sleeps), then reports.
    Sleeps,
    /// Its model stream starts and never ends.
    HangsInStream,
}

/// A model for trees of agents. The caller (no system prompt) delegates `fan` tasks to
/// `helper` in its first round, then sums up; a child (system prompt "child agent")
/// behaves as `child`. Every call yields first, so children interleave as real ones do;
/// every open stream is counted.
struct TreeModel {
    fan: usize,
    child: Child,
    open: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    /// Children between their first call and their report, and the most at once.
    active: AtomicUsize,
    most_active: AtomicUsize,
    /// The user message of every child's first call.
    tasks: std::sync::Mutex<Vec<String>>,
}

impl TreeModel {
    fn new(fan: usize, child: Child) -> Self {
        TreeModel {
            fan,
            child,
            open: Arc::new(AtomicUsize::new(0)),
            calls: Arc::new(AtomicUsize::new(0)),
            active: AtomicUsize::new(0),
            most_active: AtomicUsize::new(0),
            tasks: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn reply(&self, request: &CompletionRequest<'_>) -> (Vec<Result<Token, ProviderError>>, bool) {
        let messages = request.messages;
        let system = messages.iter().find_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        });
        let user_at = messages.iter().rposition(Message::is_user).unwrap_or(0);
        let user = messages.get(user_at).and_then(Message::text).unwrap_or("");
        let round = 1 + messages[user_at..]
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let n = self.calls.load(Ordering::SeqCst);
        let offers = request.offers_tools();
        if system.is_some_and(|s| s.contains("child agent")) {
            if round == 1 {
                let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_active.fetch_max(now, Ordering::SeqCst);
                if let Ok(mut tasks) = self.tasks.lock() {
                    tasks.push(user.to_owned());
                }
            }
            let last = !offers || matches!(self.child, Child::Steps(steps) if round >= steps);
            if last {
                self.active.fetch_sub(1, Ordering::SeqCst);
            }
            if !offers {
                return (
                    reply_tokens(&format!("partial findings on {user}"), vec![]),
                    false,
                );
            }
            return match self.child {
                Child::HangsInStream => (reply_tokens("thinking", vec![]), true),
                Child::Sleeps if round == 1 => (
                    reply_tokens("", vec![call(&format!("s{n}"), "sleeper", json!({}))]),
                    false,
                ),
                Child::Steps(steps) if round < steps => (
                    reply_tokens(
                        "",
                        vec![call(
                            &format!("l{n}"),
                            "lookup",
                            json!({"q": format!("{user} {round}")}),
                        )],
                    ),
                    false,
                ),
                _ => (reply_tokens(&format!("report on {user}"), vec![]), false),
            };
        }
        if offers && round == 1 {
            let calls = (0..self.fan)
                .map(|i| {
                    call(
                        &format!("h{i}"),
                        "helper",
                        json!({"task": format!("task {i}")}),
                    )
                })
                .collect();
            return (reply_tokens("delegating", calls), false);
        }
        (reply_tokens("summary of the reports", vec![]), false)
    }
}

/// Counts a stream as open until it is dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Provider for TreeModel {
    fn name(&self) -> &str {
        "tree"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.calls.fetch_add(1, Ordering::SeqCst);
            let (tokens, hang) = self.reply(&request);
            self.open.fetch_add(1, Ordering::SeqCst);
            let open = Open(Arc::clone(&self.open));
            let tokens: Vec<_> = match hang {
                // Text, then nothing: the stream stays open until it is dropped.
                true => tokens.into_iter().take(1).collect(),
                false => tokens,
            };
            let body = futures::stream::iter(tokens);
            let stream: TokenStream = match hang {
                true => body.chain(futures::stream::pending()).boxed(),
                false => body.boxed(),
            };
            Ok(stream
                .map(move |token| {
                    let _open = &open;
                    token
                })
                .boxed())
        })
    }
}

/// The command skills children use: `lookup` (echoes its arguments) and `sleeper` (a
/// process that sleeps 30 s), each tagged with `mark` in its environment.
fn registry(mark: &str) -> SkillRegistry {
    let sandbox = std::env::temp_dir();
    let command = |name: &str, program: &[&str]| {
        let config = CommandSkillConfig {
            name: name.into(),
            description: format!("{name} for tests"),
            parameters: json!({"type": "object"}),
            semantics: Default::default(),
            command: program.iter().map(|s| (*s).to_owned()).collect(),
            timeout_secs: Some(120.0),
            env: [("BUDDY_TEST_MARK".to_owned(), mark.to_owned())].into(),
            env_passthrough: Vec::new(),
            cwd: None,
        };
        Arc::new(CommandSkill::new(config, &sandbox).expect("command skill"))
    };
    let mut registry = SkillRegistry::new();
    registry
        .register(command("lookup", &["cat"]))
        .expect("lookup");
    registry
        .register(command("sleeper", &["sleep", "30"]))
        .expect("sleeper");
    registry
}

fn helper() -> AgentSpec {
    AgentSpec {
        name: "helper".into(),
        description: "Does one task and reports.".into(),
        instructions: "You are a child agent.".into(),
        skills: vec!["lookup".into(), "sleeper".into()],
        ..AgentSpec::default()
    }
}

fn tree_engine(model: &Arc<TreeModel>, specs: Vec<AgentSpec>, mark: &str) -> Engine {
    let provider: Arc<dyn Provider> = Arc::clone(model) as Arc<dyn Provider>;
    let base: Arc<dyn Toolbox> = Arc::new(registry(mark));
    let set = AgentSet::new(specs, base, Arc::clone(&provider), HashMap::new()).expect("agents");
    Engine::new(provider, set.toolbox())
}

async fn run(engine: &Engine, request: TurnRequest) -> (Vec<ChatEvent>, TurnOutcome) {
    let (events, outcome) = tokio::time::timeout(BOUND, engine.run_collect(request))
        .await
        .expect("the tree must end");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    (events, outcome)
}

/// The outcomes of the top-level turn's sub-agent calls, in call order.
fn outcomes(outcome: &TurnOutcome) -> Vec<AgentOutcome> {
    outcome
        .new_messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => serde_json::from_str(content).ok(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn eight_children_in_parallel_never_pass_the_trees_model_calls() {
    for max in [3u32, 5, 9, 12, 20] {
        let model = Arc::new(TreeModel::new(8, Child::Steps(4)));
        let engine = tree_engine(&model, vec![helper()], "fanout");
        let policy = LoopPolicy {
            max_model_calls: max,
            ..LoopPolicy::default()
        };
        let (_, outcome) = run(&engine, TurnRequest::new("m", "go").with_policy(policy)).await;
        let made = u32::try_from(model.calls.load(Ordering::SeqCst)).expect("small");
        assert!(
            made <= max,
            "{made} model calls made against a limit of {max}"
        );
        assert_eq!(
            outcome.stats.model_calls, made,
            "the stats count the whole tree"
        );
        assert!(
            outcome
                .answer
                .as_deref()
                .is_some_and(|a| !a.trim().is_empty()),
            "the parent keeps its answer at {max}"
        );
    }
}

#[tokio::test]
async fn the_trees_tool_calls_are_shared_too() {
    let model = Arc::new(TreeModel::new(8, Child::Steps(6)));
    let engine = tree_engine(&model, vec![helper()], "tools");
    let policy = LoopPolicy {
        max_tool_calls: 12,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run(&engine, TurnRequest::new("m", "go").with_policy(policy)).await;
    assert!(
        outcome.stats.tool_calls <= 12,
        "{} tool calls against 12",
        outcome.stats.tool_calls
    );
    assert!(outcome.answer.is_some());
}

#[tokio::test]
async fn under_the_defaults_a_legitimate_fan_out_runs_to_its_end() {
    let model = Arc::new(TreeModel::new(3, Child::Steps(8)));
    let engine = tree_engine(&model, vec![helper()], "legit");
    let (events, outcome) = run(&engine, TurnRequest::new("m", "go")).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    // 1 + 3 × 8 + 1 model calls; 3 delegations + 3 × 7 lookups.
    assert_eq!(outcome.stats.model_calls, 26);
    assert_eq!(outcome.stats.tool_calls, 24);
    assert_eq!(outcome.stats.delegated.agents, 3);
    assert_eq!(outcome.stats.delegated.model_calls, 24);
    let statuses: Vec<AgentStatus> = outcomes(&outcome).iter().map(|o| o.status).collect();
    assert_eq!(statuses, vec![AgentStatus::Answered; 3]);
    // The children's steps reach the caller's stream, each under its path.
    let nested = events
        .iter()
        .filter(|e| match e {
            ChatEvent::Agent { path, event } => {
                path.len() == 1
                    && path[0].agent == "helper"
                    && matches!(**event, ChatEvent::ToolCallResult { .. })
            }
            _ => false,
        })
        .count();
    assert_eq!(nested, 21, "every lookup of every child is visible");
    assert!(
        !events.iter().any(
            |e| matches!(e, ChatEvent::Agent { event, .. } if event.is_terminal())
                && e.is_terminal()
        ),
        "a child's end is not the turn's end"
    );
}

#[tokio::test]
async fn a_child_cut_by_its_lease_returns_its_answer_marked_partial() {
    let model = Arc::new(TreeModel::new(1, Child::Steps(10)));
    let mut spec = helper();
    spec.policy =
        buddy_engine::PolicyPatch::from_value(json!({"max_model_calls": 3})).expect("patch");
    let engine = tree_engine(&model, vec![spec], "partial");
    let (_, outcome) = run(&engine, TurnRequest::new("m", "go")).await;
    let children = outcomes(&outcome);
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].status, AgentStatus::Partial);
    assert!(children[0].partial);
    assert_eq!(children[0].stop_reason, Some(StopReason::MaxModelCalls));
    assert_eq!(children[0].model_calls, 3);
    assert_eq!(outcome.reason, StopReason::Completed);
}

#[tokio::test]
async fn depth_is_bounded_the_last_level_gets_no_spawn_tool_and_a_call_is_refused() {
    // helper may call helper2, which may call helper3; depth 2 lets helper2 run but
    // not offer helper3, and refuses it when called anyway.
    let model = Arc::new(ReplyChain::default());
    let spec = |name: &str, next: Option<&str>| AgentSpec {
        name: name.into(),
        description: format!("{name} agent"),
        instructions: format!("You are {name}."),
        agents: next.map(|n| vec![n.to_owned()]).unwrap_or_default(),
        skills: vec!["lookup".into()],
        ..AgentSpec::default()
    };
    let provider: Arc<dyn Provider> = Arc::clone(&model) as Arc<dyn Provider>;
    let set = AgentSet::new(
        vec![
            spec("helper", Some("helper2")),
            spec("helper2", Some("helper3")),
            spec("helper3", None),
        ],
        Arc::new(registry("depth")),
        Arc::clone(&provider),
        HashMap::new(),
    )
    .expect("agents");
    let engine = Engine::new(provider, set.toolbox());
    let (events, outcome) = run(&engine, TurnRequest::new("m", "go")).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    let offered = model.offered.lock().expect("lock").clone();
    assert!(
        offered
            .get("helper2")
            .is_some_and(|tools| !tools.contains(&"helper3".to_owned())),
        "{offered:?}"
    );
    let refused = events.iter().any(|e| match e {
        ChatEvent::Agent { path, event } => {
            path.len() == 2
                && matches!(
                    **event,
                    ChatEvent::GuardTripped {
                        guard: GuardKind::Delegation,
                        action: GuardAction::Refused,
                        ..
                    }
                )
        }
        _ => false,
    });
    assert!(
        refused,
        "the call at the last level is refused, visibly: {}",
        buddy_testkit::transcript(&events)
    );
    assert_eq!(
        outcome.stats.delegated.agents, 2,
        "no third level was started"
    );
}

/// Each agent calls the next one named in its instructions' chain, once, then answers.
#[derive(Default)]
struct ReplyChain {
    offered: std::sync::Mutex<HashMap<String, Vec<String>>>,
}

impl Provider for ReplyChain {
    fn name(&self) -> &str {
        "chain"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        let system = request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::System { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let me = system
            .trim_start_matches("You are ")
            .trim_end_matches('.')
            .to_owned();
        let tools: Vec<String> = request
            .callable_tools()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        if let Ok(mut offered) = self.offered.lock() {
            offered.insert(me.clone(), tools);
        }
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        let next = match me.as_str() {
            "" => Some("helper"),
            "helper" => Some("helper2"),
            "helper2" => Some("helper3"),
            _ => None,
        };
        let tokens = match next {
            // A model that calls its next agent whether it is offered or not.
            Some(next) if !answered => reply_tokens(
                "",
                vec![call(&format!("to_{next}"), next, json!({"task": "dig"}))],
            ),
            _ => reply_tokens(&format!("{me} done"), vec![]),
        };
        Box::pin(async move { Ok(futures::stream::iter(tokens).boxed()) })
    }
}

/// Processes whose environment carries `mark` (the command skills of one test).
fn marked_processes(mark: &str) -> usize {
    let needle = format!("BUDDY_TEST_MARK={mark}");
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .chars()
                        .all(|c| c.is_ascii_digit())
                })
                .filter(|e| {
                    std::fs::read(e.path().join("environ"))
                        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_mid_fan_out_leaves_no_process_and_no_open_stream() {
    for child in [Child::Sleeps, Child::HangsInStream] {
        let mark = format!("cancel-{}-{}", std::process::id(), child == Child::Sleeps);
        let model = Arc::new(TreeModel::new(8, child));
        let engine = Arc::new(tree_engine(&model, vec![helper()], &mark));
        let cancel = CancellationToken::new();
        let request = TurnRequest::new("m", "go").with_cancel(cancel.clone());
        let (mut rx, handle) = engine.spawn(request);
        let mut running = 0;
        let mut events = Vec::new();
        tokio::time::timeout(BOUND, async {
            while let Some(event) = rx.recv().await {
                // Cancel once four children are busy (in a process or a stream).
                let busy = match (&event, child) {
                    (ChatEvent::Agent { event, .. }, Child::Sleeps) => {
                        matches!(**event, ChatEvent::ToolCallStart { .. })
                    }
                    (ChatEvent::Agent { event, .. }, Child::HangsInStream) => {
                        matches!(**event, ChatEvent::TextDelta { .. })
                    }
                    _ => false,
                };
                if busy {
                    running += 1;
                    if running == 4 {
                        if child == Child::Sleeps {
                            // The processes are up before the cancel.
                            while marked_processes(&mark) < 4 {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                        }
                        cancel.cancel();
                    }
                }
                events.push(event);
            }
        })
        .await
        .expect("the tree ends after the cancel");
        let outcome = handle.await.expect("joins");
        assert_eq!(outcome.reason, StopReason::Cancelled);
        assert_event_order(&events);
        assert_history_valid(&outcome.messages);
        assert_eq!(
            model.open.load(Ordering::SeqCst),
            0,
            "no model stream left open"
        );
        // The process reaper runs beside the turn: wait (bounded) for it, then count.
        for _ in 0..500 {
            if marked_processes(&mark) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(marked_processes(&mark), 0, "no child process left running");
        assert!(outcome.stats.delegated.agents >= 4, "{:?}", outcome.stats);
    }
}

#[tokio::test]
async fn a_token_budget_holds_over_the_whole_tree() {
    let model = Arc::new(TreeModel::new(4, Child::Steps(8)));
    let engine = tree_engine(&model, vec![helper()], "tokens");
    let policy = LoopPolicy {
        max_turn_tokens: Some(200),
        ..LoopPolicy::default()
    };
    let (_, outcome) = run(&engine, TurnRequest::new("m", "go").with_policy(policy)).await;
    // Each call reports 15 tokens; with the children's calls counted, the tree stops
    // far before the 34 calls it would make unbounded.
    let used = outcome.stats.input_tokens + outcome.stats.output_tokens;
    assert!(
        used <= 200 + 15 * 6,
        "{used} tokens against a budget of 200"
    );
    assert!(outcome.answer.is_some());
}

#[tokio::test]
async fn the_same_task_delegated_again_is_a_repeat() {
    let model = Arc::new(RepeatDelegation::default());
    let provider: Arc<dyn Provider> = Arc::clone(&model) as Arc<dyn Provider>;
    let set = AgentSet::new(
        vec![AgentSpec {
            instructions: "You are a child agent.".into(),
            ..helper()
        }],
        Arc::new(SkillRegistry::new()),
        Arc::clone(&provider),
        HashMap::new(),
    )
    .expect("agents");
    let engine = Engine::new(provider, set.toolbox());
    let (events, outcome) = run(&engine, TurnRequest::new("m", "go")).await;
    assert!(
        events.iter().any(|e| matches!(
            e,
            ChatEvent::GuardTripped {
                guard: GuardKind::Repetition,
                ..
            }
        )),
        "re-delegating the same task is seen as a repeat"
    );
    assert_eq!(
        outcome.stats.delegated.agents, 1,
        "the repeat started no child"
    );
}

/// The caller delegates the same task every round; a child answers at once.
#[derive(Default)]
struct RepeatDelegation {
    calls: AtomicUsize,
}

impl Provider for RepeatDelegation {
    fn name(&self) -> &str {
        "repeat"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let child = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::System { .. }));
        let tokens = if child || !request.offers_tools() {
            reply_tokens("the answer is 4", vec![])
        } else {
            reply_tokens(
                "",
                vec![call(
                    &format!("d{n}"),
                    "helper",
                    json!({"task": "add 2 and 2"}),
                )],
            )
        };
        Box::pin(async move { Ok(futures::stream::iter(tokens).boxed()) })
    }
}

#[tokio::test]
async fn a_money_budget_holds_over_the_tree_and_children_are_priced_like_their_caller() {
    // Each call reports 10 tokens in and 5 out: $1 per million each way makes $0.000015.
    let price = buddy_core::Price::new(1.0, 1.0);
    let budget = buddy_core::Usd::from_dollars(0.000_15).expect("dollars");
    let model = Arc::new(TreeModel::new(8, Child::Steps(6)));
    let engine = tree_engine(&model, vec![helper()], "money");
    let policy = LoopPolicy {
        max_turn_cost_usd: Some(budget),
        ..LoopPolicy::default()
    };
    let request = TurnRequest::new("unlisted-model", "go")
        .with_policy(policy)
        .with_price(Some(price));
    let (_, outcome) = run(&engine, request).await;
    let spent = outcome.stats.cost_usd.expect("priced");
    let call = buddy_core::Usd::from_dollars(0.000_015).expect("dollars");
    // Past the budget by at most the calls in flight when it was reached (4 children).
    assert!(
        spent.nanos() <= budget.nanos() + 4 * call.nanos(),
        "{spent} spent against {budget}"
    );
    let children = outcomes(&outcome);
    assert!(
        children
            .iter()
            .filter(|c| c.status != AgentStatus::Refused)
            .all(|c| c.cost_usd.is_some()),
        "a child on its caller's model is priced like it: {children:?}"
    );
    assert!(outcome.answer.is_some_and(|a| !a.trim().is_empty()));
}

#[tokio::test]
async fn at_most_max_running_agents_run_at_once_the_rest_wait_and_spawns_are_capped() {
    let model = Arc::new(TreeModel::new(20, Child::Steps(3)));
    let engine = tree_engine(&model, vec![helper()], "running");
    let policy = LoopPolicy {
        max_parallel_tools: 32,
        max_calls_per_reply: 32,
        max_running_agents: 3,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run(&engine, TurnRequest::new("m", "go").with_policy(policy)).await;
    assert_eq!(
        model.most_active.load(Ordering::SeqCst),
        3,
        "3 at once, no more"
    );
    let children = outcomes(&outcome);
    let answered = children
        .iter()
        .filter(|c| c.status == AgentStatus::Answered)
        .count();
    let refused = children
        .iter()
        .filter(|c| c.status == AgentStatus::Refused)
        .count();
    assert_eq!(
        (answered, refused),
        (16, 4),
        "16 spawns per turn, then refusals"
    );
    let refusals = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ChatEvent::GuardTripped {
                    guard: GuardKind::Delegation,
                    ..
                }
            )
        })
        .count();
    assert_eq!(refusals, 4);
    // Waiting children start in the order they were asked for.
    let tasks = model.tasks.lock().expect("lock").clone();
    let order: Vec<usize> = tasks
        .iter()
        .filter_map(|t| t.strip_prefix("task ").and_then(|n| n.parse().ok()))
        .collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "in order of asking");
}

#[tokio::test]
async fn a_child_starts_fresh_unless_its_declaration_asks_for_history() {
    for (history, expect_context) in [(0u32, false), (2, true)] {
        let model = Arc::new(TreeModel::new(1, Child::Steps(1)));
        let spec = AgentSpec {
            history,
            ..helper()
        };
        let engine = tree_engine(&model, vec![spec], "history");
        let request = TurnRequest::new("m", "the secret word is tangerine").with_history(vec![
            Message::user("earlier question"),
            Message::assistant("earlier answer"),
        ]);
        run(&engine, request).await;
        let tasks = model.tasks.lock().expect("lock").clone();
        assert_eq!(tasks.len(), 1);
        assert!(tasks[0].starts_with("task 0"));
        assert_eq!(
            tasks[0].contains("tangerine"),
            expect_context,
            "history = {history}: {}",
            tasks[0]
        );
        assert!(
            !tasks[0].contains("earlier question"),
            "only the latest {history} messages"
        );
    }
}

#[tokio::test]
async fn the_callers_deadline_ends_every_child_and_the_tree_still_answers() {
    let model = Arc::new(TreeModel::new(8, Child::HangsInStream));
    let engine = tree_engine(&model, vec![helper()], "deadline");
    let policy = LoopPolicy {
        deadline_ms: Some(300),
        finalize_grace_ms: 1_000,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run(&engine, TurnRequest::new("m", "go").with_policy(policy)).await;
    assert_eq!(outcome.reason, StopReason::Deadline);
    assert!(
        outcome.answer.is_some_and(|a| !a.trim().is_empty()),
        "the caller answers"
    );
    assert_eq!(
        model.open.load(Ordering::SeqCst),
        0,
        "no model stream left open"
    );
    assert!(outcome.stats.delegated.agents >= 4, "{:?}", outcome.stats);
}

/// An agent's call carries its calling turn only while the engine runs it: invoked from
/// outside a turn (a toolbox called directly), it fails with a clear error and runs nothing.
#[tokio::test]
async fn an_agent_invoked_outside_a_turn_refuses_and_runs_nothing() {
    let model = Arc::new(TreeModel::new(1, Child::Steps(1)));
    let provider: Arc<dyn Provider> = Arc::clone(&model) as Arc<dyn Provider>;
    let base: Arc<dyn Toolbox> = Arc::new(registry("outside"));
    let set = AgentSet::new(vec![helper()], base, provider, HashMap::new()).expect("agents");
    let toolbox = set.toolbox();
    let call = ToolCall::new("c1", "helper", r#"{"task": "look up x"}"#);
    let outcome = toolbox.invoke(&call, SkillContext::default()).await;
    assert!(outcome.is_error, "{outcome:?}");
    assert!(
        outcome.content.contains("runs only inside a turn"),
        "{}",
        outcome.content
    );
    assert_eq!(model.calls.load(Ordering::SeqCst), 0, "no model was called");
}
