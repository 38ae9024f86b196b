//! `buddy bench cancel`: how fast a cancel reaches every descendant of a tree of agents.
//! Each round starts a top-level turn that fans out to 8 sub-agents (4 run at once, the
//! rest wait); half the children sit in a real `sleep` process (a command skill), half
//! in a model stream that never ends. Once 4 children are busy the turn is cancelled;
//! measured: the time until the turn's terminal event, and until no child process and no
//! model stream is left.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use buddy_core::{
    BoxFuture, ChatEvent, CompletionRequest, FinishReason, Message, Provider, ProviderError, Token,
    TokenStream, ToolCall, Toolbox, Usage,
};
use buddy_engine::{AgentSet, AgentSpec, CancellationToken, Engine, TurnRequest};
use buddy_skills::{CommandSkill, CommandSkillConfig, SkillRegistry};
use futures::StreamExt;
use serde::Serialize;

use crate::BenchError;

/// Children per round, and how many run at once (the default `max_running_agents`).
const FAN: usize = 8;
const RUNNING: usize = 4;

/// One round's timings, in microseconds from the cancel.
#[derive(Clone, Copy, Debug)]
struct Round {
    terminal_us: u64,
    quiet_us: u64,
}

/// The benchmark's result over every round.
#[derive(Debug, Serialize)]
pub struct CancelReport {
    pub rounds: usize,
    pub children_per_round: usize,
    /// Time from the cancel to the top-level turn's terminal event.
    pub terminal_p50_ms: f64,
    pub terminal_p99_ms: f64,
    pub terminal_max_ms: f64,
    /// Time from the cancel until no child process and no model stream is left.
    pub quiet_p50_ms: f64,
    pub quiet_p99_ms: f64,
    pub quiet_max_ms: f64,
    /// Child processes or model streams still alive 5 s after a cancel, over all rounds.
    pub orphans: usize,
}

impl CancelReport {
    /// The targets: every descendant ends within 250 ms (median), p99 ≤ 1 s.
    pub fn met(&self) -> bool {
        self.quiet_p50_ms <= 250.0 && self.quiet_p99_ms <= 1000.0 && self.orphans == 0
    }
}

/// Runs `rounds` rounds in `sandbox` and reports.
pub async fn run_cancel(rounds: usize, sandbox: &Path) -> Result<CancelReport, BenchError> {
    let mut timings = Vec::with_capacity(rounds);
    let mut orphans = 0;
    for round in 0..rounds {
        let mark = format!("bench-cancel-{}-{round}", std::process::id());
        let (timing, left) = one_round(sandbox, &mark).await?;
        timings.push(timing);
        orphans += left;
    }
    let pick = |f: fn(&Round) -> u64| {
        let mut v: Vec<u64> = timings.iter().map(f).collect();
        v.sort_unstable();
        v
    };
    let terminal = pick(|r| r.terminal_us);
    let quiet = pick(|r| r.quiet_us);
    Ok(CancelReport {
        rounds,
        children_per_round: FAN,
        terminal_p50_ms: percentile(&terminal, 50),
        terminal_p99_ms: percentile(&terminal, 99),
        terminal_max_ms: percentile(&terminal, 100),
        quiet_p50_ms: percentile(&quiet, 50),
        quiet_p99_ms: percentile(&quiet, 99),
        quiet_max_ms: percentile(&quiet, 100),
        orphans,
    })
}

/// The `p`th percentile of sorted microseconds, in milliseconds.
fn percentile(sorted: &[u64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len()) - 1;
    sorted[at] as f64 / 1000.0
}

