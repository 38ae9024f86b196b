//! Who is behind one tool call, as the call's server requests need it: the person to ask
//! (elicitation), the turn's budget (sampling) and where its progress goes.

use std::sync::Arc;

use buddy_core::{CallBudget, Elicitor, ProgressSink, SkillContext, TaskLog};

/// The turn's side of one call; all `None` for a call made outside a turn.
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    pub elicitor: Option<Arc<dyn Elicitor>>,
    pub budget: Option<Arc<dyn CallBudget>>,
    pub progress: Option<Arc<dyn ProgressSink>>,
    /// The call's id, and where a task it becomes is recorded.
    pub call_id: String,
    pub tasks: Option<Arc<dyn TaskLog>>,
}

impl Caller {
    /// The caller a skill's context describes.
    pub(crate) fn of(ctx: &SkillContext) -> Caller {
        Caller {
            elicitor: ctx.elicitor.clone(),
            budget: ctx.budget.clone(),
            progress: ctx.progress.clone(),
            call_id: ctx.call_id.clone(),
            tasks: ctx.tasks.clone(),
        }
    }
}
