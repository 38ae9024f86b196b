//! A sub-agent's events on their way up: each is wrapped with the agent's step of the
//! path and sent up the calling turn's stream; a child that goes silent for too long is
//! stopped; what it said so far is kept for a partial answer.

use std::time::Duration;

use buddy_core::{AgentHop, ChatEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the watch saw of a sub-agent's stream.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    /// The stall watch stopped it.
    pub stalled: bool,
    /// Its work so far: the text of its latest reply, else its latest tool result.
    pub so_far: String,
}

/// The longest work-so-far kept, in bytes.
const SO_FAR_BYTES: usize = 4_000;

/// Passes `events` up to `up` as `hop`'s until the child's stream ends; cancels `child`
/// when no event came for `stall`.
pub(crate) async fn forward(
    mut events: mpsc::Receiver<ChatEvent>,
    hop: AgentHop,
    up: mpsc::Sender<ChatEvent>,
    stall: Option<Duration>,
    child: CancellationToken,
) -> Watched {
    let mut watched = Watched::default();
    let mut reply = String::new();
    let mut result = String::new();
    loop {
        let next = match stall.filter(|_| !watched.stalled) {
            Some(quiet) => match tokio::time::timeout(quiet, events.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    watched.stalled = true;
                    child.cancel();
                    continue;
                }
            },
            None => events.recv().await,
        };
        let Some(event) = next else { break };
        match &event {
            ChatEvent::TextDelta { text } if reply.len() < SO_FAR_BYTES => reply.push_str(text),
            ChatEvent::ToolCallStart { .. } => reply.clear(),
            ChatEvent::ToolCallResult {
                content, is_error, ..
            } if !is_error => {
                result.clear();
                result.push_str(cut(content));
            }
            _ => {}
        }
        // A caller that went away loses the events, never the child's end.
        let _ = up.send(wrapped(&hop, event)).await;
    }
    watched.so_far = if reply.trim().is_empty() {
        result
    } else {
        cut(&reply).to_owned()
    };
    watched
}

/// `event` of the agent `hop` as the calling turn's stream carries it: one path from the
/// top-level turn down, however deep it came from.
fn wrapped(hop: &AgentHop, event: ChatEvent) -> ChatEvent {
    match event {
        ChatEvent::Agent { mut path, event } => {
            path.insert(0, hop.clone());
            ChatEvent::Agent { path, event }
        }
        event => ChatEvent::Agent {
            path: vec![hop.clone()],
            event: Box::new(event),
        },
    }
}

/// The first [`SO_FAR_BYTES`] of `text`, on a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= SO_FAR_BYTES {
        return text;
    }
    let mut end = SO_FAR_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(agent: &str) -> AgentHop {
        AgentHop {
            agent: agent.into(),
            call_id: format!("call_{agent}"),
        }
    }

    #[tokio::test]
    async fn nested_events_carry_one_path_from_the_top() {
        let (tx, rx) = mpsc::channel(8);
        let (up, mut top) = mpsc::channel(8);
        tx.send(ChatEvent::Agent {
            path: vec![hop("b")],
            event: Box::new(ChatEvent::TextDelta { text: "hi".into() }),
        })
        .await
        .expect("room");
        tx.send(ChatEvent::TextDelta {
            text: "done".into(),
        })
        .await
        .expect("room");
        drop(tx);
        let watched = forward(rx, hop("a"), up, None, CancellationToken::new()).await;
        assert!(!watched.stalled);
        assert_eq!(watched.so_far, "done");
        let Some(ChatEvent::Agent { path, .. }) = top.recv().await else {
            panic!("wrapped")
        };
        let agents: Vec<&str> = path.iter().map(|h| h.agent.as_str()).collect();
        assert_eq!(agents, ["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_child_is_cancelled_and_its_work_kept() {
        let (tx, rx) = mpsc::channel(8);
        let (up, _top) = mpsc::channel(8);
        let child = CancellationToken::new();
        let watching = tokio::spawn(forward(
            rx,
            hop("a"),
            up,
            Some(Duration::from_secs(30)),
            child.clone(),
        ));
        tx.send(ChatEvent::ToolCallResult {
            id: "1".into(),
            name: "read".into(),
            content: "page one".into(),
            is_error: false,
        })
        .await
        .expect("room");
        child.cancelled().await;
        drop(tx);
        let watched = watching.await.expect("joins");
        assert!(watched.stalled);
        assert_eq!(watched.so_far, "page one");
    }
}