/// One fan-out, cancelled once 4 children are busy; the timings and what was left.
async fn one_round(sandbox: &Path, mark: &str) -> Result<(Round, usize), BenchError> {
    let model = Arc::new(HangingModel::default());
    let provider: Arc<dyn Provider> = Arc::clone(&model) as Arc<dyn Provider>;
    let base: Arc<dyn Toolbox> = Arc::new(sleeper_registry(sandbox, mark)?);
    let worker = AgentSpec {
        name: "worker".into(),
        description: "Works on one part.".into(),
        instructions: "You are a worker agent.".into(),
        skills: vec!["sleeper".into()],
        ..AgentSpec::default()
    };
    let set = AgentSet::new(vec![worker], base, Arc::clone(&provider), HashMap::new())
        .map_err(BenchError::failed)?;
    let engine = Arc::new(Engine::new(provider, set.toolbox()));
    let cancel = CancellationToken::new();
    let (mut events, handle) =
        engine.spawn(TurnRequest::new("m", "go").with_cancel(cancel.clone()));
    let mut busy = 0;
    let mut cancelled_at = None;
    let mut terminal_at = None;
    let bound = Instant::now() + Duration::from_secs(30);
    while let Ok(Some(event)) = tokio::time::timeout_at(bound.into(), events.recv()).await {
        if let ChatEvent::Agent { event, .. } = &event
            && matches!(
                **event,
                ChatEvent::ToolCallStart { .. } | ChatEvent::TextDelta { .. }
            )
        {
            busy += 1;
            if busy == RUNNING && cancelled_at.is_none() {
                // Every sleeping child's process is up before the cancel.
                while marked_processes(mark) < RUNNING / 2 && Instant::now() < bound {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                cancelled_at = Some(Instant::now());
                cancel.cancel();
            }
        }
        if event.is_terminal() {
            terminal_at = Some(Instant::now());
        }
    }
    handle.await.map_err(BenchError::failed)?;
    let cancelled_at =
        cancelled_at.ok_or_else(|| BenchError::Failed("the children never got busy".into()))?;
    let terminal_at = terminal_at.ok_or_else(|| BenchError::Failed("no terminal event".into()))?;
    let quiet_by = cancelled_at + Duration::from_secs(5);
    let mut left = model.open.load(Ordering::SeqCst) + marked_processes(mark);
    while left > 0 && Instant::now() < quiet_by {
        tokio::time::sleep(Duration::from_micros(200)).await;
        left = model.open.load(Ordering::SeqCst) + marked_processes(mark);
    }
    let micros = |at: Instant| {
        u64::try_from(at.duration_since(cancelled_at).as_micros()).unwrap_or(u64::MAX)
    };
    Ok((
        Round {
            terminal_us: micros(terminal_at),
            quiet_us: micros(Instant::now()).max(micros(terminal_at)),
        },
        left,
    ))
}

/// A registry with one command skill, `sleeper` (`sleep 30`), tagged with `mark`.
fn sleeper_registry(sandbox: &Path, mark: &str) -> Result<SkillRegistry, BenchError> {
    let config = CommandSkillConfig {
        name: "sleeper".into(),
        description: "Sleeps.".into(),
        parameters: serde_json::json!({"type": "object"}),
        semantics: Default::default(),
        command: vec!["sleep".into(), "30".into()],
        timeout_secs: Some(60.0),
        env: [("BUDDY_BENCH_MARK".to_owned(), mark.to_owned())].into(),
        env_passthrough: Vec::new(),
        cwd: None,
    };
    let mut registry = SkillRegistry::new();
    registry
        .register(Arc::new(
            CommandSkill::new(config, sandbox).map_err(BenchError::failed)?,
        ))
        .map_err(BenchError::failed)?;
    Ok(registry)
}

/// Live processes whose environment carries `mark`.
fn marked_processes(mark: &str) -> usize {
    let needle = format!("BUDDY_BENCH_MARK={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .count()
}

/// The caller fans out to `worker` 8 times; each even-numbered worker starts its
/// `sleeper`, each odd one streams a word and then nothing. Open streams are counted.
#[derive(Default)]
struct HangingModel {
    calls: AtomicUsize,
    open: Arc<AtomicUsize>,
}

/// Counts a stream as open until it is dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn finish(reason: FinishReason) -> Result<Token, ProviderError> {
    Ok(Token::Finish {
        reason,
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        }),
    })
}

impl Provider for HangingModel {
    fn name(&self) -> &str {
        "hanging"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let worker = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::System { content } if content.contains("worker agent")));
        let task = request
            .messages
            .iter()
            .rev()
            .find_map(|m| m.is_user().then(|| m.text().unwrap_or("")))
            .unwrap_or("");
        let open = Open(Arc::clone(&self.open));
        self.open.fetch_add(1, Ordering::SeqCst);
        let stream: TokenStream = if !worker {
            let calls = (0..FAN).map(move |i| {
                Ok(Token::ToolCall(ToolCall::new(
                    format!("w{n}_{i}"),
                    "worker",
                    serde_json::json!({"task": format!("part {i}")}).to_string(),
                )))
            });
            futures::stream::iter(calls.chain([finish(FinishReason::ToolCalls)])).boxed()
        } else if task.ends_with(['0', '2', '4', '6']) {
            let call = Ok(Token::ToolCall(ToolCall::new(
                format!("s{n}"),
                "sleeper",
                "{}",
            )));
            futures::stream::iter([call, finish(FinishReason::ToolCalls)]).boxed()
        } else {
            let word = Ok(Token::Text {
                text: "thinking".into(),
            });
            futures::stream::iter([word])
                .chain(futures::stream::pending())
                .boxed()
        };
        Box::pin(async move {
            Ok(stream
                .map(move |token| {
                    let _open = &open;
                    token
                })
                .boxed())
        })
    }
}
