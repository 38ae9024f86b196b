//! buddy's extension of both APIs' answers (`"buddy": {…}`).

use buddy_core::{StopReason, TurnStats};
use serde::Serialize;

/// buddy's extension of both APIs' answers (`"buddy": {…}`): why the turn ended and what
/// it did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuddyDetails {
    pub stop_reason: Option<StopReason>,
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl BuddyDetails {
    /// Why a turn ended (`None` while it runs) and what its stats say it did.
    pub fn of(stop_reason: Option<StopReason>, stats: &TurnStats) -> Self {
        BuddyDetails {
            stop_reason,
            model_calls: stats.model_calls,
            tool_calls: stats.tool_calls,
        }
    }
}
