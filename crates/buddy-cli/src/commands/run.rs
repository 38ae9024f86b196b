//! `buddy run`: one turn.

use std::io::IsTerminal;
use std::path::Path;

use buddy_cli::exit_code::exit_code;
use buddy_engine::TurnRequest;
use clap::Args;

use super::TurnArgs;
use super::drive::drive_turn;
use super::return_large_buffers;
use super::wiring::setup;

/// `buddy run [PROMPT]`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// What to ask (default: the scenario's prompt).
    prompt: Option<String>,
    /// Print every event as one JSON object per line on stdout (see docs/reference/events.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    turn: TurnArgs,
}

/// Runs one turn and returns the exit code for its stop reason.
pub async fn run(config: Option<&Path>, args: RunArgs) -> anyhow::Result<u8> {
    // Approval questions need a person at a terminal; piped or scripted runs refuse
    // the calls that need one (the model reads why).
    let attended = std::io::stdin().is_terminal();
    return_large_buffers();
    let setup = setup(config, &args.turn, attended).await?;
    if attended {
        // A person at the terminal sees where the file skills may read and write.
        eprintln!(
            "buddy run — model {}, sandbox {}",
            setup.model,
            setup.sandbox_dir.display()
        );
    }
    let prompt = match (args.prompt, &setup.scenario) {
        (Some(prompt), _) => prompt,
        (None, Some(scenario)) => scenario.prompt.clone(),
        (None, None) => anyhow::bail!("give a prompt: buddy run \"...\""),
    };
    let request = TurnRequest::new(setup.model.clone(), prompt)
        .with_history(setup.history.clone())
        .with_policy(setup.policy.clone())
        .with_price(setup.price)
        .with_clock(setup.scenario.as_ref().and_then(|s| s.wait_clock()));
    // A scenario may script the client's Ctrl-C.
    if let Some(ms) = setup.scenario.as_ref().and_then(|s| s.cancel_after_ms) {
        let cancel = request.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            cancel.cancel();
        });
    }
    let outcome = drive_turn(&setup, request, args.json).await;
    setup.flush_telemetry().await;
    Ok(exit_code(outcome?.reason))
}
