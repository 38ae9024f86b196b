use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The current time in UTC.
pub struct GetTime;

impl Skill for GetTime {
    fn name(&self) -> &str {
        "get_time"
    }

    fn description(&self) -> &str {
        "Current date and time in UTC (RFC 3339) and as a Unix timestamp."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }

    /// Pure within a turn: asking again a moment later adds nothing, and is the
    /// classic "get_time forever" loop.
    fn semantics(&self) -> RepeatSemantics {
        RepeatSemantics::Pure
    }

    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let now = OffsetDateTime::now_utc();
            let text = now.format(&Rfc3339).map_err(super::failed)?;
            Ok(format!("{text} (unix {})", now.unix_timestamp()))
        })
    }
}
