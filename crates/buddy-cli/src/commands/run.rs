//! `buddy run`: one turn.

use std::path::Path;

use buddy_cli::exit_code::exit_code;
use buddy_cli::printer::Printer;
use buddy_engine::{CancellationToken, TurnRequest};
use clap::Args;

use super::TurnArgs;
use super::setup::setup;

/// `buddy run [PROMPT]`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// What to ask (default: the scenario's prompt).
    prompt: Option<String>,
    /// Print every event as one JSON object per line on stdout (see README: "JSON output").
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    turn: TurnArgs,
}

/// Runs one turn and returns the exit code for its stop reason.
pub async fn run(config: Option<&Path>, args: RunArgs) -> anyhow::Result<u8> {
    let setup = setup(config, &args.turn)?;
    let prompt = args.prompt.unwrap_or_else(|| setup.scenario.prompt.clone());
    let cancel = CancellationToken::new();
    let request = TurnRequest::new(setup.model.clone(), prompt)
        .with_history(setup.history.clone())
        .with_policy(setup.policy.clone())
        .with_cancel(cancel.clone());
    let (mut events, handle) = setup.engine.spawn(request);
    let mut printer = Printer::new(args.json, std::io::stdout(), std::io::stderr());
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => printer.print(&event),
                None => break,
            },
            _ = &mut ctrl_c, if !cancel.is_cancelled() => cancel.cancel(),
        }
    }
    let outcome = handle.await?;
    Ok(exit_code(outcome.reason))
}
