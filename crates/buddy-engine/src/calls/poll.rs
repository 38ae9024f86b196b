//! Polls that cost no model calls: a `pollable` call that repeats an earlier one and gets
//! the same result back (noise aside) is run again by buddy itself, with capped backoff
//! (or the wait the result asks for), until its result changes or `poll_max_secs` is
//! spent; the model reads only the changed result, or the last one with how long buddy
//! waited. Each wait is an event; the turn's cancel and deadline interrupt it (the
//! caller drops the future).

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{BoxFuture, ChatEvent, ToolCall, ToolOutcome, WaitClock};
use tokio::sync::mpsc;

use crate::guards::noise::fingerprint;

/// The first wait between two checks, when the result asks for none.
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two checks, whatever the result asks for.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// The shortest wait a result may ask for.
const MIN_WAIT: Duration = Duration::from_millis(100);

/// What the judge knows of an action before it runs again: the results it already got.
#[derive(Clone, Debug)]
pub(crate) struct PollWatch {
    /// Fingerprints (and error flags) of this action's earlier results.
    pub seen: Vec<(bool, u64)>,
    /// The call's argument strings, which results echo (left out of fingerprints).
    pub arg_strings: Vec<String>,
    /// How long buddy may wait on this call (`poll_max_secs`).
    pub budget: Duration,
}

impl PollWatch {
    /// True when `outcome` tells nothing the action had not told before.
    fn unchanged(&self, outcome: &ToolOutcome) -> bool {
        let fp = fingerprint(&outcome.content, &self.arg_strings);
        self.seen.contains(&(outcome.is_error, fp))
    }
}

/// How buddy's own polling of one call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Polled {
    /// Checks buddy made after the model's call.
    pub checks: u32,
    pub waited: Duration,
    /// The result never changed within the budget.
    pub gave_up: bool,
}

/// Runs `call` with `run`, then, while its result repeats an earlier one, waits and runs
/// it again; returns the last outcome and, when buddy checked again, how it went.
pub(crate) async fn poll_until_changed<'a>(
    call: &'a ToolCall,
    watch: PollWatch,
    events: mpsc::Sender<ChatEvent>,
    clock: Option<Arc<dyn WaitClock>>,
    run: impl Fn() -> BoxFuture<'a, ToolOutcome>,
) -> (ToolOutcome, Option<Polled>) {
    let mut outcome = run().await;
    let mut polled = Polled {
        checks: 0,
        waited: Duration::ZERO,
        gave_up: false,
    };
    let mut backoff = FIRST_WAIT;
    while !outcome.fatal && watch.unchanged(&outcome) {
        let wait = asked_wait(&outcome.content)
            .unwrap_or(backoff)
            .clamp(MIN_WAIT, MAX_WAIT);
        if polled.waited + wait > watch.budget {
            polled.gave_up = true;
            break;
        }
        let _ = events
            .send(ChatEvent::ToolPolling {
                id: call.id.clone(),
                name: call.name.clone(),
                check: polled.checks + 1,
                wait_ms: millis(wait),
                waited_ms: millis(polled.waited),
            })
            .await;
        match &clock {
            Some(clock) => clock.sleep(wait).await,
            None => tokio::time::sleep(wait).await,
        }
        polled.waited += wait;
        polled.checks += 1;
        backoff = (backoff * 2).min(MAX_WAIT);
        outcome = run().await;
    }
    let polled = (polled.checks > 0 || polled.gave_up).then_some(polled);
    (outcome, polled)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The wait a result asks for: `Retry-After: 10`, `"retry_after": 2.5`, `poll interval
/// 500 ms`, `"pollInterval": 5000` (MCP tasks give milliseconds), `retry in 30 s`.
pub(crate) fn asked_wait(result: &str) -> Option<Duration> {
    let lower = result.to_ascii_lowercase();
    const KEYS: [(&str, bool); 7] = [
        ("retry-after", false),
        ("retry_after", false),
        ("retryafter", false),
        ("retry after", false),
        ("retry in", false),
        ("pollinterval", true),
        ("poll_interval", false),
    ];
    KEYS.iter().find_map(|(key, millis_by_default)| {
        let at = lower.find(key)? + key.len();
        let rest = lower[at..].trim_start_matches(|c: char| {
            c == '"' || c == ':' || c == '=' || c == ' ' || c == '\''
        });
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].trim_start();
        let seconds = if unit.starts_with("ms") || (*millis_by_default && !unit.starts_with('s')) {
            number / 1000.0
        } else if unit.starts_with("min") {
            number * 60.0
        } else {
            number
        };
        Duration::try_from_secs_f64(seconds).ok()
    })
}

