//! Asking the person at the terminal about calls that wait for approval, and about
//! continuing a turn that stopped at a limit.

use buddy_core::PendingCall;
use buddy_engine::{CallDecision, Decision};

/// Shows `question` and reads the answer, trimmed; `None` at end of input.
fn ask(question: &str) -> Option<String> {
    super::terminal_line::ask(question, &|| false).map(|answer| answer.trim().to_owned())
}

/// Asks y / n / e about each pending call. End of input rejects what is left.
pub fn decide(pending: &[PendingCall]) -> Vec<CallDecision> {
    pending
        .iter()
        .map(|call| CallDecision {
            call_id: call.id.clone(),
            decision: decide_one(call),
        })
        .collect()
}

fn decide_one(call: &PendingCall) -> Decision {
    eprintln!(
        "\n`{}` wants to run with {}\n  ({})",
        call.name, call.arguments, call.why
    );
    loop {
        let Some(answer) = ask("Allow it? [y]es / [n]o / [e]dit the arguments: ") else {
            return Decision::Reject {
                reason: Some("nobody answered (the input closed)".to_owned()),
            };
        };
        match answer.to_lowercase().as_str() {
            "y" | "yes" => return Decision::Approve,
            "n" | "no" => {
                let reason = ask("Why not? (the model reads this; Enter to skip): ")
                    .filter(|r| !r.is_empty());
                return Decision::Reject { reason };
            }
            "e" | "edit" => {
                let Some(text) = ask("New arguments, as one JSON object: ") else {
                    continue;
                };
                match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(arguments) if arguments.is_object() => {
                        return Decision::Edit { arguments };
                    }
                    Ok(_) => {
                        eprintln!("That is JSON, but not an object like {{\"path\": \"a.txt\"}}.")
                    }
                    Err(e) => eprintln!("That is not JSON ({e}); try again."),
                }
            }
            _ => eprintln!("Answer y, n or e."),
        }
    }
}

/// Asks whether to continue a turn that stopped at `reason` with a fresh budget.
pub fn continue_capped(reason: buddy_core::StopReason) -> bool {
    let question = format!(
        "The turn stopped at its limit ({reason}). Continue it with a fresh budget? [y/N]: "
    );
    matches!(
        ask(&question).as_deref().map(str::to_lowercase).as_deref(),
        Some("y" | "yes")
    )
}
