//! Driving a turn at the terminal for `run` and `chat`: its events printed as they come,
//! Ctrl-C, approval questions, tools' questions (MCP elicitation) and the offer to
//! continue a capped turn.

use buddy_cli::printer::Printer;
use buddy_core::PendingCall;
use buddy_engine::{CancellationToken, ElicitationDesk, Engine, Resume, TurnOutcome, TurnRequest};
use buddy_telemetry::TurnScope;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::signals::interrupt;
use super::wiring::Setup;

impl Setup {
    /// `request`, traced when telemetry is on: its spans join the trace that `TRACEPARENT`
    /// names (the environment carrier of W3C trace context), if set.
    fn traced(&self, request: TurnRequest) -> TurnRequest {
        let Some(telemetry) = &self.telemetry else {
            return request;
        };
        let traceparent = std::env::var("TRACEPARENT").ok();
        let tracestate = std::env::var("TRACESTATE").ok();
        let observer = telemetry.turn_served(
            TurnScope {
                traceparent: traceparent.as_deref(),
                tracestate: tracestate.as_deref(),
                provider: &self.provider,
                model: &self.model,
                conversation: None,
            },
            self.serving.served_by(),
        );
        request.with_observer(observer)
    }
}

/// Runs one turn, printing its events as they come; Ctrl-C cancels it (the turn still
/// ends with its terminal event). A turn that pauses for approval is asked about on
/// the terminal and resumed, until it ends for another reason.
pub async fn drive_turn(
    setup: &Setup,
    request: TurnRequest,
    json: bool,
) -> anyhow::Result<TurnOutcome> {
    let mut request = setup.traced(
        request
            .with_approval(setup.approval.clone())
            .with_prices(setup.prices.clone()),
    );
    loop {
        // Questions are asked on the terminal, never with --json (stdout is for events).
        if setup.attended && !json {
            request = request.with_elicitation(Arc::new(ElicitationDesk::new()));
        }
        let (outcome, pending) = drive_once(&setup.engine, request, json).await?;
        if outcome.reason != buddy_core::StopReason::ApprovalRequired || pending.is_empty() {
            return Ok(outcome);
        }
        let decisions =
            tokio::task::spawn_blocking(move || super::approve::decide(&pending)).await?;
        request = setup.traced(
            TurnRequest::resume(
                setup.model.clone(),
                outcome.messages,
                Resume::Decisions(decisions),
            )
            .with_history_counts(outcome.counts)
            .with_policy(setup.policy.clone())
            .with_approval(setup.approval.clone())
            .with_price(setup.price)
            .with_prices(setup.prices.clone()),
        );
    }
}

/// Offers to continue a turn that stopped at a limit; runs the continuation if the
/// person says yes. Returns the outcome that stands.
pub async fn offer_continue(setup: &Setup, outcome: TurnOutcome) -> anyhow::Result<TurnOutcome> {
    let reason = outcome.reason;
    if !reason.is_capped() {
        return Ok(outcome);
    }
    if !tokio::task::spawn_blocking(move || super::approve::continue_capped(reason)).await? {
        return Ok(outcome);
    }
    let request = TurnRequest::resume(setup.model.clone(), outcome.messages, Resume::Continue)
        .with_history_counts(outcome.counts)
        .with_policy(setup.policy.clone())
        .with_price(setup.price);
    drive_turn(setup, request, false).await
}

/// One run of the engine, printing its events; returns the calls it paused for, if any.
async fn drive_once(
    engine: &Arc<Engine>,
    request: TurnRequest,
    json: bool,
) -> anyhow::Result<(TurnOutcome, Vec<PendingCall>)> {
    let cancel: CancellationToken = request.cancel.clone();
    let desk = request.elicitation.clone();
    let ctrl_c = interrupt()?;
    tokio::pin!(ctrl_c);
    let (mut events, handle) = engine.spawn(request);
    let mut printer = Printer::new(json, std::io::stdout(), std::io::stderr());
    let mut pending = Vec::new();
    // With --json the terminal event waits for the turn's recording, which goes just
    // before it (so the output can be replayed) while the terminal event stays last.
    let mut terminal = None;
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) if json && event.is_terminal() => terminal = Some(event),
                Some(event) => {
                    printer.print(&event);
                    match event {
                        buddy_core::ChatEvent::ApprovalRequired { calls } => pending = calls,
                        buddy_core::ChatEvent::ElicitationRequired { id, server, message, schema, order, .. } => {
                            if let Some(desk) = desk.clone() {
                                // Ctrl-C while the form is asked cancels the turn and ends
                                // the asking at once.
                                let stop = Arc::new(AtomicBool::new(false));
                                let stopped = Arc::clone(&stop);
                                let asking = tokio::task::spawn_blocking(move || {
                                    let stop = || stopped.load(Ordering::SeqCst);
                                    let request = buddy_core::ElicitationRequest { server, message, schema, order };
                                    super::elicit::answer(&desk, &id, &request, &stop)
                                });
                                tokio::pin!(asking);
                                tokio::select! {
                                    asked = &mut asking => asked?,
                                    _ = &mut ctrl_c, if !cancel.is_cancelled() => {
                                        cancel.cancel();
                                        stop.store(true, Ordering::SeqCst);
                                        asking.await?;
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
                None => break,
            },
            _ = &mut ctrl_c, if !cancel.is_cancelled() => cancel.cancel(),
        }
    }
    let outcome = handle.await?;
    if let Some(terminal) = terminal {
        if let Ok(recording) = serde_json::to_value(outcome.recording()) {
            printer.print(&buddy_core::ChatEvent::Recording { recording });
        }
        printer.print(&terminal);
    }
    Ok((outcome, pending))
}