/// What the model is told about a call buddy polled, beside its result (the result
/// itself stays byte for byte what the tool returned).
pub(crate) fn note(call: &ToolCall, polled: &Polled) -> String {
    let secs = polled.waited.as_secs_f64();
    if polled.gave_up {
        format!(
            "[system note] `{}` kept returning the same result; buddy checked it {} more time(s) over {secs:.0} s without calling you and it has not changed (policy poll_max_secs). Check again later only if the answer needs it; otherwise answer with what you have.",
            call.name, polled.checks
        )
    } else {
        format!(
            "[system note] `{}` returned the same result as before; buddy checked it {} more time(s) over {secs:.0} s without calling you, until it changed. The result above is the changed one.",
            call.name, polled.checks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_wait_a_result_asks_for_is_read_in_its_units() {
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        assert_eq!(asked_wait("HTTP 202, Retry-After: 10"), secs(10.0));
        assert_eq!(
            asked_wait(r#"{"status": "running", "retry_after": 2.5}"#),
            secs(2.5)
        );
        assert_eq!(asked_wait(r#"{"pollInterval": 5000}"#), secs(5.0));
        assert_eq!(asked_wait("poll_interval: 500 ms"), secs(0.5));
        assert_eq!(asked_wait("still building, retry in 2 min"), secs(120.0));
        assert_eq!(asked_wait("running"), None);
        assert_eq!(asked_wait("retry after soon"), None);
    }

    fn watch(seen: &str, budget_secs: u64) -> PollWatch {
        PollWatch {
            seen: vec![(false, fingerprint(seen, &[]))],
            arg_strings: Vec::new(),
            budget: Duration::from_secs(budget_secs),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeat_is_checked_again_until_it_changes_with_a_wait_event_each_time() {
        let call = ToolCall::new("c1", "job_status", "{}");
        let runs = AtomicU32::new(0);
        let (tx, mut rx) = mpsc::channel(64);
        let started = tokio::time::Instant::now();
        let (outcome, polled) = poll_until_changed(
            &call,
            watch("running (checked at 11:59:00)", 300),
            tx,
            None,
            || {
                let n = runs.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    // Only the time changes while it runs: noise, the same result.
                    ToolOutcome::ok(if n < 5 {
                        format!("running (checked at 12:00:0{n})")
                    } else {
                        "done".to_owned()
                    })
                })
            },
        )
        .await;
        assert_eq!(outcome.content, "done");
        let polled = polled.expect("polled");
        assert_eq!((polled.checks, polled.gave_up), (5, false));
        // 1 + 2 + 4 + 8 + 16 s of capped backoff, in simulated time.
        assert_eq!(polled.waited, Duration::from_secs(31));
        assert_eq!(started.elapsed(), Duration::from_secs(31));
        let mut waits = 0;
        while let Ok(ChatEvent::ToolPolling { id, .. }) = rx.try_recv() {
            assert_eq!(id, "c1");
            waits += 1;
        }
        assert_eq!(waits, 5);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_last_result_comes_back_saying_so_and_asked_waits_are_kept() {
        let call = ToolCall::new("c1", "job_status", "{}");
        let (tx, _rx) = mpsc::channel(64);
        let (outcome, polled) = poll_until_changed(
            &call,
            watch("running, retry-after: 20", 60),
            tx,
            None,
            || Box::pin(async { ToolOutcome::ok("running, retry-after: 20") }),
        )
        .await;
        assert_eq!(outcome.content, "running, retry-after: 20");
        let polled = polled.expect("polled");
        assert!(polled.gave_up);
        assert_eq!((polled.checks, polled.waited), (3, Duration::from_secs(60)));
        assert!(note(&call, &polled).contains("has not changed"));
    }

    #[tokio::test]
    async fn a_new_result_or_an_error_is_handed_over_at_once() {
        let call = ToolCall::new("c1", "job_status", "{}");
        let (tx, _rx) = mpsc::channel(4);
        let (outcome, polled) =
            poll_until_changed(&call, watch("running", 300), tx.clone(), None, || {
                Box::pin(async { ToolOutcome::ok("queued") })
            })
            .await;
        assert_eq!((outcome.content.as_str(), polled), ("queued", None));
        let (outcome, polled) = poll_until_changed(&call, watch("running", 300), tx, None, || {
            Box::pin(async { ToolOutcome::error("job lost") })
        })
        .await;
        assert!(outcome.is_error);
        assert_eq!(polled, None);
    }
}
