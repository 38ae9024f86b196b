//! `buddy chat`: an interactive conversation.

use std::path::Path;

use anyhow::Context;
use buddy_engine::TurnRequest;
use clap::Args;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use super::TurnArgs;
use super::drive::{drive_turn, offer_continue};
use super::wiring::setup;

/// `buddy chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    turn: TurnArgs,
}

/// Reads lines until Ctrl-D, Ctrl-C at the prompt or `/exit`; Ctrl-C during a turn cancels it.
pub async fn chat(config: Option<&Path>, args: ChatArgs) -> anyhow::Result<u8> {
    let setup = setup(config, &args.turn, true).await?;
    let mut history = setup.history.clone();
    let mut counts = Vec::new();
    let mut editor = DefaultEditor::new().context("cannot start the line editor")?;
    eprintln!(
        "buddy chat — model {}, sandbox {}. Ctrl-C cancels a running turn; Ctrl-C or Ctrl-D at the prompt quits.",
        setup.model,
        setup.sandbox_dir.display()
    );
    loop {
        let (back, line) = tokio::task::spawn_blocking(move || {
            let line = editor.readline("you> ");
            (editor, line)
        })
        .await?;
        editor = back;
        let line = match line {
            Ok(line) => line,
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("cannot read input"),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/exit" || text == "/quit" {
            break;
        }
        let _ = editor.add_history_entry(text);
        let request = TurnRequest::new(setup.model.clone(), text)
            .with_history(history.clone())
            .with_history_counts(counts.clone())
            .with_policy(setup.policy.clone())
            .with_price(setup.price);
        let outcome = drive_turn(&setup, request, false).await?;
        let outcome = offer_continue(&setup, outcome).await?;
        history = outcome.messages;
        counts = outcome.counts;
    }
    setup.flush_telemetry().await;
    Ok(0)
}
