//! A call a crash left open that had become a task on its server: the next turn waits on
//! the same task again (its result, or how it ended) instead of answering the call as
//! interrupted.

use buddy_core::{ChatEvent, Message, SkillContext, ToolCall};
use tracing::debug;

use super::Turn;
use crate::tape::TapeStep;
use crate::words;

impl Turn<'_> {
    /// The result of open call `id`, waited for again on the task it became, or `None`
    /// when it became none (or the toolbox cannot resume it): then it is answered as
    /// interrupted. Cancel and the deadline end the wait with an error result.
    pub(super) async fn resume_task(&mut self, id: &str) -> Option<Message> {
        let Some(task) = self.open_tasks.get(id).cloned() else {
            return self.resume_agent_tasks(id).await;
        };
        let call = self.open_call(id)?;
        let ctx = SkillContext {
            call_id: call.id.clone(),
            arguments: call.arguments.clone(),
            elicitor: Some(self.elicitation.for_call(&call.id)),
            tasks: self.task_log.clone(),
            ..SkillContext::default()
        };
        let toolbox = self.toolbox();
        let waiting = toolbox.resume(&call, &task, ctx)?;
        debug!(call = %id, task = %task.task_id, server = %task.server, "waiting again on a task a crash left open");
        let deadline = crate::deadline::passed(self.deadline);
        let outcome = tokio::select! {
            outcome = waiting => outcome,
            _ = self.cancel.cancelled() => buddy_core::ToolOutcome::error(words::not_run::INTERRUPTED),
            _ = deadline => buddy_core::ToolOutcome::error(words::not_run::INTERRUPTED),
        };
        self.tape.resumed.insert(call.id.clone(), task);
        self.tape.steps.push(TapeStep::Result {
            call_id: call.id.clone(),
            at: self.ledger.new_count(),
            is_error: outcome.is_error,
            fatal: outcome.fatal,
        });
        self.events
            .emit(ChatEvent::ToolCallResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
            })
            .await;
        Some(Message::tool_result(
            call.id,
            outcome.content,
            outcome.is_error,
        ))
    }

    /// The result of open agent call `id` whose sub-agents (at any depth) were waiting on
    /// tasks when the crash came: each is waited on again and the call's result says
    /// what they returned (the sub-agents' own turns are gone); `None` when none was
    /// recorded or none can be resumed.
    async fn resume_agent_tasks(&mut self, id: &str) -> Option<Message> {
        let call = self.open_call(id)?;
        let toolbox = self.toolbox();
        if !toolbox.is_agent(&call.name) {
            return None;
        }
        let tasks = crate::agents::of_agent_call(id, self.open_tasks.iter());
        let (mut results, mut resumed) = (Vec::new(), Vec::new());
        for (tool, child_id, task) in tasks {
            let child = ToolCall::new(child_id.clone(), tool.clone(), "{}");
            let ctx = SkillContext {
                call_id: child_id,
                elicitor: Some(self.elicitation.for_call(&call.id)),
                ..SkillContext::default()
            };
            let Some(waiting) = toolbox.resume(&child, &task, ctx) else {
                continue;
            };
            debug!(call = %id, task = %task.task_id, server = %task.server, "waiting again on a sub-agent's task a crash left open");
            let deadline = crate::deadline::passed(self.deadline);
            let outcome = tokio::select! {
                outcome = waiting => outcome,
                _ = self.cancel.cancelled() => buddy_core::ToolOutcome::error(words::not_run::INTERRUPTED),
                _ = deadline => buddy_core::ToolOutcome::error(words::not_run::INTERRUPTED),
            };
            resumed.push((child.id, task));
            results.push((tool, outcome));
        }
        self.tape.resumed.extend(resumed);
        if results.is_empty() {
            return None;
        }
        let is_error = results.iter().all(|(_, o)| o.is_error);
        let content = words::resumed_agent_tasks(&call.name, &results);
        self.tape.steps.push(TapeStep::Result {
            call_id: call.id.clone(),
            at: self.ledger.new_count(),
            is_error,
            fatal: false,
        });
        self.events
            .emit(ChatEvent::ToolCallResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
                is_error,
            })
            .await;
        Some(Message::tool_result(call.id, content, is_error))
    }

    /// The call with `id` in the history's last round of calls.
    fn open_call(&self, id: &str) -> Option<ToolCall> {
        self.ledger.messages().iter().rev().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().find(|c| c.id == id).cloned()
            }
            _ => None,
        })
    }
}
